package engine

import (
	"testing"
	"time"
)

// A follower's (or a yielding leader's) mass expiry of more than
// flushChunk messages in one stripe must remember every expiry it did not
// log (replica_expiry.go invariant 1). flushLocked stopped at the first
// chunk's ErrNotLeader, so the chunks after it never reached the replica's
// store: 512 of 1,201 remembered (review, 2026-12-06).
func TestReplicaMassExpiryRemembersEveryChunk(t *testing.T) {
	for _, yield := range []bool{false, true} {
		h, _ := newHandShard(t)
		q := h.shortQueue()
		const n = 1200
		h.sendMany(q, n)
		if yield {
			if err := h.leader.Yield(true); err != nil {
				t.Fatal(err)
			}
		}
		h.clk.Advance(MinRetention + time.Second)
		if c := count(t, h.follower, "short"); c != 0 {
			t.Fatalf("follower holds %d", c)
		}
		want := n + 1
		if got := unloggedOf(h.follower); got != want {
			t.Errorf("follower remembers %d of %d unlogged expiries", got, want)
		}
		if yield {
			if got := unloggedOf(h.leader); got != want {
				t.Errorf("yielding leader remembers %d of %d unlogged expiries", got, want)
			}
		}
	}
}

// The hand-over: the yielding leader proposes no expiry, the next leader
// proposes what it remembered as a follower: all of them (512 before).
func TestReplicaMassExpiryDuringAHandOverIsLoggedWhole(t *testing.T) {
	h, _ := newHandShard(t)
	q := h.shortQueue()
	const n = 1200
	h.sendMany(q, n)
	if err := h.leader.Yield(true); err != nil {
		t.Fatal(err)
	}
	h.clk.Advance(MinRetention + time.Second)
	if props := takeProps(t, h.leader); len(props) != 0 {
		t.Fatalf("yielding leader proposed %d", len(props))
	}
	if err := h.leader.SetLeader(false, 0); err != nil {
		t.Fatal(err)
	}
	if err := h.follower.SetLeader(true, 2); err != nil {
		t.Fatal(err)
	}
	got := 0
	for _, p := range takeProps(t, h.follower) {
		got += expiresIn(t, p)
	}
	if got != n+1 {
		t.Errorf("the new leader logged %d of %d expiries; the rest stay live in every replica's log and index", got, n+1)
	}
}

// sendMany sends n one-byte messages (n a multiple of 16) to q through
// the leader.
func (h *handShard) sendMany(q *Queue, n int) {
	for range n / 16 {
		es := make([]SendEntry, 16)
		for j := range es {
			es[j] = SendEntry{Body: []byte("x")}
		}
		h.do(func() error { _, err := q.Send(es, nil); return err })
	}
}
