package engine

import (
	"crypto"
	"crypto/rsa"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"
)

// slowSigner signs with testPushKey after a pause, and counts the
// signatures under way at once.
type slowSigner struct {
	pause      time.Duration
	now, most  atomic.Int32
	signatures atomic.Int32
	underlying *rsa.PrivateKey
}

func (s *slowSigner) Public() crypto.PublicKey { return &s.underlying.PublicKey }

func (s *slowSigner) Sign(r io.Reader, digest []byte, o crypto.SignerOpts) ([]byte, error) {
	n := s.now.Add(1)
	defer s.now.Add(-1)
	for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
	}
	s.signatures.Add(1)
	time.Sleep(s.pause)
	return s.underlying.Sign(r, digest, o)
}

// TestPushSignatureIsNotInTheAttemptsTimeout: a signature that takes
// longer than PushOptions.Timeout (a CPU busy signing for many endpoints)
// made every attempt time out before it was sent, and a healthy endpoint
// was pushed the same notification again (push audit, 2026-12-06). The
// attempt's timeout now starts once its request is signed.
func TestPushSignatureIsNotInTheAttemptsTimeout(t *testing.T) {
	signer := &slowSigner{pause: 1500 * time.Millisecond, underlying: testPushKey()}
	b, clk := openTest(t, Options{Push: PushOptions{Signer: signer, CertURL: testCertURL, Concurrency: 2, Timeout: time.Second}})
	rcv := newReceiver(t, clk)
	done := attempts(b)
	if _, err := b.CreateTopic("t", DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Subscribe("t", "s", SubscriptionConfig{Endpoint: rcv.url("/"), Format: FormatSimplified}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Publish("t", PublishInput{Body: []byte("slowly signed"), Owner: "1"}); err != nil {
		t.Fatal(err)
	}
	waitAttempt(t, done)
	if st := b.PushStats(); st.Delivered != 1 || st.Failed != 0 {
		t.Fatalf("a push signed in 1.5 s with a 1 s timeout: %+v", st)
	}
	verifyPush(t, rcv.next(t), &testPushKey().PublicKey, testCertURL)
}

// TestPushSignaturesAreBounded: signatures for many endpoints at once run
// at most 1 at a time, leaving CPUs to the API (a burst to
// 200 endpoints made a SendMessage take seconds: push audit, 2026-12-06).
func TestPushSignaturesAreBounded(t *testing.T) {
	signer := &slowSigner{pause: 20 * time.Millisecond, underlying: testPushKey()}
	b, clk := openTest(t, Options{Push: PushOptions{Signer: signer, CertURL: testCertURL, Concurrency: 2}})
	done := attempts(b)
	if _, err := b.CreateTopic("t", DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	const subs = 8
	for i := range subs {
		rcv := newReceiver(t, clk) // an endpoint each: no slot of invariant 3 is shared
		if _, err := b.Subscribe("t", fmt.Sprintf("s%d", i), SubscriptionConfig{Endpoint: rcv.url("/"), Format: FormatSimplified}); err != nil {
			t.Fatal(err)
		}
	}
	for range 4 {
		if _, err := b.Publish("t", PublishInput{Body: []byte("fan out"), Owner: "1"}); err != nil {
			t.Fatal(err)
		}
	}
	for range 4 * subs {
		waitAttempt(t, done)
	}
	if st := b.PushStats(); st.Delivered != 4*subs {
		t.Fatalf("push stats %+v", st)
	}
	if most := signer.most.Load(); most > int32(cap(signSlots)) || signer.signatures.Load() != 4*subs {
		t.Fatalf("%d signatures, at most %d at once; the bound is %d", signer.signatures.Load(), most, cap(signSlots))
	}
}
