package cluster

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// twoNodesDownToOne is a cluster of two nodes and two shards from which
// node 2 was removed (smqctl cluster rm 2, through node 1): node 1 is the
// only voter and leader of every shard, and node 2 still runs with its
// old view (voters 1 and 2).
func twoNodesDownToOne(t *testing.T) *testCluster {
	t.Helper()
	c := newTestCluster(t, 2, 2)
	c.leaderQueue("q")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.nodes[0].RemoveMember(ctx, 2); err != nil {
		t.Fatal(err)
	}
	eventually(t, "node 1 leads every shard alone", func() error {
		for _, s := range c.nodes[0].shards {
			if v := s.st.votersNow(); !slices.Equal(v, []uint64{1}) || s.lead.Load() != 1 {
				return fmt.Errorf("shard %d: voters %v, leader %d", s.id, v, s.lead.Load())
			}
		}
		return nil
	})
	return c
}

// stillServes checks that node 1 still leads every shard as its one voter
// and takes a change (its loops run: a panic in one ends the test binary
// before this).
func stillServes(t *testing.T, c *testCluster) {
	t.Helper()
	eventually(t, "node 1 leads and takes changes in every shard", func() error {
		for _, s := range c.nodes[0].shards {
			if v := s.st.votersNow(); !slices.Equal(v, []uint64{1}) {
				return fmt.Errorf("shard %d: voters %v, want [1]", s.id, v)
			}
			if !s.ready.Load() {
				return fmt.Errorf("shard %d: not ready", s.id)
			}
		}
		return nil
	})
	c.leaderQueue("after") // a change committed and applied
}

// appliedPast waits until shard s, led by its node, has applied every
// entry its log holds now, the ones not yet written included (the
// leader's own progress).
func appliedPast(t *testing.T, s *shard) {
	t.Helper()
	got := make(chan uint64, 1)
	s.do(func() { got <- s.rn.Status().Progress[s.n.cfg.NodeID].Match })
	last := <-got
	if last == 0 {
		t.Fatal("the shard is not led here")
	}
	eventually(t, "the log applied", func() error {
		var applied uint64
		done := make(chan struct{})
		s.do(func() { applied = s.rn.Status().Applied; close(done) })
		<-done
		if applied < last {
			return fmt.Errorf("applied %d of %d", applied, last)
		}
		return nil
	})
}

// A removal of a shard's last voter is refused by the shard's leader. The
// member asking checks its own view only, and a stale one lets such a
// request through: two removals made at once in a cluster of two
// (smqctl --endpoint node1 cluster rm 2 & smqctl --endpoint node2 cluster
// rm 1), or one asked of a member just removed, which still counts both.
// The leader proposed it, and every node applying it panicked ("removed
// all voters", go.etcd.io/raft's applyConfChange) at each start after
// (members audit, 2026-12-07).
func TestClusterLeaderRefusesToRemoveTheLastVoter(t *testing.T) {
	c := twoNodesDownToOne(t)
	// Node 2, removed, still counts both members: its request, as its
	// RemoveMember(1) makes it while it still knows the leader.
	for sh := range c.shards {
		ok, err := c.nodes[1].tr.askMember(1, c.addrs[1], memberRemove, sh, 1, "")
		if ok {
			t.Errorf("shard %d: the leader took the removal of its last voter (%v)", sh, err)
		}
		// The answer comes once the leader's loop has dealt with it: a
		// proposal it made is in its log now.
		appliedPast(t, c.nodes[0].shards[sh])
	}
	stillServes(t, c)
}

// A committed change that removes a shard's last voter (one in a log from
// a build before the leader refused it) is not applied: the node logs it
// and goes on, and starts again. Applying it panicked, at every start.
func TestClusterCommittedRemovalOfTheLastVoterIsNotApplied(t *testing.T) {
	c := twoNodesDownToOne(t)
	s := c.nodes[0].shards[0]
	cc := &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: pb.ConfChangeRemoveNode.Enum(), NodeId: proto.Uint64(1)}}}
	done := make(chan error, 1)
	s.do(func() { done <- s.rn.ProposeConfChange(cc) })
	if err := <-done; err != nil {
		t.Fatalf("propose: %v", err)
	}
	appliedPast(t, s)
	stillServes(t, c)
	c.stop(0)
	c.start(0)
	stillServes(t, c)
}
