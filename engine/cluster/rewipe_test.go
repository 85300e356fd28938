package cluster

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

// TestClusterNodeWipedTwiceHoldsItsVoteAgain: docs/operations.md, "A
// node's disk wiped": an emptied node holds its vote until it is replaced,
// so that emptying one node loses nothing. Every member that applies a
// replacement keeps a mark of it for 2 minutes (rejoin.go replaceStep,
// replaceStale); only the member that answered the question clears its
// own. W is emptied and replaced through the leader L; the follower X
// keeps its mark. X then stalls (as a SIGSTOP would) while W acknowledges
// batches "b" with L; W is emptied a second time and L is lost. W asks X,
// whose mark says W was added back and whose table holds no
// acknowledgement of W's (it never led): X answered "replaced" at once,
// proposing nothing, W voted, and X and W (neither holds "b") elected one
// of themselves: the acknowledged messages only L had were lost (160 of
// 320, survive audit, 2026-12-07). Now X's mark records how many of W's
// Raft connections had ended when it was made; W's restart ended more, so
// the mark is an earlier run's and X replaces W again.
func TestClusterNodeWipedTwiceHoldsItsVoteAgain(t *testing.T) {
	l := int(preferredLeader(0, []uint64{1, 2, 3})) - 1
	x, w := (l+1)%3, (l+2)%3
	L, X, W := uint64(l+1), uint64(x+1), uint64(w+1)
	c := startTestCluster(&testCluster{t: t, nodes: make([]*Node, 3), shards: 1, infoLogs: true})
	defer c.stopAll()
	c.createQ()
	c.sendBatches("a", 10)
	for _, i := range []int{x, w} {
		c.holds(i, 160, 20*time.Second)
	}
	onlyL := func(from, to uint64) bool { return from != W || to == L }
	testHookRejoinAsk.Store(&onlyL)
	t.Cleanup(func() { testHookRejoinAsk.Store(nil); testHookDrop.Store(nil); testHookTick.Store(nil) })
	c.wipe(w) // replaced through L
	eventually(t, "the emptied node replaced, voting", func() error {
		if c.nodes[w].voteHeld.Load() {
			return errors.New("it holds its vote")
		}
		return nil
	})
	testHookRejoinAsk.Store(nil)
	c.holds(w, 160, 20*time.Second)
	eventually(t, "X applied the replacement", func() error {
		if c.nodes[x].replaceState(0, W) != replaceReadded {
			return errors.New("no mark")
		}
		return nil
	})
	// X stalls: nothing in or out, no ticks.
	drop := func(m *pb.Message) bool { return m.GetFrom() == X || m.GetTo() == X }
	tick := func(node uint64) bool { return node != X }
	testHookDrop.Store(&drop)
	testHookTick.Store(&tick)
	c.sendBatches("b", 10) // committed by L with W's acknowledgement
	c.holds(w, 320, 20*time.Second)

	c.stop(w)
	if err := os.RemoveAll(c.dirs[w]); err != nil {
		t.Fatal(err)
	}
	c.stop(l) // the only other holder of "b"
	testHookDrop.Store(nil)
	testHookTick.Store(nil)
	c.start(w)
	c.campaignedAt(w)
	c.electedNone(l, w, x)
	c.start(l)
	li, _ := c.leader("q")
	eventually(t, "the leader holds every acknowledged message", func() error {
		info, err := c.counts(li, "q")
		if err != nil {
			return err
		}
		if info.Active != 320 {
			return fmt.Errorf("the leader (node %d) holds %d messages of the 320 acknowledged", li+1, info.Active)
		}
		return nil
	})
}
