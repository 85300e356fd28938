package engine

import "testing"

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
		return len(st.slab.chunks)
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
