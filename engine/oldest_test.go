package engine

import (
	"context"
	"testing"
	"time"
)

// TestStatsOldestActive: QueueStats.OldestActive is the age of the oldest
// message waiting for a receive, over every lane and stripe; a received
// or delayed message does not count until it is Active again.
func TestStatsOldestActive(t *testing.T) {
	b, clk := openTest(t, Options{Stripes: 2})
	cfg := DefaultQueueConfig()
	cfg.VisibilityTimeout = time.Minute
	q := mustQueue(t, b, "q", cfg)
	oldest := func() time.Duration {
		t.Helper()
		for _, s := range b.Stats().Queues {
			if s.Name == "q" {
				return s.OldestActive
			}
		}
		t.Fatal("no stats for q")
		return 0
	}
	if got := oldest(); got != 0 {
		t.Fatalf("empty queue: %v", got)
	}
	send := func(body string, prio int, delay time.Duration) {
		t.Helper()
		if _, err := q.Send([]SendEntry{{Body: []byte(body), Priority: prio, Delay: delay, HasDelay: delay > 0}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	send("old", 8, 0)
	clk.Advance(10 * time.Second)
	send("urgent", 1, 0)
	send("delayed", 1, 2*time.Minute) // older than both when it is Active
	clk.Advance(5 * time.Second)
	if got := oldest(); got != 15*time.Second {
		t.Fatalf("oldest %v, want 15s (old, in the priority-8 lane)", got)
	}
	recv := func(want string) {
		t.Helper()
		ms, err := q.Receive(context.Background(), ReceiveOptions{Max: 1, HasWait: true}, nil)
		if err != nil || len(ms) != 1 || string(ms[0].Body) != want {
			t.Fatalf("receive: %v %d, want %s", err, len(ms), want)
		}
	}
	recv("urgent")
	if got := oldest(); got != 15*time.Second {
		t.Fatalf("after receiving urgent: %v, want 15s", got)
	}
	recv("old")
	if got := oldest(); got != 0 {
		t.Fatalf("nothing Active: %v", got)
	}
	// Both were received at 15 s: visible again at 75 s. delayed's delay
	// ends at 130 s (it was sent at 10 s).
	recvDelete := func(want string) {
		t.Helper()
		ms, err := q.Receive(context.Background(), ReceiveOptions{Max: 1, HasWait: true}, nil)
		if err != nil || len(ms) != 1 || string(ms[0].Body) != want {
			t.Fatalf("receive: %v %d, want %s", err, len(ms), want)
		}
		if err := q.DeleteOne(context.Background(), ms[0].Handle); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(time.Minute + time.Second) // 76 s
	if got := oldest(); got != 76*time.Second {
		t.Fatalf("old and urgent visible again: %v, want 76s (old)", got)
	}
	recvDelete("urgent")
	recvDelete("old")
	if got := oldest(); got != 0 {
		t.Fatalf("delayed still delayed: %v", got)
	}
	clk.Advance(time.Minute) // 136 s
	if got := oldest(); got != 126*time.Second {
		t.Fatalf("delayed Active: %v, want 126s", got)
	}
}
