package cluster

// votehold.go, invariant 5, under further faults (review Z of its first
// version found the first three holes below; each test failed on it).

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/smqd/smqd/wal"
	pb "go.etcd.io/raft/v3/raftpb"
)

// TestClusterPowerLossAfterAWholeClusterPowerLossHolds: every node lost
// power once and they voted again by invariant 5's majority rule; the
// shards elected and ran. Later one node, V, loses power alone, with the
// second fault of TestClusterPowerLostMemberHoldsItsVote: V had
// acknowledged entries that only L (the leader) and V held, and L is down
// when V restarts beside O. O never restarted since the first power loss,
// so it still answers rejoinPowerLost (lostPower is cleared only by a
// replacement, not by the majority's release): V counts itself and O, a
// majority of three, and votes with what it kept; V and O then elect one
// of themselves, which lacks what L committed.
func TestClusterPowerLossAfterAWholeClusterPowerLossHolds(t *testing.T) {
	c, b, fss, images := flushedIntervalCluster(t, 3)

	// The first event: every node loses power; they vote again (a
	// majority lost power) and elect.
	copy(images, c.powerLoss(b, fss, 0, 1, 2))
	c.startAll()
	c.leader("q")
	eventually(t, "every node votes again", func() error {
		for i, n := range c.nodes {
			if n.voteHeld.Load() {
				return fmt.Errorf("node %d holds its vote", i+1)
			}
		}
		return nil
	})
	c.preferredLeaders()
	l := int(preferredLeader(0, []uint64{1, 2, 3})) - 1
	v, o := (l+1)%3, (l+2)%3
	c.holds(o, 160, 20*time.Second)

	// The second event: O receives no entries (it stays up and follows
	// L's heartbeats); L commits batch b with V's acknowledgement alone;
	// V loses power before it flushed them, L is killed.
	drop := func(m *pb.Message) bool {
		return m.GetTo() == uint64(o+1) && (m.GetType() == pb.MsgApp || m.GetType() == pb.MsgSnap)
	}
	testHookDrop.Store(&drop)
	t.Cleanup(func() { testHookDrop.Store(nil) })
	c.sendBatches("b", 10)
	c.holds(v, 320, 20*time.Second)
	images[v] = c.powerLoss(b, images, v)[0]
	c.stop(l)
	testHookDrop.Store(nil)
	if info, err := c.counts(o, "q"); err != nil || info.Active != 160 {
		t.Fatalf("node %d holds %+v (%v), want the 160 of before", o+1, info, err)
	}

	c.start(v)
	if !c.nodes[v].voteHeld.Load() {
		t.Errorf("node %d restarted after a power loss of its own and votes: node %d, which lost power in an earlier event and has followed leaders since, still answers rejoinPowerLost", v+1, o+1)
	}
	c.campaignedAt(v)
	for _, i := range []int{v, o} {
		if lead := c.nodes[i].shards[0].lead.Load(); lead != 0 {
			li, _ := c.leader("q")
			info, err := c.counts(li, "q")
			t.Fatalf("node %d and node %d elected node %d while node %d, which holds entries they lack, is down: it holds %d of the 320 acknowledged messages (%v)", v+1, o+1, lead, l+1, info.Active, err)
		}
	}

	c.start(l)
	li, _ := c.leader("q")
	c.holds(li, 320, 30*time.Second)
	eventually(t, fmt.Sprintf("node %d replaced, voting again", v+1), func() error {
		if c.nodes[v].voteHeld.Load() {
			return errors.New("it holds its vote")
		}
		return nil
	})
	for i := range c.nodes {
		c.holds(i, 320, 30*time.Second)
	}
}

// TestPowerLostHoldSurvivesAStartThatFailed: holdVoteAtStart rewrites
// <dir>/unsynced-run with the new boot id before it writes the vote-held
// mark that keeps the reason. A start that stops in between (here the
// mark's write fails; a kill -9, an OOM kill or a full disk do the same)
// leaves a run mark that matches the boot and no vote-held mark: the next
// start on the same boot finds no power loss and votes with what it kept.
func TestPowerLostHoldSurvivesAStartThatFailed(t *testing.T) {
	c, b, fss, images := flushedIntervalCluster(t, 3)
	v := 2
	c.stop(0)
	c.stop(1) // the others down: nobody replaces v, nobody answers
	images[v] = c.powerLoss(b, fss, v)[0]

	// The vote-held mark cannot be written (its temporary file is a
	// directory): the start fails after the run mark was rewritten.
	tmp := filepath.Join(c.dirs[v], voteHeldFile+".tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	if n, err := Start(c.config(v)); err == nil {
		n.Close()
		t.Fatal("the start wrote its vote-held mark over a directory")
	} else {
		t.Logf("first start after the power loss: %v", err)
	}
	if err := os.Remove(tmp); err != nil {
		t.Fatal(err)
	}
	c.start(v) // the same boot
	if !c.nodes[v].voteHeld.Load() || !c.nodes[v].lostPower.Load() {
		t.Fatalf("node %d, whose machine restarted under --sync interval, votes after a start that failed (held %v, lost power %v)",
			v+1, c.nodes[v].voteHeld.Load(), c.nodes[v].lostPower.Load())
	}
}

