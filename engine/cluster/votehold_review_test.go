package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/smqd/smqd/engine"
)

// TestClusterRepairedCopyGetsNoHeldVoteLater (review R): the --wal-repair
// exception (votehold.go, invariant 4) lasts as long as the repaired
// node's process: s.repaired is never cleared. Long after the
// every-copy-damaged procedure finished (every node caught up, the
// repaired copy led and followed since), a node emptied later while
// another member is down grants its held vote to the repaired node even
// though that node lags behind what was acknowledged: it leads without
// the acknowledged entries, and they are lost on every member.
func TestClusterRepairedCopyGetsNoHeldVoteLater(t *testing.T) {
	c, kept := everyCopyDamaged(t)
	c.wipe(1)
	c.holdsIn(0, "q", kept)
	c.holdsIn(1, "q", kept)
	c.wipe(2)
	c.holdsIn(2, "q", kept)
	eventuallyWithin(t, 60*time.Second, "no node holds its vote", func() error {
		for i := range 3 {
			if c.nodes[i].voteHeld.Load() {
				return errors.New("held")
			}
		}
		return nil
	})
	// The procedure is over. Weeks later (node 1's process never
	// restarted) node 1 lags: acknowledged messages reach nodes 2 and 3
	// only.
	c.leadShard0(2)
	drop := func(m *pb.Message) bool {
		return m.GetTo() == 1 && (m.GetType() == pb.MsgApp || m.GetType() == pb.MsgSnap)
	}
	testHookDrop.Store(&drop)
	t.Cleanup(func() { testHookDrop.Store(nil) })
	c.sendBatches("acked", 5) // 80 messages, acknowledged by nodes 2 and 3
	c.holdsIn(1, "q", kept+80)
	c.holdsIn(2, "q", kept+80)
	if info, _ := c.counts(0, "q"); info.Active+info.Inactive != kept {
		t.Fatalf("node 1 did not lag: %+v", info)
	}
	// Node 2 goes down; node 3's disk is lost and it starts empty: it
	// holds its vote (node 2 may hold what it acknowledged).
	c.stop(1)
	c.wipe(2)
	if !c.nodes[2].voteHeld.Load() {
		t.Fatal("node 3 does not hold its vote")
	}
	testHookDrop.Store(nil)
	var led uint64
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) && led == 0 {
		led = c.nodes[0].shards[0].lead.Load()
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("leader while node 2 was down: %d; node 3 repairedPeer %d, votes held %d",
		led, c.nodes[2].shards[0].repairedPeer.Load(), c.nodes[2].shards[0].votesHeld.Load())
	if led != 0 {
		t.Errorf("node %d elected with the held vote of node 3 while node 2, which holds 80 acknowledged messages it lacks, was down", led)
	}
	c.start(1)
	// What each node holds once they agree (or after 20 s), for the report.
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var got [3]int64
		for i := range 3 {
			if info, err := c.counts(i, "q"); err == nil {
				got[i] = info.Active + info.Inactive
			}
		}
		if got[0] == got[1] && got[1] == got[2] {
			t.Logf("nodes 1, 2, 3 hold %v in q (acknowledged: %d)", got, kept+80)
			break
		}
	}
	for i := range 3 {
		c.holdsIn(i, "q", kept+80)
	}
}

