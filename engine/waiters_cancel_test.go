package engine

import (
	"context"
	"testing"
	"time"
)

// TestCancelledLongPollPassesItsWakeUpOn: a long poll whose context ends
// just as a send wakes it must hand the wake-up to the next waiter, or
// that one sleeps through its whole wait while the message is Active. (A
// waiter that ended on its context dropped the wake-up it had been given:
// on the fake clock here, the other receive never returned; otherwise it
// waited out its wait, up to 30 s.) Seen failing without the hand-on in
// waitReceive.
func TestCancelledLongPollPassesItsWakeUpOn(t *testing.T) {
	b, _ := openTest(t, Options{}) // a fake clock: no wait ends by itself
	q := mustQueue(t, b, "q", DefaultQueueConfig())
	waitFor := func(n int) {
		t.Helper()
		for k := 0; q.waiters.waiting() != n; k++ {
			if k == 5000 {
				t.Fatalf("%d waiters, want %d", q.waiters.waiting(), n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	for round := range 30 {
		ctxA, cancelA := context.WithCancel(context.Background())
		aGot := make(chan Message, 1)
		go func() {
			defer close(aGot)
			if m, err := q.ReceiveOne(ctxA, 10*time.Second); err == nil { // first in line
				aGot <- m
			}
		}()
		waitFor(1)
		got := make(chan Message, 1)
		go func() {
			m, err := q.ReceiveOne(context.Background(), 10*time.Second)
			if err == nil {
				got <- m
			}
			close(got)
		}()
		waitFor(2)
		cancelA()
		if _, err := q.SendOne(context.Background(), SendEntry{Body: []byte("m")}); err != nil {
			t.Fatal(err)
		}
		if m, took := <-aGot; took {
			// The first waiter ran before it saw its context end and took
			// the message: the round shows nothing; another is sent for
			// the second waiter.
			if err := q.DeleteOne(context.Background(), m.Handle); err != nil {
				t.Fatal(err)
			}
			if _, err := q.SendOne(context.Background(), SendEntry{Body: []byte("m")}); err != nil {
				t.Fatal(err)
			}
		}
		var m Message
		var ok bool
		select {
		case m, ok = <-got:
		case <-time.After(10 * time.Second): // a bound: on the fake clock it waits for good
			info, _ := q.Attributes()
			t.Fatalf("round %d: the second waiter never got the message (%d Active): the wake-up was lost with the cancelled poll", round, info.Active)
		}
		if !ok {
			t.Fatalf("round %d: the second waiter's receive failed", round)
		}
		if err := q.DeleteOne(context.Background(), m.Handle); err != nil {
			t.Fatal(err)
		}
	}
}
