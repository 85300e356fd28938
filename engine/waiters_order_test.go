package engine

import (
	"context"
	"testing"
	"time"
)

// waitWaiters waits, bounded, until q has n waiting receives.
func waitWaiters(t *testing.T, q *Queue, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for q.waiters.waiting() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters, want %d", q.waiters.waiting(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// polled is one long poll's outcome.
type polled struct {
	who int
	m   Message
	err error
}

// startPolls starts n long polls of one message each, one after another
// in line (each waiting before the next starts), on the fake clock of
// openTest: none ends by itself. Their outcomes arrive on the channel.
func startPolls(t *testing.T, ctx context.Context, q *Queue, n int) <-chan polled {
	t.Helper()
	out := make(chan polled, n)
	base := q.waiters.waiting()
	for i := 0; i < n; i++ {
		go func() {
			m, err := q.ReceiveOne(ctx, 20*time.Second)
			out <- polled{i, m, err}
		}()
		waitWaiters(t, q, base+i+1)
	}
	return out
}

// nextPolled returns the next poll that ended, or fails after a bound
// (on the fake clock a poll nobody wakes waits for good).
func nextPolled(t *testing.T, q *Queue, c <-chan polled, what string) polled {
	t.Helper()
	select {
	case p := <-c:
		return p
	case <-time.After(20 * time.Second):
		info, _ := q.Attributes()
		t.Fatalf("%s: no long poll returned (%d Active, %d waiting): a wake-up was lost", what, info.Active, q.waiters.waiting())
	}
	return polled{}
}

// TestLongPollsAreServedInArrivalOrder: docs/architecture.md ("Long
// polling", and the Queue's "waiting receives (FIFO)"): a message sent to
// a queue with receives waiting goes to the one that has waited longest.
// No test caught a wake-up that took the newest waiter (enginearch audit:
// waitQueue.wake taking the tail passed every engine test).
func TestLongPollsAreServedInArrivalOrder(t *testing.T) {
	b, _ := openTest(t, Options{})
	q := mustQueue(t, b, "q", DefaultQueueConfig())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	polls := startPolls(t, ctx, q, 3)
	for want := 0; want < 3; want++ {
		if _, err := q.SendOne(context.Background(), SendEntry{Body: []byte("m")}); err != nil {
			t.Fatal(err)
		}
		p := nextPolled(t, q, polls, "one send")
		if p.err != nil {
			t.Fatalf("poll %d: %v", p.who, p.err)
		}
		if p.who != want {
			t.Fatalf("send %d went to poll %d, which started waiting after poll %d: the waiting receives are not served first come, first served", want, p.who, want)
		}
		if err := q.DeleteOne(context.Background(), p.m.Handle); err != nil {
			t.Fatal(err)
		}
	}
}

// TestActivationsWakeAsManyPollsAsMessages: a send of n messages, and a
// timer that makes n messages Active at once (delays ending, visibility
// timeouts ending), each wake n waiting receives, not one: the others
// would sleep through their wait beside Active messages. Each poll takes
// one message, so a poll that took one never passes a wake-up on.
func TestActivationsWakeAsManyPollsAsMessages(t *testing.T) {
	const n = 3
	b, clk := openTest(t, Options{})
	cfg := DefaultQueueConfig()
	cfg.VisibilityTimeout = 5 * time.Second // within the polls' wait
	q := mustQueue(t, b, "q", cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	take := func(what string, polls <-chan polled) []ReceiptHandle {
		t.Helper()
		var hs []ReceiptHandle
		for range n {
			p := nextPolled(t, q, polls, what)
			if p.err != nil {
				t.Fatalf("%s: poll %d: %v", what, p.who, p.err)
			}
			hs = append(hs, p.m.Handle)
		}
		return hs
	}
	batch := make([]SendEntry, n)
	for i := range batch {
		batch[i] = SendEntry{Body: []byte("m")}
	}
	// A send.
	polls := startPolls(t, ctx, q, n)
	if _, err := q.Send(batch, nil); err != nil {
		t.Fatal(err)
	}
	take("a send of 3", polls)
	// Visibility timeouts ending together.
	polls = startPolls(t, ctx, q, n)
	clk.Advance(cfg.VisibilityTimeout)
	hs := take("3 visibility timeouts ending", polls)
	errs := make([]error, n)
	if f, err := q.Delete(hs, errs); f != 0 || err != nil {
		t.Fatal(f, err, errs)
	}
	// Delays ending together.
	for i := range batch {
		batch[i].Delay, batch[i].HasDelay = time.Second, true
	}
	if _, err := q.Send(batch, nil); err != nil {
		t.Fatal(err)
	}
	polls = startPolls(t, ctx, q, n)
	clk.Advance(time.Second)
	take("3 delays ending", polls)
}
