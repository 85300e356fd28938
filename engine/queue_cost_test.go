package engine

import (
	"testing"
)

// TestEmptyQueuePaysForNoLanesOrWheel: what docs/architecture.md ("What a
// queue costs") prices an empty queue at, about 1.4 KB, holds because a
// stripe's 16 lanes (128 bytes) come at its first push and a wheel's
// buckets (a 2,304-byte allocation) at its first timed entry; once a
// stripe has them it keeps them. TestStripeSize checks the stripe's own
// size only: lanes made in stripe.init went unnoticed by every test
// (enginearch audit: 4 x 144 more bytes for each of 100,000 queues).
func TestEmptyQueuePaysForNoLanesOrWheel(t *testing.T) {
	for _, durable := range []bool{false, true} {
		opts := Options{}
		if durable {
			opts.Dir = t.TempDir()
		}
		b, err := Open(opts)
		if err != nil {
			t.Fatal(err)
		}
		q := mustQueue(t, b, "q", DefaultQueueConfig())
		for i := range q.stripes {
			st := &q.stripes[i]
			st.mu.Lock()
			lanes, buckets := st.lanes != nil, st.wheel.b != nil
			st.mu.Unlock()
			if lanes || buckets {
				t.Fatalf("durable %v: a new queue's stripe %d holds lanes %v, wheel buckets %v; an empty queue pays for neither", durable, i, lanes, buckets)
			}
		}
		// One message per stripe, received and deleted: each stripe now
		// has both, and keeps them once empty again.
		sent := 0
		for ; sent < 64 && !everyStripeHasLanes(q); sent++ {
			if _, err := q.Send([]SendEntry{{Body: []byte("x")}}, nil); err != nil {
				t.Fatal(err)
			}
		}
		drain(t, q, sent)
		for i := range q.stripes {
			st := &q.stripes[i]
			st.mu.Lock()
			lanes, buckets := st.lanes != nil, st.wheel.b != nil
			st.mu.Unlock()
			if !lanes || !buckets {
				t.Fatalf("durable %v: stripe %d, drained after a message: lanes %v, wheel buckets %v; both are kept", durable, i, lanes, buckets)
			}
		}
		b.Close()
	}
}

func everyStripeHasLanes(q *Queue) bool {
	for i := range q.stripes {
		st := &q.stripes[i]
		st.mu.Lock()
		ok := st.lanes != nil
		st.mu.Unlock()
		if !ok {
			return false
		}
	}
	return true
}
