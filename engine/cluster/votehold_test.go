package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/smqd/smqd/engine"
)

// TestRejoinQuestionOfANodeHoldingItsVote: a node that holds its vote asks
// to be replaced when the asked member's copy has history (with --join:
// when the member has it as a voter), though no acknowledgement shows a
// loss; not when it has none (a new cluster, a new member), and a node
// that does not hold its vote never does so. A member of an earlier build
// closes the connection at the question for flags: it is asked again the
// old way, and a node without --join names a shard it knows.
func TestRejoinQuestionOfANodeHoldingItsVote(t *testing.T) {
	for _, tc := range []struct {
		name     string
		join     bool
		held     bool
		flags    []byte
		replaced bool
	}{
		{"held, history", false, true, []byte{0, rejoinHistory}, true},
		{"held, new cluster", false, true, []byte{0, 0}, false},
		{"not held, history", false, false, []byte{rejoinHistory, rejoinHistory | rejoinVoter}, false},
		{"joined, held, a voter", true, true, []byte{rejoinHistory, rejoinHistory | rejoinVoter}, true},
		{"joined, held, no voter", true, true, []byte{rejoinHistory, rejoinHistory}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &Node{cfg: Config{Join: tc.join}}
			lostIn := 99
			tr := &transport{
				acked:  func(uint64, int) []uint64 { return []uint64{0, 0} },
				rejoin: func(_ uint64, lost int) byte { lostIn = lost; return rejoinReplaced },
				flags:  func(uint64, int) []byte { return tc.flags },
			}
			a, b := net.Pipe()
			go func() {
				defer b.Close()
				tr.serveRejoin(7, b)
			}()
			got, flags, err := askRejoinOn(a, 2, true, func(acked []uint64, flags []byte) uint32 {
				return n.rejoinVerdict(tc.held, acked, []uint64{3, 3}, flags)
			})
			a.Close()
			if err != nil {
				t.Fatal(err)
			}
			if string(flags) != string(tc.flags) || (got == rejoinReplaced) != tc.replaced {
				t.Fatalf("answer %d flags %v", got, flags)
			}
			if tc.replaced && lostIn != replaceAsked {
				t.Fatalf("replaced for shard %d, want replaceAsked", lostIn)
			}
		})
	}
	t.Run("earlier build", func(t *testing.T) {
		older := func(c net.Conn, verdict *uint32) {
			defer c.Close()
			var h [4]byte
			if _, err := io.ReadFull(c, h[:]); err != nil {
				return
			}
			k := int(h[0]) | int(h[1])<<8 | int(h[2])<<16 | int(h[3])<<24
			if k > 1024 || k < 0 {
				return // what an earlier build does with the flag
			}
			c.Write(make([]byte, 8*k))
			if _, err := io.ReadFull(c, h[:]); err != nil {
				return
			}
			*verdict = uint32(h[0]) | uint32(h[1])<<8
			c.Write([]byte{rejoinReplaced})
		}
		n := &Node{}
		decide := func(acked []uint64, flags []byte) uint32 { return n.rejoinVerdict(true, acked, []uint64{3, 3}, flags) }
		var v uint32
		a, b := net.Pipe()
		go older(b, &v)
		if _, _, err := askRejoinOn(a, 2, true, decide); err != errOlderMember {
			t.Fatalf("flagged question to an earlier build: %v", err)
		}
		a.Close()
		a, b = net.Pipe()
		done := make(chan struct{})
		go func() { older(b, &v); close(done) }()
		got, flags, err := askRejoinOn(a, 2, false, decide)
		a.Close()
		<-done
		if err != nil || got != rejoinReplaced || flags != nil || v != 1 {
			t.Fatalf("answer %d flags %v verdict %d err %v", got, flags, v, err)
		}
	})
}

