package engine

import (
	"context"
	"testing"
)

// newHandShard opens a leader and a follower of one shard with a queue "q"
// (docs/chaos.md, "Open findings": acknowledged deletes came back).
func newHandShard(t *testing.T) (*handShard, *Queue) {
	t.Helper()
	h := &handShard{t: t, rep: &handReplica{kick: make(chan struct{}, 1)}, clk: NewFakeClock(t0), next: 1}
	h.leader = h.open(t.TempDir(), h.rep)
	h.fdir = t.TempDir()
	h.follower = h.open(h.fdir, &handReplica{kick: make(chan struct{}, 1)})
	t.Cleanup(func() { h.leader.Close(); h.follower.Close() })
	if err := h.leader.SetLeader(true, 1); err != nil {
		t.Fatal(err)
	}
	h.do(func() error { _, err := h.leader.CreateQueue("q", DefaultQueueConfig()); return err })
	q, err := h.leader.Queue("q")
	if err != nil {
		t.Fatal(err)
	}
	return h, q
}

// followerCount returns how many messages the follower's queue holds.
func (h *handShard) followerCount() int {
	h.t.Helper()
	fq, err := h.follower.Queue("q")
	if err != nil {
		h.t.Fatal(err)
	}
	info, err := fq.Attributes()
	if err != nil {
		h.t.Fatal(err)
	}
	return int(info.Active + info.Inactive + info.Delayed)
}

// TestReplicaStateBeforeSendAppliedKeepsBody (replica.go invariant 4): a
// follower persists entries before it applies them (etcd raft's
// asynchronous storage writes: the append worker and the apply loop run
// side by side). The state record of a receive whose send is persisted
// but not applied yet must still name the send's body: written with no
// body location, it made recovery's fold (and the checkpoint's) forget the
// body, and the next start skipped the message ("skipping a message of no
// known queue ... size=0"). The replica then lacked a live message, reused
// its slot once it led, and every other replica's rebuild found two live
// messages in one slot ("recovered message moved to another slot").
func TestReplicaStateBeforeSendAppliedKeepsBody(t *testing.T) {
	for _, checkpoint := range []bool{false, true} {
		name := "recovery"
		if checkpoint {
			name = "checkpoint"
		}
		t.Run(name, func(t *testing.T) {
			h, q := newHandShard(t)
			h.hold = true // persisted on the follower, applied later
			h.do(func() error { _, err := q.Send([]SendEntry{{Body: []byte("m")}}, nil); return err })
			var msgs []Message
			h.do(func() (err error) {
				msgs, err = q.Receive(context.Background(), ReceiveOptions{Max: 1}, nil)
				return err
			})
			if len(msgs) != 1 {
				t.Fatalf("received %d messages, want 1", len(msgs))
			}
			h.hold = false
			if err := h.follower.ApplyCommitted(h.held); err != nil {
				t.Fatal(err)
			}
			h.held = nil
			if n := h.followerCount(); n != 1 {
				t.Fatalf("the follower holds %d messages live, want 1", n)
			}
			if checkpoint {
				r, err := h.follower.repl()
				if err != nil {
					t.Fatal(err)
				}
				if err := r.checkpoint(); err != nil {
					t.Fatal(err)
				}
			}
			h.restartFollower()
			if n := h.followerCount(); n != 1 {
				t.Fatalf("after a restart the follower holds %d messages, want 1 (recovery: %+v)", n, h.follower.Recovery())
			}
			// The delete still finds it there.
			h.do(func() error {
				errs := make([]error, 1)
				if _, err := q.Delete([]ReceiptHandle{msgs[0].Handle}, errs); err != nil {
					return err
				}
				return errs[0]
			})
			if n := h.followerCount(); n != 0 {
				t.Fatalf("after the delete the follower holds %d messages, want 0", n)
			}
		})
	}
}

// TestReplicaStateAfterRestartBeforeSendAppliedKeepsBody: the same as
// TestReplicaStateBeforeSendAppliedKeepsBody across a restart: the send's
// entry is persisted, not known to be committed at the restart, and the
// receive's entry is persisted after it (load finds the send's body in the
// log: replica.go invariant 4).
func TestReplicaStateAfterRestartBeforeSendAppliedKeepsBody(t *testing.T) {
	h, q := newHandShard(t)
	h.hold = true
	commit := h.next - 1 // the queue's creation
	h.do(func() error { _, err := q.Send([]SendEntry{{Body: []byte("m")}}, nil); return err })
	// A restart that does not know the send's entry is committed.
	if err := h.follower.PersistHardState(ReplicaHardState{Term: 1, Vote: 1, Commit: commit}); err != nil {
		t.Fatal(err)
	}
	if err := h.follower.SyncLog(); err != nil {
		t.Fatal(err)
	}
	if err := h.follower.CloseForRebuild(); err != nil {
		t.Fatal(err)
	}
	h.follower = h.open(h.fdir, &handReplica{kick: make(chan struct{}, 1)})
	if n := h.followerCount(); n != 0 {
		t.Fatalf("the follower holds %d messages before the send is applied", n)
	}
	var msgs []Message
	h.do(func() (err error) {
		msgs, err = q.Receive(context.Background(), ReceiveOptions{Max: 1}, nil)
		return err
	})
	if len(msgs) != 1 {
		t.Fatalf("received %d messages, want 1", len(msgs))
	}
	h.hold = false
	if err := h.follower.ApplyCommitted(h.held); err != nil {
		t.Fatal(err)
	}
	h.held = nil
	h.restartFollower()
	if n := h.followerCount(); n != 1 {
		t.Fatalf("after a restart the follower holds %d messages, want 1 (recovery: %+v)", n, h.follower.Recovery())
	}
}