// TestClusterReplacementCutShortAfterItsRemovalIsFinished (review R): a
// replacement is a removal (context replace:) and then a re-add proposed
// by the leader that applies the removal (shard.go applyConfChange). When
// that re-add is lost (here: proposed while the leader hands its lead
// over, so Raft drops it; likewise a leader that steps down or fails
// between the two), the held node is a voter of no shard. Its next
// question is refused by every member (rejoin.go replaceMember:
// "replacing it would add it"), so it holds its vote and stays out of
// the cluster for good, asking every 10 s. Before e4bd7df replaceMember
// added it back (cc = addMember).
func TestClusterReplacementCutShortAfterItsRemovalIsFinished(t *testing.T) {
	// Node 3 is a member of a new cluster that was never started (no
	// member has an acknowledgement of it, so its question asks
	// replaceAsked); a wiped --join node, or one added while it held its
	// vote, asks so too.
	c := &testCluster{t: t, nodes: make([]*Node, 3), shards: 1, addrs: map[uint64]string{}}
	for i := range c.nodes {
		c.dirs = append(c.dirs, filepath.Join(t.TempDir(), fmt.Sprint(i+1)))
		c.hold(uint64(i + 1))
	}
	t.Cleanup(c.stopAll)
	c.startSome(0, 1)
	li := -1
	eventually(t, "node 1 or 2 leads shard 0", func() error {
		for i := range 2 {
			if s := c.nodes[i].shards[0]; s.lead.Load() == uint64(i+1) && s.ready.Load() {
				li = i
				return nil
			}
		}
		return errors.New("not yet")
	})
	c.onLeaderIdempotent("q", func(b *engine.Broker) error { _, err := b.CreateQueue("q", engine.DefaultQueueConfig()); return err })
	c.sendBatches("a", 5)
	mute := func(from, to uint64) bool { return from != 3 }
	testHookRejoinAsk.Store(&mute)
	t.Cleanup(func() { testHookRejoinAsk.Store(nil) })
	c.start(2)
	if !c.nodes[2].voteHeld.Load() {
		t.Fatal("node 3 does not hold its vote")
	}
	// Node 1 replaces node 3 as replaceMember does, and hands its lead to
	// node 2 at once: the re-add it proposes when it applies the removal
	// is dropped (a transfer under way); node 2's MsgTimeoutNow is held
	// back so that the transfer lasts past the apply.
	noTimeoutNow := func(m *pb.Message) bool { return m.GetType() == pb.MsgTimeoutNow }
	testHookDrop.Store(&noTimeoutNow)
	t.Cleanup(func() { testHookDrop.Store(nil) })
	s := c.nodes[li].shards[0]
	s.do(func() {
		cc := &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: pb.ConfChangeRemoveNode.Enum(), NodeId: proto.Uint64(3)}},
			Context: []byte(replacePrefix + c.addrs[3])}
		if err := s.rn.ProposeConfChange(cc); err != nil {
			t.Error(err)
		}
		s.rn.TransferLeader(uint64(2 - li))
	})
	eventually(t, "node 3 removed on nodes 1 and 2", func() error {
		for i := range 2 {
			if slices.Contains(c.nodes[i].shards[0].st.votersNow(), 3) {
				return fmt.Errorf("node %d: voters %v", i+1, c.nodes[i].shards[0].st.votersNow())
			}
		}
		return nil
	})
	time.Sleep(time.Second) // the transfer times out; node 1 leads on
	testHookDrop.Store(nil)
	t.Logf("voters on node 1: %v, lead %d", c.nodes[0].shards[0].st.votersNow(), c.nodes[0].shards[0].lead.Load())
	if slices.Contains(c.nodes[0].shards[0].st.votersNow(), 3) {
		t.Skip("the re-add was not dropped: the test did not test that")
	}
	testHookRejoinAsk.Store(nil)
	eventuallyWithin(t, 45*time.Second, "node 3 is added back and votes", func() error {
		if v := c.nodes[0].shards[0].st.votersNow(); !slices.Contains(v, 3) || c.nodes[2].voteHeld.Load() {
			return fmt.Errorf("voters %v, node 3 held %v", v, c.nodes[2].voteHeld.Load())
		}
		return nil
	})
}

