package engine

import (
	"crypto"
	"crypto/rsa"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
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

// TestPushStopGivesBackUntriedNotifications: a worker receives a batch
// and tries its notifications one after another; those it had not tried
// when the broker stopped kept the receive in their DequeueCount, the
// attempt number of their schedule, so each clean restart cost them an
// attempt they never had (push audit, 2026-12-06: 66 of 100 discarded
// after 3 real attempts of BACKOFF_RETRY's 4). Now they go back, visible
// at once and uncounted; the one being pushed keeps its attempt.
func TestPushStopGivesBackUntriedNotifications(t *testing.T) {
	dir := t.TempDir()
	clk := NewFakeClock(t0)
	rcv := newReceiver(t, clk)
	rcv.hang = true
	open := func(disabled bool) *Broker {
		// One worker: it takes the whole backlog in one batch.
		return openPushDurable(t, dir, clk, 1, disabled, func(o *PushOptions) { o.Concurrency = 1 })
	}
	b := open(true)
	if _, err := b.CreateTopic("t", DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Subscribe("t", "s", SubscriptionConfig{Endpoint: rcv.url("/"), Format: FormatSimplified}); err != nil {
		t.Fatal(err)
	}
	const n = 6
	for i := range n {
		if _, err := b.Publish("t", PublishInput{Body: []byte(fmt.Sprintf("n%d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	id := subID(t, b, "t", "s")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = open(false)
	rcv.next(t) // the first is being pushed (the receiver never answers)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = open(true)
	defer b.Close()
	counts := map[string]int{}
	dumpQueue(b.internalQueue(pushQueueName(id)), func(_ MessageID, _ []byte, state string, dq uint32, _ int64) {
		counts[fmt.Sprintf("%s dq=%d", state, dq)]++
	})
	if counts["Inactive dq=1"] != 1 || counts["Active dq=0"] != n-1 {
		t.Fatalf("after a stop during the first push of a batch of %d: %v, want 1 Inactive dq=1 (tried) and %d Active dq=0", n, counts, n-1)
	}
}

// TestPushConnectionsAreBounded: the pusher holds at most
// PushOptions.MaxConns connections open at once, over every endpoint,
// busy or idle. With a per-endpoint bound only, 400 busy endpoints took
// every descriptor the documented open-file limit left, and the process
// ended (push audit, 2026-12-06).
func TestPushConnectionsAreBounded(t *testing.T) {
	k := &sink{delay: 20 * time.Millisecond} // several at once
	endpoint := func() string { return "http://" + k.start(t) + "/" }
	// A lease of 2 timeouts: each worker takes one notification at a
	// time (pushBatch), so all 8 of an endpoint's push at once.
	b, _ := openTest(t, Options{Push: PushOptions{Concurrency: 8, MaxConns: 2, Timeout: 5 * time.Second, Lease: 10 * time.Second}})
	done := attempts(b)
	if _, err := b.CreateTopic("t", DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	const subs, pubs = 4, 64
	for i := range subs {
		if _, err := b.Subscribe("t", fmt.Sprintf("s%d", i), SubscriptionConfig{Endpoint: endpoint(), Format: FormatSimplified}); err != nil {
			t.Fatal(err)
		}
	}
	for range pubs {
		if _, err := b.Publish("t", PublishInput{Body: []byte("x"), Owner: "1"}); err != nil {
			t.Fatal(err)
		}
	}
	for range subs * pubs {
		waitAttempt(t, done)
	}
	if st := b.PushStats(); st.Delivered != subs*pubs || st.Failed != 0 {
		t.Fatalf("push stats %+v", st)
	}
	// The receivers count a connection until they read its end, a moment
	// after the pusher closed it and maybe dialled another: 3-4 seen for
	// the bound of 2, against 35 without it (4 endpoints x 8, and more
	// than one connection a worker as the idle ones are dropped).
	if m := k.most.Load(); m > 8 {
		t.Fatalf("%d push connections open at once, MaxConns 2", m)
	}
	t.Logf("at most %d connections open at once", k.most.Load())
}

// TestPushHangingPathLeavesItsEndpointToOthers: two subscriptions behind
// one host and port, one path hanging. A worker whose attempt failed
// slowly gives the rest of its batch back and pauses (on the broker's
// clock, not advanced here), so the hanging subscription stops taking the
// endpoint's slots after one attempt per worker, and the healthy one is
// delivered. Its workers took every slot for the timeout, again and
// again, and the healthy one behind the same gateway got a twentieth of
// its rate (push audit, 2026-12-06).
func TestPushHangingPathLeavesItsEndpointToOthers(t *testing.T) {
	var hung, ok atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/hang" {
			hung.Add(1)
			<-r.Context().Done() // until the pusher gives up
			return
		}
		ok.Add(1)
		w.WriteHeader(204)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	base := "http://" + ln.Addr().String()
	const workers = 4
	b, _ := openTest(t, Options{Push: PushOptions{Concurrency: workers, Timeout: time.Second}})
	if _, err := b.CreateTopic("t", DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	for name, path := range map[string]string{"bad": "/hang", "good": "/ok"} {
		if _, err := b.Subscribe("t", name, SubscriptionConfig{Endpoint: base + path, Format: FormatSimplified}); err != nil {
			t.Fatal(err)
		}
	}
	const n = 40
	for range n {
		if _, err := b.Publish("t", PublishInput{Body: []byte("x"), Owner: "1"}); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(60 * time.Second); ok.Load() < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the healthy subscription got %d of %d in 60 s; the hanging one %d attempts", ok.Load(), n, hung.Load())
		}
	}
	if h := hung.Load(); h > workers {
		t.Fatalf("the hanging subscription made %d attempts while the healthy one was delivered, want at most %d (one a worker)", h, workers)
	}
	t.Logf("hanging subscription: %d attempts", hung.Load())
}

// TestPushIdleSubscriptionsHoldOneWorkerEach: a subscription starts one
// worker, more only while a backlog waits (grow). 2,000 idle HTTP
// subscriptions were 32,000 goroutines parked in long polls, 409 MB and
// 13.6 % of a CPU at rest (push audit, 2026-12-06).
func TestPushIdleSubscriptionsHoldOneWorkerEach(t *testing.T) {
	b, clk := openTest(t, Options{Push: PushOptions{Concurrency: 16}})
	rcv := newReceiver(t, clk)
	if _, err := b.CreateTopic("t", DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	const subs = 20
	for i := range subs {
		if _, err := b.Subscribe("t", fmt.Sprintf("s%d", i), SubscriptionConfig{Endpoint: rcv.url("/"), Format: FormatSimplified}); err != nil {
			t.Fatal(err)
		}
	}
	if added := runtime.NumGoroutine() - before; added > 2*subs {
		t.Fatalf("%d idle subscriptions added %d goroutines (16 workers each before)", subs, added)
	}
	// A backlog still gets its workers, and every notification is pushed.
	done := attempts(b)
	for range 40 {
		if _, err := b.Publish("t", PublishInput{Body: []byte("x"), Owner: "1"}); err != nil {
			t.Fatal(err)
		}
	}
	for range 40 * subs {
		waitAttempt(t, done)
	}
	if st := b.PushStats(); st.Delivered != 40*subs || st.Failed != 0 {
		t.Fatalf("push stats %+v", st)
	}
}