// TestClusterWipedNodeHoldsItsVoteUntilReplaced: the rejoin audit's loss.
// Node 1 leads and node 2 lags (node 1's appends to it are dropped), so
// node 3 is the one other holder of what node 1 acknowledged. Node 1 goes
// down and node 3 comes back empty. Node 3 must not elect node 2, which
// lacks those messages: the shard waits for node 1, and then every
// message is on every member. Voting at once, node 3 elected node 2, and
// node 1, back, took node 2's shorter log.
func TestClusterWipedNodeHoldsItsVoteUntilReplaced(t *testing.T) {
	c := startTestCluster(&testCluster{t: t, nodes: make([]*Node, 3), shards: 1})
	c.leadShard0(1)
	c.onLeaderIdempotent("q", func(b *engine.Broker) error { _, err := b.CreateQueue("q", engine.DefaultQueueConfig()); return err })
	c.converged("q", 0, 0)
	lag := func(m *pb.Message) bool {
		return m.GetFrom() == 1 && m.GetTo() == 2 && (m.GetType() == pb.MsgApp || m.GetType() == pb.MsgSnap)
	}
	testHookDrop.Store(&lag)
	t.Cleanup(func() { testHookDrop.Store(nil) })
	const sent = 200
	c.sendPairs(sent)
	if info, err := c.counts(1, "q"); err != nil || info.Active >= sent {
		t.Fatalf("node 2 did not lag: %+v %v", info, err)
	}
	c.stop(0)
	var campaigns atomic.Int64 // node 3 campaigning: a vote for itself
	watch := func(m *pb.Message) bool {
		if m.GetFrom() == 3 && (m.GetType() == pb.MsgPreVote || m.GetType() == pb.MsgVote) {
			campaigns.Add(1)
		}
		return false
	}
	testHookDrop.Store(&watch)
	c.wipe(2)
	c.campaignedAt(2)
	// Past its own election timeouts (10 to 20 ticks) several times.
	eventually(t, "node 3 ticks", func() error {
		if n := c.nodes[2].shards[0].ticks.Load(); n < 60 {
			return fmt.Errorf("%d ticks", n)
		}
		return nil
	})
	if n := campaigns.Load(); n > 0 {
		t.Fatalf("node 3, holding its vote, campaigned (%d requests)", n)
	}
	testHookDrop.Store(nil)
	c.start(0)
	eventuallyWithin(t, 60*time.Second, "node 3 is replaced and votes again", func() error {
		if c.nodes[2].voteHeld.Load() {
			return errors.New("still held")
		}
		if _, err := os.Stat(filepath.Join(c.dirs[2], voteHeldFile)); err == nil {
			return errors.New("the mark is left")
		}
		return nil
	})
	c.converged("q", sent, 0)
}

// TestClusterNewClusterWithAMemberNeverStarted: two members of a new
// cluster of three elect a leader without the third (a majority answered,
// none with history); the third, started late, asks to be replaced
// (the others have history), and then votes: with node 1 down, nodes 2
// and 3 elect a leader.
func TestClusterNewClusterWithAMemberNeverStarted(t *testing.T) {
	c := &testCluster{t: t, nodes: make([]*Node, 3), shards: 1}
	c.addrs = map[uint64]string{}
	for i := range c.nodes {
		c.dirs = append(c.dirs, filepath.Join(t.TempDir(), fmt.Sprint(i+1)))
		c.hold(uint64(i + 1))
	}
	t.Cleanup(c.stopAll)
	c.startSome(0, 1)
	c.onLeaderIdempotent("q", func(b *engine.Broker) error { _, err := b.CreateQueue("q", engine.DefaultQueueConfig()); return err })
	c.sendBatches("a", 50)
	c.start(2)
	eventuallyWithin(t, 60*time.Second, "node 3 votes", func() error {
		if c.nodes[2].voteHeld.Load() {
			return errors.New("still held")
		}
		return nil
	})
	c.converged("q", 800, 0)
	c.stop(0)
	c.sendBatches("b", 50) // needs nodes 2 and 3 to elect a leader
	for i := 1; i < 3; i++ {
		c.holds(i, 1600, 20*time.Second)
	}
}

// TestClusterVoteHoldSurvivesARestart: a node that held its vote and was
// then sent entries by a leader elected without it (so it has history)
// but not replaced, restarted, holds its vote again (the vote-held mark):
// its history does not show that it holds what it acknowledged.
func TestClusterVoteHoldSurvivesARestart(t *testing.T) {
	c, _ := heldWithHistory(t)
	// Not healthy while held, though its shards have a leader: a rolling
	// restart waiting for health would stop another member meanwhile.
	eventually(t, "node 3 answers that it holds its vote", func() error {
		if err := c.nodes[2].Health(); !errors.Is(err, ErrVoteHeld) {
			return fmt.Errorf("health %v", err)
		}
		return nil
	})
	testHookRejoinAsk.Store(nil)
	eventuallyWithin(t, 60*time.Second, "node 3 is replaced and votes again", func() error {
		if c.nodes[2].voteHeld.Load() {
			return errors.New("still held")
		}
		return c.nodes[2].Health()
	})
	c.converged("q", 1600, 0)
}