// TestClusterWipedNodeWithAnotherShardCountHoldsItsVote (review R): a
// member answers a rejoin question of another shard count with zeros
// (rejoinFlags, acknowledgedBy): no history, no voter. A wiped node
// started with a wrong --shards (a service unit edited by mistake) then
// finds a majority "without history" and takes the cluster for new
// (invariant 2b): it votes at once in the shards it shares with the
// cluster, with an empty log.
func TestClusterWipedNodeWithAnotherShardCountHoldsItsVote(t *testing.T) {
	c := startTestCluster(&testCluster{t: t, nodes: make([]*Node, 3), shards: 2, infoLogs: true})
	c.leadShard0(1)
	c.onLeaderIdempotent("q", func(b *engine.Broker) error { _, err := b.CreateQueue("q", engine.DefaultQueueConfig()); return err })
	c.sendBatches("a", 5)
	var logs syncBuffer
	c.cfgTweak = func(i int, cfg *Config) {
		if i == 2 {
			cfg.Shards = 1
			cfg.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(&logs, testWriter{t}), &slog.HandlerOptions{Level: slog.LevelInfo}))
		}
	}
	c.wipe(2) // its first question runs inside Start
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && c.nodes[2].voteHeld.Load() {
		time.Sleep(20 * time.Millisecond)
	}
	// Replaced (a new member to Raft, with an empty log) it may vote; not
	// as a node of a new cluster.
	if strings.Contains(logs.String(), "a new cluster") {
		t.Fatal("node 3, started empty with 1 shard in a cluster of 2 with history, took the cluster for new and votes")
	}
}

// TestClusterEveryCopyDamagedRepairedNodeRestarted (review R): the
// documented every-copy-damaged procedure, with the repaired node
// restarted (without --wal-repair, as the docs ask that it not be left on;
// or a crash) before the second node is emptied. The repaired copy opens
// clean now, so its process answers no rejoinRepaired; the emptied node
// holds its vote and asks to be replaced, which needs the leader it
// would help elect: the shard stays without one for good.
func TestClusterEveryCopyDamagedRepairedNodeRestarted(t *testing.T) {
	c, kept := everyCopyDamaged(t)
	c.stop(0)
	if err := c.tryStart(0, false); err != nil { // the flag taken off the unit
		t.Fatalf("node 1 again: %v", err)
	}
	c.wipe(1)
	eventuallyWithin(t, 60*time.Second, "node 2 holds all but the lost message", func() error {
		info, err := c.counts(1, "q")
		if err != nil {
			return fmt.Errorf("%v (held %v)", err, c.nodes[1].voteHeld.Load())
		}
		if n := info.Active + info.Inactive; n != kept {
			return fmt.Errorf("%d", n)
		}
		return nil
	})
}

// TestClusterJoinedNodeAddedRightAfterItsStartVotes (review R): a node
// started with --join asks its question beside its shards (node.go
// Start), so `smqctl cluster add` run right after its start (a script)
// can make it a voter while it still holds its vote: it is then replaced
// in every shard, and meanwhile it counts in every quorum without
// voting; with one member down, the shards that member led have no
// leader (TestClusterRemovingALiveMemberWhileAnotherIsDown, seen failing
// so in a loaded run). The question is slowed here (250 ms per member).
func TestClusterJoinedNodeAddedRightAfterItsStartVotes(t *testing.T) {
	c := newTestCluster(t, 3, 4)
	c.leaderQueue("q")
	slow := func(from, to uint64) bool {
		if from == 4 {
			time.Sleep(250 * time.Millisecond)
		}
		return true
	}
	testHookRejoinAsk.Store(&slow)
	t.Cleanup(func() { testHookRejoinAsk.Store(nil) })
	c.joinNode4()
	// Every member answered that it is a voter of no shard before Start
	// returned: no add can make it a voter while it holds its vote. (The
	// eventual check below passed with the question run beside the shards
	// too, once the replacement it then asks for came through; this one
	// failed so.)
	if c.nodes[3].voteHeld.Load() {
		t.Fatal("node 4 holds its vote after Start returned: an add run now makes it a voter that does not vote")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.nodes[0].AddMember(ctx, 4, c.addrs[4]); err != nil {
		t.Fatal(err)
	}
	c.stop(2)
	eventuallyWithin(t, 20*time.Second, "every shard led by one of nodes 1, 2 and 4", func() error {
		for _, s := range c.nodes[0].shards {
			if l := s.lead.Load(); l == 0 || l == 3 {
				return fmt.Errorf("shard %d: voters %v, leader %d, node 4 held %v", s.id, s.st.votersNow(), l, c.nodes[3].voteHeld.Load())
			}
		}
		return nil
	})
}
