package engine

import (
	"fmt"
	"testing"
	"time"
)

// TestPushEndpointSemaphoresGoWithTheirSubscriptions: the per-endpoint
// semaphore (push.go invariant 3) is dropped once no subscription pushes
// to its endpoint any more. Every endpoint (scheme, host, port) ever
// subscribed kept one in pusher.sems for the life of the process: a
// subscriber churning through endpoints (receivers on ephemeral ports,
// pods with new addresses) grew the broker's memory without bound (leak
// audit, 2026-12-06).
func TestPushEndpointSemaphoresGoWithTheirSubscriptions(t *testing.T) {
	b, _ := openTest(t, Options{Push: pushOptions()})
	if _, err := b.CreateTopic("t", DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	// Two subscriptions share one endpoint: its semaphore stays while
	// either is there.
	for _, s := range []string{"a", "b"} {
		if _, err := b.Subscribe("t", s, SubscriptionConfig{Endpoint: "http://127.0.0.1:1/" + s}); err != nil {
			t.Fatal(err)
		}
	}
	const n = 300
	for i := range n {
		name := fmt.Sprintf("s%d", i)
		if _, err := b.Subscribe("t", name, SubscriptionConfig{Endpoint: fmt.Sprintf("http://127.0.0.1:%d/x", 20000+i)}); err != nil {
			t.Fatal(err)
		}
		if err := b.Unsubscribe("t", name); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Unsubscribe("t", "a"); err != nil {
		t.Fatal(err)
	}
	sems := func() (int, bool) {
		b.pusher.mu.Lock()
		defer b.pusher.mu.Unlock()
		_, ok := b.pusher.sems["http://127.0.0.1:1"]
		return len(b.pusher.sems), ok
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		k, shared := sems()
		if k == 1 && shared {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d subscriptions to distinct endpoints came and went: %d endpoint semaphores held (shared one held: %v), want 1", n, k, shared)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := b.Unsubscribe("t", "b"); err != nil {
		t.Fatal(err)
	}
	for {
		if k, _ := sems(); k == 0 {
			break
		}
		if time.Now().After(deadline) {
			k, _ := sems()
			t.Fatalf("every subscription gone: %d endpoint semaphores held, want 0", k)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