// TestUnsyncedRunMarkKeptWhenAShardsLogFailed: a clean Close removes
// <dir>/unsynced-run only once every shard's log was flushed. A shard
// whose log's fsync failed (its writes since the last good one lost to a
// power loss, as Linux drops them) restarts after a backoff
// (restart.go); stopped meanwhile, its failed broker is retired and
// shard.close finds none, so Close returns nil and removed the mark. A
// power loss after that stop finds no mark: the node votes at once with
// a log that lacks what it acknowledged.
func TestUnsyncedRunMarkKeptWhenAShardsLogFailed(t *testing.T) {
	c, b, fss, images := flushedIntervalCluster(t, 3)
	l := int(preferredLeader(0, []uint64{1, 2, 3})) - 1
	v, o := (l+1)%3, (l+2)%3

	fss[v].FailSyncsLosingWrites(syscall.EIO)
	c.sendBatches("b", 10)
	c.holds(v, 320, 20*time.Second) // acknowledged, written, not flushed
	if err := c.nodes[v].shards[0].broker().SyncLog(); err == nil {
		t.Fatal("the flush succeeded")
	}
	c.sendBatches("c", 1) // the failed log refuses it: the shard restarts
	eventually(t, fmt.Sprintf("node %d's shard 0 fails", v+1), func() error {
		if c.nodes[v].shards[0].failure.Load() == nil {
			return errors.New("not failed")
		}
		return nil
	})
	n := c.nodes[v]
	c.nodes[v] = nil
	err := n.Close()
	t.Logf("node %d's Close: %v", v+1, err)
	if _, serr := os.Stat(filepath.Join(c.dirs[v], unsyncedRunFile)); serr != nil {
		t.Errorf("node %d's unsynced-run mark is gone after a Close that flushed no log of shard 0 (Close: %v): %v", v+1, err, serr)
	}

	// The power loss, the others stopped (nobody replaces it): it must
	// hold its vote.
	images[v] = wal.CrashCloneAll(nil, fss[v])[0]
	b.reboot(v)
	c.stop(l)
	c.stop(o)
	c.start(v)
	if !c.nodes[v].voteHeld.Load() {
		t.Fatalf("node %d, whose log lost what it acknowledged, restarted after a power loss and votes", v+1)
	}
}

// everyNodeVotes waits until no node holds its vote and every node holds
// at least want messages.
func (c *testCluster) everyNodeVotes(want int64) {
	c.t.Helper()
	c.leader("q")
	eventuallyWithin(c.t, 60*time.Second, "every node votes again and holds what was flushed", func() error {
		for i, n := range c.nodes {
			if n.voteHeld.Load() {
				return fmt.Errorf("node %d holds its vote", i+1)
			}
			info, err := c.counts(i, "q")
			if err != nil {
				return err
			}
			if info.Active < want {
				return fmt.Errorf("node %d holds %d", i+1, info.Active)
			}
		}
		return nil
	})
}

// Liveness: two of three lose power, the third stays up; they start one
// after the other. The shards elect again (a majority lost power).
func TestClusterTwoOfThreePowerLossWithTheThirdUpElects(t *testing.T) {
	c, b, fss, images := flushedIntervalCluster(t, 3)
	l := int(preferredLeader(0, []uint64{1, 2, 3})) - 1
	v := (l + 1) % 3
	im := c.powerLoss(b, fss, l, v)
	images[l], images[v] = im[0], im[1]
	c.start(v)
	c.start(l)
	c.everyNodeVotes(160)
}

// Liveness: every node of five loses power; they start one by one.
func TestClusterFiveNodesPowerLossStartedOneByOneElects(t *testing.T) {
	c, b, fss, images := flushedIntervalCluster(t, 5)
	copy(images, c.powerLoss(b, fss, 0, 1, 2, 3, 4))
	for i := range c.nodes {
		c.start(i)
		if i < 2 && !c.nodes[i].voteHeld.Load() {
			t.Fatalf("node %d votes with %d of 5 members up", i+1, i+1)
		}
	}
	c.everyNodeVotes(160)
}

// Sound (checked): a power-lost node stopped cleanly before it was
// replaced (its Close removes unsynced-run) holds its vote again at its
// next start, as one that lost power: the vote-held mark keeps the reason.
func TestPowerLostNodeRestartedBeforeItsReplacementHoldsAgain(t *testing.T) {
	c, b, fss, images := flushedIntervalCluster(t, 3)
	v := 2
	c.stop(0)
	c.stop(1)
	images[v] = c.powerLoss(b, fss, v)[0]
	c.start(v)
	if !c.nodes[v].voteHeld.Load() || !c.nodes[v].lostPower.Load() {
		t.Fatal("not held after the power loss")
	}
	c.stop(v) // clean: unsynced-run goes
	if _, err := os.Stat(filepath.Join(c.dirs[v], unsyncedRunFile)); err == nil {
		t.Fatal("unsynced-run kept by a clean Close")
	}
	c.start(v)
	if !c.nodes[v].voteHeld.Load() || !c.nodes[v].lostPower.Load() {
		t.Fatalf("node %d restarted before its replacement votes (held %v, lost power %v)", v+1, c.nodes[v].voteHeld.Load(), c.nodes[v].lostPower.Load())
	}
	c.startSome(0, 1)
	c.everyNodeVotes(160)
}
