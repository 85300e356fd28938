package engine

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// steppingClock is a FakeClock whose every reading, while stepping, is one
// second later than the one before: start-up reads the time more than once
// (the rebuild's now, then each queue's timing wheel), and here those reads
// differ by seconds, not by the milliseconds of a real start.
type steppingClock struct {
	*FakeClock
	stepping atomic.Bool
	offset   atomic.Int64 // ns added to the fake time
}

func (c *steppingClock) Now() time.Time {
	if c.stepping.Load() {
		return c.FakeClock.Now().Add(time.Duration(c.offset.Add(int64(time.Second))))
	}
	return c.FakeClock.Now().Add(time.Duration(c.offset.Load()))
}

// TestRecoveryDeadlineBetweenStartupReadings: a received message whose
// visibility ends after the rebuild read the time but before its queue's
// timing wheel did is made visible again, not left Inactive outside the
// wheel for ever. (Seen failing before the fix: some of the messages never
// came back; found by TestPushKill9, whose final child was left with three
// leased notifications it never pushed.)
func TestRecoveryDeadlineBetweenStartupReadings(t *testing.T) {
	dir := t.TempDir()
	clk := &steppingClock{FakeClock: NewFakeClock(t0)}
	open := func() *Broker { return openDurableTest(t, dir, nil, func(o *Options) { o.Clock = clk }) }
	b := open()
	q := mustQueue(t, b, "q", DefaultQueueConfig())
	const n = 400
	for i := range n {
		if _, err := q.Send([]SendEntry{{Body: []byte{byte(i), byte(i >> 8)}}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Visibility ends 1, 2, ..., n seconds from now: one deadline for each
	// of the next n readings of the stepping clock.
	for i := range n {
		got, err := q.Receive(context.Background(), ReceiveOptions{Max: 1, HasWait: true}, nil)
		if err != nil || len(got) != 1 {
			t.Fatal(err, len(got))
		}
		if _, _, err := q.ChangeVisibility(got[0].Handle, time.Duration(i+1)*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	clk.stepping.Store(true)
	b = open()
	clk.stepping.Store(false)
	defer b.Close()
	clk.Advance(2 * n * time.Second) // every deadline passed
	q, err := b.Queue("q")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for {
		got, err := q.Receive(context.Background(), ReceiveOptions{Max: MaxBatch, HasWait: true}, nil)
		if err != nil && err != ErrMessageNotExist {
			t.Fatal(err)
		}
		if len(got) == 0 {
			break
		}
		seen += len(got)
	}
	if seen != n {
		t.Fatalf("%d of %d messages visible again after their visibility ended", seen, n)
	}
}

// TestReplicaApplyDeadlineBehindTheWheel: a follower applies a receive
// whose visibility ends after the time the apply read but not after its
// stripe's wheel time (the stripe's timer read the clock later and ran
// first); the message is visible there, not left Inactive outside the
// wheel. The wheel is moved ahead by hand here. (Seen failing without the
// fix in apply.go: the follower's message stayed Inactive.)
func TestReplicaApplyDeadlineBehindTheWheel(t *testing.T) {
	h, q := newHandShard(t)
	h.do(func() error { _, err := q.Send([]SendEntry{{Body: []byte("m")}}, nil); return err })
	h.hold = true
	h.receiveOne(q) // Inactive until 30 s (the default visibility) from now
	fq, err := h.follower.Queue("q")
	if err != nil {
		t.Fatal(err)
	}
	for i := range fq.stripes {
		st := &fq.stripes[i]
		st.mu.Lock()
		st.advanceLocked(h.clk.Now().Add(time.Minute).UnixMilli())
		st.mu.Unlock()
	}
	h.hold = false
	if err := h.follower.ApplyCommitted(h.held); err != nil {
		t.Fatal(err)
	}
	var states []string
	if err := dumpQueueMsgs(fq, func(_ MessageID, _ *Message, state string, _ uint32, _ int64) {
		states = append(states, state)
	}); err != nil {
		t.Fatal(err)
	}
	if len(states) != 1 || states[0] != "Active" {
		t.Fatalf("the follower's message: %v, want [Active]", states)
	}
}

// TestReplicaApplyExpiryBehindTheWheel: as above, but the message's
// retention ends before the wheel's time and its visibility after it, so
// its deadline is the expiry. The follower drops it as expired, and does
// not leave it Inactive outside the wheel, counted for ever. (Seen failing
// before the fix: the follower's queue kept 1 Inactive message.)
func TestReplicaApplyExpiryBehindTheWheel(t *testing.T) {
	h, _ := newHandShard(t)
	cfg := DefaultQueueConfig()
	cfg.Retention, cfg.VisibilityTimeout = 2*time.Minute, 10*time.Minute
	h.do(func() error { _, err := h.leader.CreateQueue("r", cfg); return err })
	q, err := h.leader.Queue("r")
	if err != nil {
		t.Fatal(err)
	}
	h.do(func() error { _, err := q.Send([]SendEntry{{Body: []byte("m")}}, nil); return err })
	h.hold = true
	h.receiveOne(q) // Inactive for 10 min; expires in 2
	fq, err := h.follower.Queue("r")
	if err != nil {
		t.Fatal(err)
	}
	for i := range fq.stripes {
		st := &fq.stripes[i]
		st.mu.Lock()
		st.advanceLocked(h.clk.Now().Add(3 * time.Minute).UnixMilli())
		st.mu.Unlock()
	}
	h.hold = false
	if err := h.follower.ApplyCommitted(h.held); err != nil {
		t.Fatal(err)
	}
	info, err := fq.Attributes()
	if err != nil {
		t.Fatal(err)
	}
	if n := info.Active + info.Inactive + info.Delayed; n != 0 {
		t.Fatalf("the follower's queue holds %d messages (active %d, inactive %d, delayed %d) after their retention ended, want 0",
			n, info.Active, info.Inactive, info.Delayed)
	}
}

// TestRecoveryExpiryBetweenStartupReadings: as
// TestRecoveryDeadlineBetweenStartupReadings, with received messages whose
// retention ends before their visibility: those whose expiry falls between
// start-up's two readings of the time are dropped, not left outside the
// wheel. (Seen failing before the fix: some stayed counted as Inactive.)
func TestRecoveryExpiryBetweenStartupReadings(t *testing.T) {
	dir := t.TempDir()
	clk := &steppingClock{FakeClock: NewFakeClock(t0)}
	open := func() *Broker { return openDurableTest(t, dir, nil, func(o *Options) { o.Clock = clk }) }
	b := open()
	cfg := DefaultQueueConfig()
	cfg.Retention, cfg.VisibilityTimeout = 1000*time.Second, 12*time.Hour
	q := mustQueue(t, b, "q", cfg)
	// Sent one second apart: they expire 1000, 1001, ..., 1399 s from t0.
	const n = 400
	for i := range n {
		if _, err := q.Send([]SendEntry{{Body: []byte{byte(i), byte(i >> 8)}}}, nil); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Second)
	}
	for range n {
		got, err := q.Receive(context.Background(), ReceiveOptions{Max: 1, HasWait: true}, nil)
		if err != nil || len(got) != 1 {
			t.Fatal(err, len(got))
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	clk.Advance(1000*time.Second - n*time.Second) // the first expiry is now
	clk.stepping.Store(true)
	b = open()
	clk.stepping.Store(false)
	defer b.Close()
	clk.Advance(2 * n * time.Second) // every message expired
	q, err := b.Queue("q")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Receive(context.Background(), ReceiveOptions{Max: MaxBatch, HasWait: true}, nil); err != nil && err != ErrMessageNotExist {
		t.Fatal(err)
	}
	info, err := q.Attributes()
	if err != nil {
		t.Fatal(err)
	}
	if left := info.Active + info.Inactive + info.Delayed; left != 0 {
		t.Fatalf("%d of %d messages still counted after their retention ended (inactive %d)", left, n, info.Inactive)
	}
}
