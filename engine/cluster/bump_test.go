package cluster

import (
	"sync/atomic"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/smqd/smqd/engine"
)

// TestDroppedCommitBumpsLeaveNoFollowerBehind (bump.go): the leader drops
// the empty appends that only bump a follower's commit index, and every
// replica still applies everything; then one append with entries to a
// follower is lost and the shard goes idle: the empty append the commit
// sends that follower must not be dropped (invariant 3), or nothing would
// tell it of the gap (its heartbeats' commit stays below it, and each
// heartbeat answer's append would be dropped too), and it would never
// hold the last message.
func TestDroppedCommitBumpsLeaveNoFollowerBehind(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	li, q := c.leaderQueue("q")
	for i := 0; i < 20; i++ {
		if _, err := q.Send([]engine.SendEntry{{Body: []byte("m")}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	c.converged("q", 20, 0)
	if n := c.nodes[li].shards[0].bumpsDropped.Load(); n == 0 {
		t.Fatal("the leader dropped no commit bump")
	}
	f := uint64((li+1)%3 + 1)
	var lost atomic.Bool
	drop := func(m *pb.Message) bool {
		return m.GetTo() == f && m.GetType() == pb.MsgApp && len(m.Entries) > 0 && lost.CompareAndSwap(false, true)
	}
	testHookDrop.Store(&drop)
	t.Cleanup(func() { testHookDrop.Store(nil) })
	if _, err := q.Send([]engine.SendEntry{{Body: []byte("last")}}, nil); err != nil {
		t.Fatal(err)
	}
	if !lost.Load() {
		t.Fatal("no append to the follower was lost")
	}
	c.converged("q", 21, 0)
}
