package engine

import (
	"context"
	"testing"
)

// TestFollowerGivesItsSlabBackToo: the leader's stripe, emptied, drops its
// chunks at its next send (slab.go); the follower's copy of it, which
// only claims the leader's slot numbers (apply.go), kept every chunk of
// its peak for as long as it followed (review-e, 2026-12-07).
func TestFollowerGivesItsSlabBackToo(t *testing.T) {
	h, q := newHandShard(t)
	h.sendMany(q, 1024)
	h.do(func() error { _, err := q.Purge(); return err })
	h.sendMany(q, 16)
	chunks := func(b *Broker) int {
		bq, err := b.Queue("q")
		if err != nil {
			t.Fatal(err)
		}
		st := &bq.stripes[0]
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.slab.heldChunks()
	}
	if got := h.followerCount(); got != 16 {
		t.Fatalf("the follower holds %d messages, want 16", got)
	}
	lc, fc := chunks(h.leader), chunks(h.follower)
	t.Logf("after 1,024 sent, a purge and 16 sent: leader %d chunks, follower %d", lc, fc)
	if fc > lc {
		t.Errorf("the follower keeps %d chunks (16 KiB each) for 16 messages, the leader %d", fc, lc)
	}
}

// TestFollowerTrimsToo: a leader's queue drained from a backlog to a few
// messages, never empty, gives its empty chunks back (slab.go trim), and
// so does its follower, which claims the leader's slot numbers (apply.go):
// a slot in a chunk it gave back makes that chunk again. The follower
// then leads and sends: its free set is rebuilt over the chunks it holds.
func TestFollowerTrimsToo(t *testing.T) {
	h, q := newHandShard(t)
	h.sendMany(q, 8192)
	held := func(b *Broker) (chunks, msgs int) { return slabHeld(t, b, "q") }
	peak, _ := held(h.follower)
	one := []SendEntry{{Body: []byte("y")}}
	for _, n := held(h.leader); n > 100; _, n = held(h.leader) {
		var ms []Message
		h.do(func() (err error) {
			ms, err = q.Receive(context.Background(), ReceiveOptions{Max: 16}, nil)
			return err
		})
		hs := make([]ReceiptHandle, len(ms))
		for i := range ms {
			hs[i] = ms[i].Handle
		}
		h.do(func() error { _, err := q.Delete(hs, make([]error, len(hs))); return err })
		h.do(func() error { _, err := q.Send(one, nil); return err })
	}
	lc, lm := held(h.leader)
	fc, fm := held(h.follower)
	t.Logf("peak %d chunks; after the drain: leader %d chunks for %d messages, follower %d for %d", peak, lc, lm, fc, fm)
	if fm != lm {
		t.Fatalf("the follower holds %d messages, the leader %d", fm, lm)
	}
	if fc > peak/2 || lc > peak/2 {
		t.Fatalf("of the peak's %d chunks the leader keeps %d and the follower %d for %d messages", peak, lc, fc, lm)
	}
	fq, err := h.follower.Queue("q")
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, fq)
	if err := h.follower.SetLeader(true, 2); err != nil {
		t.Fatal(err)
	}
	for i := range fq.stripes {
		st := &fq.stripes[i]
		st.mu.Lock()
		err := st.slab.check(true)
		st.mu.Unlock()
		if err != nil {
			t.Fatalf("the follower leading, stripe %d: %v", i, err)
		}
	}
}

// TestIdleFollowerGivesItsSlabBack: a follower applying the deletes that
// empty a queue gives its chunks back then, with no send after (apply.go),
// as the leader does (TestIdleQueueGivesItsSlabBack). It gave them back only
// before its next claim.
func TestIdleFollowerGivesItsSlabBack(t *testing.T) {
	h, q := newHandShard(t)
	h.sendMany(q, 1024)
	chunks := func(b *Broker) (held, msgs int) { return slabHeld(t, b, "q") }
	peak, _ := chunks(h.follower)
	h.do(func() error { _, err := q.Purge(); return err })
	if got := h.followerCount(); got != 0 {
		t.Fatalf("the follower holds %d messages, want 0", got)
	}
	fc, _ := chunks(h.follower)
	lc, _ := chunks(h.leader)
	t.Logf("peak %d chunks; after a purge and no send: leader %d, follower %d", peak, lc, fc)
	if bq, _ := h.follower.Queue("q"); fc > len(bq.stripes) || lc > len(bq.stripes) {
		t.Fatalf("after a purge: leader %d chunks, follower %d, want one a stripe", lc, fc)
	}
}

// slabHeld returns the chunks b's queue name holds over its stripes, and
// the messages in them.
func slabHeld(t *testing.T, b *Broker, name string) (chunks, msgs int) {
	t.Helper()
	q, err := b.Queue(name)
	if err != nil {
		t.Fatal(err)
	}
	for i := range q.stripes {
		st := &q.stripes[i]
		st.mu.Lock()
		chunks += st.slab.heldChunks()
		msgs += int(st.slab.used)
		st.mu.Unlock()
	}
	return chunks, msgs
}
