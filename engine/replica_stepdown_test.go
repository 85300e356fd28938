package engine

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestReplicaStepDownDiverged (replica.go Diverged): a leader that steps
// down with every change committed goes on as a follower, and may lead
// again; one whose proposal failed, or whose change was refused after it
// stepped down, must be reopened first (the consensus layer rebuilds it:
// engine/cluster shard.go), and SetLeader(true) refuses it.
func TestReplicaStepDownDiverged(t *testing.T) {
	t.Run("clean", func(t *testing.T) {
		h, q := newHandShard(t)
		h.do(func() error { _, err := q.Send([]SendEntry{{Body: []byte("a")}}, nil); return err })
		if err := h.leader.SetLeader(false, 0); err != nil {
			t.Fatal(err)
		}
		if h.leader.Diverged() {
			t.Fatal("a leader whose every change committed has diverged")
		}
		if err := h.leader.SetLeader(true, 2); err != nil {
			t.Fatalf("leading again: %v", err)
		}
	})
	t.Run("failed proposal", func(t *testing.T) {
		h, q := newHandShard(t)
		h.failedSend(q)
		if !h.leader.Diverged() {
			t.Fatal("a leader whose proposal failed has not diverged")
		}
		if err := h.leader.SetLeader(true, 2); !errors.Is(err, ErrDiverged) {
			t.Fatalf("leading again: %v, want ErrDiverged", err)
		}
	})
	t.Run("refused after the step-down", func(t *testing.T) {
		h, q := newHandShard(t)
		h.do(func() error { _, err := q.Send([]SendEntry{{Body: []byte("c")}}, nil); return err })
		if err := h.leader.SetLeader(false, 0); err != nil {
			t.Fatal(err)
		}
		// An operation that passed its leadership check before the step-down
		// and makes its change after it: its records are refused.
		r := h.leader.store.(*replStore)
		if err := r.append([]logRec{{typ: recState, head: make([]byte, snapLen)}}); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("append after the step-down: %v", err)
		}
		if !h.leader.Diverged() {
			t.Fatal("a change refused after the step-down did not make the broker diverge")
		}
		// An expiry is not such a change (every replica makes it).
		h2, _ := newHandShard(t)
		if err := h2.leader.SetLeader(false, 0); err != nil {
			t.Fatal(err)
		}
		r2 := h2.leader.store.(*replStore)
		if err := r2.append([]logRec{{typ: recExpire, head: make([]byte, snapLen)}}); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("expiry after the step-down: %v", err)
		}
		if h2.leader.Diverged() {
			t.Fatal("a follower's expiry made the broker diverge")
		}
	})
	t.Run("long poll", func(t *testing.T) {
		h, q := newHandShard(t)
		got := make(chan error, 1)
		go func() {
			_, err := q.Receive(context.Background(), ReceiveOptions{Max: 1, Wait: 30 * time.Second, HasWait: true}, nil)
			got <- err
		}()
		for q.waiters.waiting() == 0 {
			time.Sleep(time.Millisecond)
		}
		if err := h.leader.SetLeader(false, 0); err != nil {
			t.Fatal(err)
		}
		if err := <-got; !errors.Is(err, ErrNotLeader) {
			t.Fatalf("a long poll at the step-down: %v, want ErrNotLeader", err)
		}
	})
}
