package engine

import (
	"fmt"
	"testing"
)

// A follower's void spans (the records of entries Raft truncated) are
// forgotten once a checkpoint has folded past them; they used to be kept
// for the broker's life, one more per truncation (docs/chaos.md, "Open
// findings"). The truncated entries' sends stay out of the state. Seen
// failing ("3 void spans left") with the pruning removed.
func TestReplicaFollowerVoidSpansPrunedByCheckpoint(t *testing.T) {
	h, q := newHandShard(t)
	for i := range 3 {
		h.do(func() error { _, err := q.Send([]SendEntry{{Body: []byte(fmt.Sprint("m", i))}}, nil); return err })
	}
	// The three sends' entries (2..4; 1 created the queue), as the leader's
	// log serves them.
	sends, ok, err := h.leader.Entries(2, 5, 1<<20)
	if err != nil || !ok || len(sends) != 3 {
		t.Fatalf("entries 2..4 of the leader: %d, %v, %v", len(sends), ok, err)
	}
	// The follower persists them again at the next indexes, under term 1,
	// and then a new leader's empty entries of term 2 replace them.
	r, err := h.follower.repl()
	if err != nil {
		t.Fatal(err)
	}
	var empties []ReplicaEntry
	for i, e := range sends {
		idx := h.next + uint64(i)
		if err := h.follower.PersistEntries([]ReplicaEntry{{Index: idx, Term: 1, Kind: EntryRecords, Data: e.Data}}); err != nil {
			t.Fatal(err)
		}
		empties = append(empties, ReplicaEntry{Index: idx, Term: 2, Kind: EntryEmpty})
	}
	for _, e := range empties {
		if err := h.follower.PersistEntries([]ReplicaEntry{e}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.follower.ApplyCommitted(empties); err != nil {
		t.Fatal(err)
	}
	h.next += uint64(len(empties))
	nvoid := func() int {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.void)
	}
	if nvoid() == 0 {
		t.Fatal("no void span after three truncated entries: the test tests nothing")
	}
	if err := r.checkpoint(); err != nil {
		t.Fatal(err)
	}
	if n := nvoid(); n != 0 {
		t.Fatalf("%d void spans left after a checkpoint past them", n)
	}
	if n := h.followerCount(); n != 3 {
		t.Fatalf("the follower holds %d messages, want 3 (the truncated entries' sends are not state)", n)
	}
	// A broker one of whose proposals failed keeps its spans, leading or
	// not (a late waiter must find its records void,
	// TestReplicaWaitAfterStepDown); one that led with every change
	// committed prunes them as a follower does (it may follow on for days
	// after a clean step-down).
	lr, err := h.leader.repl()
	if err != nil {
		t.Fatal(err)
	}
	prune := func() int {
		lr.mu.Lock()
		lr.void = append(lr.void, lostSpan{1, 2})
		lr.mu.Unlock()
		lr.pruneVoid(1 << 62)
		lr.mu.Lock()
		defer lr.mu.Unlock()
		return len(lr.void)
	}
	for _, leading := range []bool{true, false} {
		if err := h.leader.SetLeader(leading, 1); err != nil {
			t.Fatal(err)
		}
		if n := prune(); n != 0 {
			t.Fatalf("a broker that has not diverged kept %d void spans (leading now: %v)", n, leading)
		}
	}
	if err := h.leader.SetLeader(true, 2); err != nil {
		t.Fatal(err)
	}
	lr.mu.Lock()
	lr.resolveLocked(&pendingProp{done: make(chan struct{})}, ErrNotLeader)
	lr.mu.Unlock()
	for _, leading := range []bool{true, false} {
		lr.mu.Lock()
		lr.leader = leading
		lr.mu.Unlock()
		if n := prune(); n == 0 {
			t.Fatalf("a broker whose proposal failed forgot its void spans (leading now: %v)", leading)
		}
	}
}