// TestClusterHeldNodeWithHistoryIsNoNewCluster: a held node that has
// history of its own (TestClusterVoteHoldSurvivesARestart) never takes
// the cluster for new, even when the members that answer have none (here
// node 2, emptied, with node 1 down): it counted itself as one without.
func TestClusterHeldNodeWithHistoryIsNoNewCluster(t *testing.T) {
	c, asked := heldWithHistory(t)
	c.stop(0)
	c.wipe(1)
	var toNode2 atomic.Int64
	count := func(from, to uint64) bool {
		if from == 3 && to == 2 {
			toNode2.Add(1)
		}
		return true
	}
	testHookRejoinAsk.Store(&count)
	eventually(t, "node 3 asks node 2 twice (one whole question answered)", func() error {
		if n := toNode2.Load(); n < 2 {
			return fmt.Errorf("%d questions (%d muted before)", n, asked.Load())
		}
		return nil
	})
	if !c.nodes[2].voteHeld.Load() {
		t.Fatal("node 3, with history of its own, took the cluster for new and votes")
	}
	// Node 1 back would find both others holding their votes, and no
	// leader to replace them: what is left (votehold.go).
}

// heldWithHistory makes node 3 of a new 3-node cluster (1,600 messages in
// q) a node that holds its vote and has history: wiped, sent the shard by
// a leader elected after, restarted; its rejoin questions are muted (the
// count of them returned) until the caller sets testHookRejoinAsk.
func heldWithHistory(t *testing.T) (*testCluster, *atomic.Int64) {
	c := startTestCluster(&testCluster{t: t, nodes: make([]*Node, 3), shards: 1})
	c.leadShard0(1)
	c.onLeaderIdempotent("q", func(b *engine.Broker) error { _, err := b.CreateQueue("q", engine.DefaultQueueConfig()); return err })
	c.sendBatches("a", 100)
	c.converged("q", 1600, 0)
	asked := new(atomic.Int64)
	mute := func(from, to uint64) bool {
		if from == 3 {
			asked.Add(1)
			return false
		}
		return true
	}
	testHookRejoinAsk.Store(&mute)
	t.Cleanup(func() { testHookRejoinAsk.Store(nil) })
	c.wipe(2)
	if !c.nodes[2].voteHeld.Load() {
		t.Fatal("a wiped node does not hold its vote")
	}
	// A leader elected while node 3 holds its vote starts its progress
	// for node 3 afresh, and sends it the shard.
	c.nodes[0].shards[0].do(func() { c.nodes[0].shards[0].rn.TransferLeader(2) })
	eventuallyWithin(t, 60*time.Second, "node 3 gets the shard from node 2", func() error {
		if info, err := c.counts(2, "q"); err != nil || info.Active != 1600 {
			return fmt.Errorf("%+v %v", info, err)
		}
		return nil
	})
	c.stop(2)
	c.start(2)
	if !c.nodes[2].shards[0].st.hasHistory() {
		t.Fatal("node 3 has no history: the test shows nothing")
	}
	if !c.nodes[2].voteHeld.Load() {
		t.Fatal("node 3, restarted before it was replaced, votes")
	}
	if asked.Load() == 0 {
		t.Fatal("node 3 asked nothing")
	}
	return c, asked
}

