package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

// dropStateFrom drops the node-state frames (handoff.go) that the given
// nodes send, as a node of a build before them sends none (a rolling
// upgrade from a version before 2026-12-06, docs/operations.md
// "Upgrading": `smqctl cluster status` shows DISK `-` for it).
func dropStateFrom(t *testing.T, from ...uint64) {
	drop := func(m *pb.Message) bool {
		c := m.GetContext()
		if m.GetType() != pb.MsgHeartbeat || m.GetTerm() != 0 || len(c) != 2 || c[0] != nodeStateV1 {
			return false
		}
		for _, f := range from {
			if m.GetFrom() == f {
				return true
			}
		}
		return false
	}
	testHookDrop.Store(&drop)
	t.Cleanup(func() { testHookDrop.Store(nil) })
}

// leadOn makes node `to` lead shard i (the current leader hands it over).
func (c *testCluster) leadOn(i int, to uint64) {
	c.t.Helper()
	eventually(c.t, fmt.Sprintf("node %d leads shard %d", to, i), func() error {
		lead := c.nodes[to-1].shards[i].lead.Load()
		if lead == to && c.nodes[to-1].shards[i].ready.Load() {
			return nil
		}
		if lead != 0 && lead != to {
			s := c.nodes[lead-1].shards[i]
			s.do(func() { s.handLeadTo(to) })
		}
		return fmt.Errorf("shard %d led by %d", i, lead)
	})
}

// An upgraded node among two of an older build that sends no node-state
// frame: SIGTERM (HandOverLeads) still hands its leads over, as before
// 61e2cb0 (a voter with no state known counted as able to vote). Since
// then no peer of an older build counts, electable says no, every shard
// is "stuck" and HandOverLeads gives up at its first round with "no member
// to hand N shards to": the shutdown costs clients an election timeout.
func TestClusterShutdownHandsOverAmongOlderBuilds(t *testing.T) {
	dropStateFrom(t, 2, 3)
	c := newTestCluster(t, 3, 2)
	c.leadOn(0, 1)
	c.leadOn(1, 1)
	// The older nodes have run for a while (a rolling upgrade's): longer
	// than stateStale, in which a node of this build would have sent a
	// frame many times over.
	time.Sleep(stateStale + time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.nodes[0].HandOverLeads(ctx); err != nil {
		t.Fatalf("HandOverLeads among nodes of an older build: %v", err)
	}
	for i, s := range c.nodes[0].shards {
		if l := s.lead.Load(); l == 1 || l == 0 {
			t.Errorf("shard %d: lead %d after the hand-over", i, l)
		}
	}
}

// The same for a full disk: the upgraded node (node 2) whose disk fills
// hands its leads to the members of the older build (they have room, and
// a peer with no state counts as not full: handoff.go item 4). Since
// 61e2cb0 it keeps them, and its queues refuse sends (DiskFull) until the
// older nodes are upgraded.
func TestClusterDiskFullHandsOverAmongOlderBuilds(t *testing.T) {
	dropStateFrom(t, 1, 3)
	c, free := fullDiskCluster(t, 2, 0)
	names, _, send := c.queuePerShard()
	c.leadOn(0, 2)
	c.leadOn(1, 2)
	free.Store(0)
	eventuallyWithin(t, 20*time.Second, "node 2 leads no shard", func() error {
		for _, name := range names {
			send(name) // makes the brokers sample the space; refused while node 2 leads
		}
		for i, s := range c.nodes[1].shards {
			if l := s.lead.Load(); l == 2 || l == 0 {
				return fmt.Errorf("shard %d: lead %d", i, l)
			}
		}
		return nil
	})
}
