package cluster

import (
	"fmt"
	"sync/atomic"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/smqd/smqd/engine"
)

// TestFollowerWhoseAcksStoppedIsProbedAgain (stuck.go): a follower's
// acknowledgements of five entries are lost, and every empty append to it
// is too (the shape of the chaos runs' follower left behind, whatever its
// route). On an idle shard nothing else would move the leader's view of
// it: heartbeats are answered, the leader's empty appends never arrive.
// The leader probes it again, the probe carries the entries, and its
// answer brings the follower's Match to the leader's last index.
func TestFollowerWhoseAcksStoppedIsProbedAgain(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	li, q := settledLeaderQueue(c)
	send := func(n int) {
		t.Helper()
		for range n {
			if _, err := q.Send([]engine.SendEntry{{Body: []byte("m")}}, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	send(5)
	c.converged("q", 5, 0)
	lead := uint64(li + 1)
	f := lead%3 + 1
	var acksLost atomic.Bool
	acksLost.Store(true)
	drop := func(m *pb.Message) bool {
		switch {
		case m.GetFrom() == f && m.GetTo() == lead && m.GetType() == pb.MsgAppResp:
			return acksLost.Load()
		case m.GetFrom() == lead && m.GetTo() == f && m.GetType() == pb.MsgApp && len(m.Entries) == 0:
			return true
		}
		return false
	}
	testHookDrop.Store(&drop)
	t.Cleanup(func() { testHookDrop.Store(nil) })
	send(5) // committed with the other follower
	leaderLast := func() uint64 {
		last, _ := c.nodes[li].shards[0].st.LastIndex()
		return last
	}
	eventually(t, fmt.Sprintf("follower %d holds every entry and has answered", f), func() error {
		st := c.nodes[f-1].Status().Shards[0]
		if want := leaderLast(); st.LastIndex < want {
			return fmt.Errorf("its last index %d, the leader's %d", st.LastIndex, want)
		}
		if st.AppendQueued > 0 || st.AppendBusy {
			// Its answers leave when the worker is done (append.go),
			// and must meet the drop.
			return fmt.Errorf("its append worker: %d queued, busy %v", st.AppendQueued, st.AppendBusy)
		}
		return nil
	})
	acksLost.Store(false) // from now on its answers arrive; the empty appends still do not
	eventually(t, "the leader sees the follower caught up", func() error {
		for _, fs := range c.nodes[li].Status().Shards[0].Followers {
			if fs.NodeID == f && fs.Match < leaderLast() {
				return fmt.Errorf("follower %d: %+v, the leader's last %d", f, fs, leaderLast())
			}
		}
		return nil
	})
	if n := c.nodes[li].Status().Shards[0].Reprobes; n == 0 {
		t.Fatal("caught up with no probe again: the test did not leave the follower stuck")
	}
}
