package server

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
)

// waitFor polls cond with a deadline (no bare sleeps for correctness).
func waitFor(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func longPolls(b *engine.Broker) int64 { return b.Stats().LongPolls }

// Spec §9.6 check 4: empty receive answers 404 at once without a wait,
// after ~2 s with waitseconds=2, and early when a send arrives.
func TestLongPoll(t *testing.T) {
	t.Parallel()
	env := startEnv(t, envConfig{})
	c := env.client()
	c.mustCreate("q")

	start := time.Now()
	wantError(t, c.get("/queues/q/messages"), 404, "MessageNotExist")
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("empty receive without wait took %v", d)
	}

	start = time.Now()
	wantError(t, c.get("/queues/q/messages?waitseconds=2"), 404, "MessageNotExist")
	if d := time.Since(start); d < 1900*time.Millisecond || d > 4*time.Second {
		t.Fatalf("waitseconds=2 answered after %v", d)
	}

	// Woken early by a send.
	type result struct {
		r   *response
		err error
		d   time.Duration
	}
	done := make(chan result, 1)
	poller := env.client()
	go func() {
		start := time.Now()
		r, err := poller.doErr(req{method: "GET", target: "/queues/q/messages?waitseconds=20"})
		done <- result{r, err, time.Since(start)}
	}()
	waitFor(t, "the long poll to wait", 5*time.Second, func() bool { return longPolls(env.broker) == 1 })
	c.mustSend("q", "wake", "")
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	wantStatus(t, res.r, 200)
	var m xMessage
	decode(t, res.r, &m)
	if m.MessageBody != "wake" || res.d > 5*time.Second {
		t.Fatalf("woken after %v with %+v", res.d, m)
	}
}

// The queue's PollingWaitSeconds applies when the request has no
// waitseconds; waitseconds=0 overrides it.
func TestPollingWaitSecondsDefault(t *testing.T) {
	t.Parallel()
	env := startEnv(t, envConfig{})
	c := env.client()
	wantStatus(t, c.put("/queues/q", "<Queue><PollingWaitSeconds>1</PollingWaitSeconds></Queue>"), 201)
	start := time.Now()
	wantError(t, c.get("/queues/q/messages?waitseconds=0"), 404, "MessageNotExist")
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("waitseconds=0 waited %v", d)
	}
	start = time.Now()
	wantError(t, c.get("/queues/q/messages"), 404, "MessageNotExist")
	if d := time.Since(start); d < 900*time.Millisecond || d > 3*time.Second {
		t.Fatalf("PollingWaitSeconds=1 answered after %v", d)
	}
}

// Overload of long polls answers 404 MessageNotExist at once (spec §5.3).
func TestTooManyLongPolls(t *testing.T) {
	env := startEnv(t, envConfig{engineOpts: func(o *engine.Options) { o.MaxLongPolls = 2 }})
	c := env.client()
	c.mustCreate("q")
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for i := 0; i < 2; i++ {
		wg.Add(1)
		p := env.client()
		go func() {
			defer wg.Done()
			r, err := p.doErr(req{method: "GET", target: "/queues/q/messages?waitseconds=20"})
			if err == nil && r.status != 200 {
				err = fmt.Errorf("waiting poll: %s", r)
			}
			errs <- err
		}()
	}
	waitFor(t, "two long polls", 5*time.Second, func() bool { return longPolls(env.broker) == 2 })
	start := time.Now()
	e := wantError(t, c.get("/queues/q/messages?waitseconds=20"), 404, "MessageNotExist")
	if d := time.Since(start); d > time.Second {
		t.Fatalf("overload answered after %v", d)
	}
	t.Logf("overload message: %s", e.Message)
	// Release the two waiters.
	c.mustSend("q", "a", "")
	c.mustSend("q", "b", "")
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// Thousands of concurrent long polls: 2,000 receives wait at once (no lock
// held, no busy loop), then 2,000 messages arrive in batches and each
// receive gets exactly one. Bounded in time.
func TestManyConcurrentLongPolls(t *testing.T) {
	const n = 2000
	env := startEnv(t, envConfig{engineOpts: func(o *engine.Options) { o.MaxLongPolls = n }})
	c := env.client()
	c.mustCreate("q")
	var wg sync.WaitGroup
	type got struct {
		id  string
		err error
	}
	results := make(chan got, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		p := env.client()
		go func() {
			defer wg.Done()
			defer p.close()
			r, err := p.doErr(req{method: "GET", target: "/queues/q/messages?waitseconds=30"})
			if err != nil {
				results <- got{err: err}
				return
			}
			if r.status != 200 {
				results <- got{err: fmt.Errorf("status %s", r)}
				return
			}
			var m xMessage
			if err := xmlUnmarshal(r.body, &m); err != nil {
				results <- got{err: err}
				return
			}
			results <- got{id: m.MessageId}
		}()
	}
	waitFor(t, fmt.Sprintf("%d long polls", n), 60*time.Second, func() bool { return longPolls(env.broker) == n })
	start := time.Now()
	for sent := 0; sent < n; sent += 16 {
		k := min(16, n-sent)
		r := c.post("/queues/q/messages", batchBody(k, func(i int) string { return fmt.Sprintf("<MessageBody>m%d</MessageBody>", sent+i) }))
		wantStatus(t, r, 201)
	}
	wg.Wait()
	close(results)
	seen := make(map[string]bool, n)
	for g := range results {
		if g.err != nil {
			t.Fatal(g.err)
		}
		if seen[g.id] {
			t.Fatalf("message %s received twice", g.id)
		}
		seen[g.id] = true
	}
	if len(seen) != n {
		t.Fatalf("%d distinct messages received, want %d", len(seen), n)
	}
	t.Logf("%d waiting receives served in %v after the first send", n, time.Since(start))
}

// Shutdown answers waiting long polls promptly and returns.
func TestShutdownAnswersLongPolls(t *testing.T) {
	env := startEnv(t, envConfig{skipShutdown: true})
	c := env.client()
	c.mustCreate("q")
	const n = 20
	done := make(chan error, n)
	for i := 0; i < n; i++ {
		p := env.client()
		go func() {
			r, err := p.doErr(req{method: "GET", target: "/queues/q/messages?waitseconds=30"})
			if err == nil && (r.status != 404 || !contains(r.body, "<Code>MessageNotExist</Code>")) {
				err = fmt.Errorf("poll during shutdown: %s", r)
			}
			done <- err
		}()
	}
	waitFor(t, "long polls", 10*time.Second, func() bool { return longPolls(env.broker) == n })
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := env.srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	for i := 0; i < n; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("shutdown with waiting polls took %v", d)
	}
	select {
	case err := <-env.served:
		if err != nil {
			t.Fatalf("Serve returned %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return")
	}
}
