package engine

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// A notification's lease must outlast its push, however long it waited in
// its worker's batch for its turn (topics audit, 2026-12-06: subscriptions
// sharing a slow endpoint waited for its slots past their 60 s leases, and
// pushed the same notifications again without end). One worker, one slot:
// m0's push is held while m1 and m2 are published, so the worker then
// takes both in one batch; the first push of the batch lets 58 s of the
// broker's clock pass, the second another 3 s, so the second waited 58 s
// of its 60 s lease before its turn, and both leases end while it is
// pushed. Each must be pushed once: the first is deleted as soon as it is
// delivered, and the second's lease is renewed before its push. Without
// either (a delete per batch, no renewal), both were pushed twice.
func TestPushRenewsTheLeaseOfALateNotification(t *testing.T) {
	b, clk := openTest(t, Options{Push: PushOptions{Concurrency: 1}})
	release := make(chan struct{})
	var mu sync.Mutex
	got := map[string]int{}
	pushes := 0
	count := func(body string) int {
		mu.Lock()
		defer mu.Unlock()
		return got[body]
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		body := string(raw)
		mu.Lock()
		got[body]++
		pushes++
		n := pushes
		mu.Unlock()
		switch n {
		case 1: // m0
			select {
			case <-release:
			case <-time.After(4 * time.Second): // inside the 5 s push timeout
			}
		case 2: // the first of the batch (m1 or m2)
			clk.Advance(58 * time.Second)
		case 3: // the second
			clk.Advance(3 * time.Second)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	if _, err := b.CreateTopic("t", DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Subscribe("t", "s", SubscriptionConfig{Endpoint: srv.URL, Format: FormatSimplified}); err != nil {
		t.Fatal(err)
	}
	publish := func(body string) {
		t.Helper()
		if _, err := b.Publish("t", PublishInput{Body: []byte(body)}); err != nil {
			t.Fatal(err)
		}
	}
	publish("m0")
	waitUntil(t, "m0's push", func() bool { return count("m0") == 1 })
	publish("m1")
	publish("m2")
	close(release)
	waitUntil(t, "every push delivered", func() bool {
		return count("m1") > 0 && count("m2") > 0 && b.PushStats().Backlog == 0
	})
	mu.Lock()
	defer mu.Unlock()
	if got["m0"] != 1 || got["m1"] != 1 || got["m2"] != 1 {
		t.Fatalf("pushes per notification: %v, want each once", fmt.Sprint(got))
	}
}

// A lease set shorter than the push timeout plus 2 s is raised to it: with
// Timeout 200 ms and Lease 600 ms, every notification was found short of
// its margin, its renewal refused (under ChangeVisibility's 1 s minimum),
// and nothing was pushed, ever (review).
func TestPushWithAShortLeaseStillPushes(t *testing.T) {
	b, clk := openTest(t, Options{Push: PushOptions{Timeout: 200 * time.Millisecond, Lease: 600 * time.Millisecond, Signer: testPushKey(), CertURL: testCertURL}})
	if got := b.pusher.opts.Lease; got < 200*time.Millisecond+2*leaseMargin {
		t.Fatalf("lease %v", got)
	}
	rcv := newReceiver(t, clk)
	if _, err := b.CreateTopic("t", DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Subscribe("t", "s", SubscriptionConfig{Endpoint: rcv.url("/"), Format: FormatSimplified}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Publish("t", PublishInput{Body: []byte("short")}); err != nil {
		t.Fatal(err)
	}
	if req := rcv.next(t); string(req.body) != "short" {
		t.Fatalf("pushed %q", req.body)
	}
}

// A notification that waits for its endpoint's slot longer than its lease
// keeps its lease: it is renewed while it waits, so it is received once
// (review: it lapsed while it waited, was received again, and each lapse
// spent an attempt of its retry strategy, so a failing endpoint got fewer
// attempts than promised). One slot, fourteen subscriptions to one
// endpoint, one notification each: each push takes 5 s of the broker's
// clock (the push timeout's worth), so the last waits 65 s for its turn.
// Each must be received exactly once; without the renewal while waiting,
// those that waited past 60 s were received twice.
func TestPushRenewsALeaseWhileItWaitsForTheSlot(t *testing.T) {
	b, clk := openTest(t, Options{Push: PushOptions{Concurrency: 1}})
	received := attempts(b)
	release := make(chan struct{})
	var mu sync.Mutex
	got := map[string]int{}
	pushes := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		mu.Lock()
		got[r.URL.Path]++
		pushes++
		first := pushes == 1
		mu.Unlock()
		if first {
			select {
			case <-release:
			case <-time.After(20 * time.Second): // bounded; the test releases it
			}
		}
		for range 5 {
			clk.Advance(time.Second)
			time.Sleep(2 * time.Millisecond) // lets a woken worker renew
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	if _, err := b.CreateTopic("t", DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	const subs = 14
	for i := range subs {
		if _, err := b.Subscribe("t", fmt.Sprint("s", i), SubscriptionConfig{Endpoint: fmt.Sprintf("%s/%d", srv.URL, i), Format: FormatSimplified}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Publish("t", PublishInput{Body: []byte("n")}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "every worker has its notification", func() bool {
		for i := range subs {
			a, in, _, _ := b.pusher.subs[subID(t, b, "t", fmt.Sprint("s", i))].q.counts()
			if a != 0 || in != 1 {
				return false
			}
		}
		return true
	})
	close(release)
	waitUntil(t, "every push", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return pushes >= subs && b.PushStats().Backlog == 0
	})
	mu.Lock()
	defer mu.Unlock()
	if n := len(received); n != subs || pushes != subs {
		t.Fatalf("%d receives and %d pushes for %d notifications: %v", n, pushes, subs, got)
	}
}
