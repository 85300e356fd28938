package engine

import (
	"context"
	"errors"
	"testing"
)

// TestReplicaYield (replica_role.go Yield, replica.go append): a leader
// handing its lead over refuses every new operation with ErrRetryOnLeader
// and changes nothing; a proposal made before the yield still commits, and
// Settled says when; a send that passed its first check just before the
// yield is refused at its append without making the broker diverge, and
// its messages are released; Yield(false) takes operations again, and
// SetLeader ends a yield.
func TestReplicaYield(t *testing.T) {
	h, q := newHandShard(t)
	h.do(func() error { _, err := q.Send([]SendEntry{{Body: []byte("before")}}, nil); return err })
	m := h.receiveOne(q) // Inactive now: a delete has something to refuse

	// A send in flight when the yield begins: proposed, not yet committed.
	sent := make(chan error, 1)
	go func() { _, err := q.Send([]SendEntry{{Body: []byte("in flight")}}, nil); sent <- err }()
	h.waitProposals(1)
	if err := h.leader.Yield(true); err != nil {
		t.Fatal(err)
	}
	if h.leader.Settled() {
		t.Fatal("Settled with a proposal waiting for its commit")
	}
	h.pump()
	if err := <-sent; err != nil {
		t.Fatalf("a send proposed before the yield: %v", err)
	}
	if !h.leader.Settled() {
		t.Fatal("not Settled once every proposal committed")
	}

	// New operations are refused before they change anything.
	if _, err := q.Send([]SendEntry{{Body: []byte("refused")}}, nil); !errors.Is(err, ErrRetryOnLeader) {
		t.Fatalf("send while yielding: %v, want ErrRetryOnLeader", err)
	}
	if _, err := q.Receive(context.Background(), ReceiveOptions{Max: 1}, nil); !errors.Is(err, ErrRetryOnLeader) {
		t.Fatalf("receive while yielding: %v, want ErrRetryOnLeader", err)
	}
	if err := deleteHandle(q, m.Handle); !errors.Is(err, ErrRetryOnLeader) {
		t.Fatalf("delete while yielding: %v, want ErrRetryOnLeader", err)
	}
	if _, err := h.leader.CreateQueue("other", DefaultQueueConfig()); !errors.Is(err, ErrRetryOnLeader) {
		t.Fatalf("create queue while yielding: %v, want ErrRetryOnLeader", err)
	}
	if info, err := q.Attributes(); err != nil || info.Active != 1 || info.Inactive != 1 {
		t.Fatalf("after the refused operations: %+v %v, want 1 active and 1 inactive", info, err)
	}

	// A send past its first check before the yield: refused at its append.
	r := h.leader.store.(*replStore)
	if err := r.append([]logRec{{typ: recSend, head: make([]byte, snapLen)}}); !errors.Is(err, ErrRetryOnLeader) {
		t.Fatalf("a send's append while yielding: %v, want ErrRetryOnLeader", err)
	}
	if h.leader.Diverged() {
		t.Fatal("a send refused while yielding made the broker diverge: its messages were only pending")
	}
	if !h.leader.Settled() {
		t.Fatal("a refused send left a proposal")
	}

	// The hand-over did not happen: lead on.
	if err := h.leader.Yield(false); err != nil {
		t.Fatal(err)
	}
	h.do(func() error { _, err := q.Send([]SendEntry{{Body: []byte("after")}}, nil); return err })
	h.deleteOne(q, m.Handle)
	if n := h.followerCount(); n != 2 {
		t.Fatalf("the follower holds %d messages, want 2 (in flight, after)", n)
	}

	// SetLeader ends a yield.
	if err := h.leader.Yield(true); err != nil {
		t.Fatal(err)
	}
	if err := h.leader.SetLeader(true, 2); err != nil {
		t.Fatal(err)
	}
	h.do(func() error { _, err := q.Send([]SendEntry{{Body: []byte("new term")}}, nil); return err })
}