// TestClusterWipedJoinedNodeHoldsItsVote: the same loss with a member that
// was added with --join and comes back empty with the same flags: it
// must hold its vote too (a new member does not: it is no voter yet when
// it asks).
func TestClusterWipedJoinedNodeHoldsItsVote(t *testing.T) {
	c := startTestCluster(&testCluster{t: t, nodes: make([]*Node, 3), shards: 1})
	c.leadShard0(1)
	c.joinNode4()
	eventually(t, "node 4, new, votes", func() error {
		if c.nodes[3].voteHeld.Load() {
			return errors.New("held")
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.nodes[0].AddMember(ctx, 4, c.addrs[4]); err != nil {
		t.Fatal(err)
	}
	c.stop(2)
	if err := c.nodes[0].RemoveMember(ctx, 3); err != nil {
		t.Fatal(err)
	}
	eventually(t, "node 1 leads shard 0 of members 1, 2 and 4", func() error {
		s := c.nodes[0].shards[0]
		if v := s.st.votersNow(); len(v) != 3 || slices.Contains(v, 3) {
			return fmt.Errorf("voters %v", v)
		}
		if s.lead.Load() != 1 {
			s.do(func() { s.rn.TransferLeader(1) }) // asynchronous
			return errors.New("not the leader yet")
		}
		return nil
	})
	c.onLeaderIdempotent("q", func(b *engine.Broker) error { _, err := b.CreateQueue("q", engine.DefaultQueueConfig()); return err })
	lag := func(m *pb.Message) bool {
		return m.GetFrom() == 1 && m.GetTo() == 2 && (m.GetType() == pb.MsgApp || m.GetType() == pb.MsgSnap)
	}
	testHookDrop.Store(&lag)
	t.Cleanup(func() { testHookDrop.Store(nil) })
	c.sendBatches("a", 20)
	if info, err := c.counts(1, "q"); err == nil && info.Active >= 320 {
		t.Fatalf("node 2 did not lag: %+v", info)
	}
	c.stop(0)
	c.wipe(3)
	testHookDrop.Store(nil)
	c.campaignedAt(3)
	c.start(0)
	eventuallyWithin(t, 60*time.Second, "node 4 is replaced and votes again", func() error {
		if c.nodes[3].voteHeld.Load() {
			return errors.New("still held")
		}
		return nil
	})
	for _, i := range []int{0, 1, 3} {
		c.holds(i, 320, 30*time.Second)
	}
}

// campaignedAt waits until node i, wiped, has been asked for its vote (or
// pre-vote) in shard 0 three times, or a leader was elected (with its
// vote: what the hold prevents), as the running nodes see it.
func (c *testCluster) campaignedAt(i int) {
	c.t.Helper()
	eventually(c.t, fmt.Sprintf("the others ask node %d for its vote", i+1), func() error {
		s := c.nodes[i].shards[0]
		if n := s.votesHeld.Load() + s.preVotes.Load(); n < 3 {
			for _, o := range c.nodes {
				if o != nil && o.shards[0].lead.Load() != 0 && o.shards[0].lead.Load() == o.cfg.NodeID {
					c.t.Logf("node %d leads shard 0", o.cfg.NodeID)
					return nil
				}
			}
			return fmt.Errorf("%d vote requests", n)
		}
		return nil
	})
}

// TestClusterHeldNodeDoesNotElectItself (review-q): a node that holds its
// vote drops the others' vote requests, but its own campaign still counts
// its own vote. Node 1 leads, node 2 lags; node 3 is emptied and holds
// its vote (its questions get no answer: the window before its
// replacement). Node 1 steps down (it hears no one for an election
// timeout) and is elected again with node 2's vote, which starts its
// progress for node 3 afresh: node 3 catches up part of the way (past
// node 2, short of what was acknowledged) when node 1 goes down. Node 3
// then campaigns, votes for itself, node 2 grants (node 3's log is
// longer): node 3 leads a log that lacks acknowledged entries (at
// 96951cc: elected in terms 4 to 12, node 2 and 3 then held 20 of the
// 200 acknowledged messages).
func TestClusterHeldNodeDoesNotElectItself(t *testing.T) {
	c := startTestCluster(&testCluster{t: t, nodes: make([]*Node, 3), shards: 1, tweak: func(_ int, o *engine.Options) {
		o.CheckpointRecords = 1 << 20 // no compaction: node 3 catches up from the log
		o.ReplicaKeepEntries = 1 << 20
	}})
	c.leadShard0(1)
	c.onLeaderIdempotent("q", func(b *engine.Broker) error { _, err := b.CreateQueue("q", engine.DefaultQueueConfig()); return err })
	c.converged("q", 0, 0)
	var cut atomic.Uint64   // when set, node 1 sends node 3 no entry past it
	var isolate atomic.Bool // node 1 hears nothing: it steps down (CheckQuorum)
	hook := func(m *pb.Message) bool {
		if isolate.Load() && m.GetTo() == 1 {
			return true
		}
		if m.GetFrom() == 1 && m.GetTo() == 2 && (m.GetType() == pb.MsgApp || m.GetType() == pb.MsgSnap) {
			return true // node 2 lags
		}
		if k := cut.Load(); k > 0 && m.GetFrom() == 1 && m.GetTo() == 3 {
			if m.GetType() == pb.MsgSnap {
				return true
			}
			if m.GetType() == pb.MsgApp {
				j := 0
				for j < len(m.Entries) && m.Entries[j].GetIndex() <= k {
					j++
				}
				m.Entries = m.Entries[:j:j]
			}
		}
		return false
	}
	testHookDrop.Store(&hook)
	t.Cleanup(func() { testHookDrop.Store(nil) })
	const sent = 200
	c.sendPairs(sent)
	eventually(t, "node 3 holds every message", func() error {
		if info, err := c.counts(2, "q"); err != nil || info.Active != sent {
			return fmt.Errorf("%+v %v", info, err)
		}
		return nil
	})
	bLast := c.nodes[1].shards[0].st.lastIndexNow()
	aLast := c.nodes[0].shards[0].st.lastIndexNow()
	t.Logf("node 2 last %d, node 1 last %d", bLast, aLast)
	if aLast < bLast+40 {
		t.Fatalf("node 2 did not lag: %d of %d", bLast, aLast)
	}
	mute := func(from, to uint64) bool { return from != 3 }
	testHookRejoinAsk.Store(&mute)
	t.Cleanup(func() { testHookRejoinAsk.Store(nil) })
	c.wipe(2)
	if !c.nodes[2].voteHeld.Load() {
		t.Fatal("node 3 does not hold its vote")
	}
	cut.Store(bLast + 10)
	// Node 1 steps down and is elected again (node 2's vote): its progress
	// for node 3 starts afresh.
	isolate.Store(true)
	eventually(t, "node 1 steps down", func() error {
		if c.nodes[0].shards[0].lead.Load() == 1 {
			return errors.New("leads")
		}
		return nil
	})
	isolate.Store(false)
	eventually(t, "node 1 leads again", func() error {
		if c.nodes[1].shards[0].lead.Load() != 1 {
			return errors.New("not yet")
		}
		return nil
	})
	eventuallyWithin(t, 30*time.Second, "node 3 catches up part of the way", func() error {
		if l := c.nodes[2].shards[0].st.lastIndexNow(); l < bLast+10 {
			return fmt.Errorf("node 3 last %d", l)
		}
		return nil
	})
	t.Logf("node 3 last %d, held %v", c.nodes[2].shards[0].st.lastIndexNow(), c.nodes[2].voteHeld.Load())
	c.stop(0)
	testHookDrop.Store(nil)
	// With the hold, no leader can be elected without node 1: wait a while
	// for one (a few election timeouts), then bring node 1 back.
	var led atomic.Uint64
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		for _, i := range []int{1, 2} {
			if l := c.nodes[i].shards[0].lead.Load(); l != 0 {
				led.Store(l)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("leader elected while node 1 was down: %d (node 3 held: %v)", led.Load(), c.nodes[2].voteHeld.Load())
	if led.Load() != 0 {
		t.Errorf("node %d was elected without node 1, with the vote of node 3, which holds its vote", led.Load())
	}
	c.start(0)
	testHookRejoinAsk.Store(nil)
	eventuallyWithin(t, 60*time.Second, "node 3 is replaced", func() error {
		if c.nodes[2].voteHeld.Load() {
			return errors.New("still held")
		}
		return nil
	})
	for i := range c.nodes {
		info, err := c.counts(i, "q")
		t.Logf("node %d: %+v %v", i+1, info, err)
	}
	c.converged("q", sent, 0)
}

// TestClusterRemovedMemberAddedBackVotes (review-q): a removed member
// started again on an empty directory without --join holds its vote, and
// its question ends (its replacement is refused: it is removed). Added
// back (smqctl cluster add) while it runs, it is a voter of every shard
// that never votes: it asks nothing more until a restart.
func TestClusterRemovedMemberAddedBackVotes(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	c.leadShard0(1)
	c.onLeaderIdempotent("q", func(b *engine.Broker) error { _, err := b.CreateQueue("q", engine.DefaultQueueConfig()); return err })
	c.sendBatches("a", 5)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.nodes[1].RemoveMember(ctx, 3); err != nil {
		t.Fatal(err)
	}
	c.wipe(2) // the operator's mistake: no --join
	if !c.nodes[2].voteHeld.Load() {
		t.Fatal("node 3 does not hold its vote")
	}
	if err := c.nodes[1].AddMember(ctx, 3, c.addrs[3]); err != nil {
		t.Fatal(err)
	}
	c.holds(2, 80, 30*time.Second)
	eventuallyWithin(t, 30*time.Second, "node 3, a voter again, votes", func() error {
		if c.nodes[2].voteHeld.Load() {
			return errors.New("still held")
		}
		return nil
	})
}

// sendPairs sends n messages to queue q, two a request, through its
// shard's leader.
func (c *testCluster) sendPairs(n int) {
	c.t.Helper()
	for range n / 2 {
		c.onLeader("q", func(b *engine.Broker) error {
			q, err := b.Queue("q")
			if err == nil {
				_, err = q.Send([]engine.SendEntry{{Body: []byte("x")}, {Body: []byte("y")}}, nil)
			}
			return err
		})
	}
}
