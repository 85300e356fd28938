package engine

import (
	"testing"
	"time"
)

// A receive reads its time before it takes a stripe's lock, and another
// goroutine may advance the stripe's wheel past that time meanwhile (a
// timer, another receive, a fake clock that jumps). takeLocked must not
// compute the visibility deadline from the older time: with a lag longer
// than the visibility timeout it panicked ("visibility deadline not in the
// future"; seen once in make test, in a push worker's receive, with the
// push tests' jumping fake clock). Seen failing (that panic) without the
// clamp in takeLocked.
func TestTakeWithATimeBehindTheWheel(t *testing.T) {
	clk := NewFakeClock(t0)
	b, err := Open(Options{Clock: clk, Logger: testLogger(t), Stripes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cfg := DefaultQueueConfig()
	cfg.VisibilityTimeout = time.Second
	if _, err := b.CreateQueue("q", cfg); err != nil {
		t.Fatal(err)
	}
	q, err := b.Queue("q")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Send([]SendEntry{{Body: []byte("x")}}, nil); err != nil {
		t.Fatal(err)
	}
	before := b.nowMs()
	clk.Advance(10 * time.Second)
	st := &q.stripes[0]
	var (
		got      []Message
		locs     [1]bodyLoc
		deadline int64
		wheelNow int64
		panicked any
	)
	func() {
		st.mu.Lock()
		defer st.mu.Unlock()
		defer func() { panicked = recover() }()
		st.advanceLocked(b.nowMs()) // another goroutine's advance, after "before" was read
		got = st.takeLocked(before, 1, numLanes, nil, locs[:], nil)
		st.scheduleLocked(b.nowMs())
		st.flushLocked()
		if len(got) == 1 {
			deadline = st.slab.at(locs[0].slot).deadline()
		}
		wheelNow = st.wheel.now
		err = st.checkLocked()
	}()
	if panicked != nil {
		t.Fatalf("take with a time behind the wheel: %v", panicked)
	}
	if len(got) != 1 {
		t.Fatalf("took %d messages, want 1", len(got))
	}
	if deadline <= wheelNow {
		t.Fatalf("visibility deadline %d is not after the wheel's time %d", deadline, wheelNow)
	}
	if err != nil {
		t.Fatal(err)
	}
}
