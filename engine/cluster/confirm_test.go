package cluster

import (
	"context"
	"errors"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/smqd/smqd/engine"
)

// isolate cuts node old off from the others (its messages and theirs to
// it are dropped; the connections stay up, as behind a dropping firewall)
// and stops its clock, so that it goes on leading its term for as long
// as the test needs: CheckQuorum would make it step down after an
// election timeout of ticks. heal undoes both.
func isolate(t *testing.T, old uint64) (heal func()) {
	drop := func(m *pb.Message) bool { return m.GetFrom() == old || m.GetTo() == old }
	tick := func(node uint64) bool { return node != old }
	testHookDrop.Store(&drop)
	testHookTick.Store(&tick)
	heal = func() {
		testHookDrop.Store(nil)
		testHookTick.Store(nil)
	}
	t.Cleanup(heal)
	return heal
}

// otherLeader waits for a node other than skip to lead queue's shard.
func (c *testCluster) otherLeader(queue string, skip int) (int, *engine.Queue) {
	c.t.Helper()
	var li int
	var q *engine.Queue
	eventually(c.t, "another node leads", func() error {
		for i, n := range c.nodes {
			if i == skip || n == nil {
				continue
			}
			if b, _, err := n.Route(queue); err == nil && b != nil {
				qq, err := b.Queue(queue)
				if err != nil {
					return err
				}
				li, q = i, qq
				return nil
			}
		}
		return errors.New("none yet")
	})
	return li, q
}

// TestCutOffLeaderHandsOutNoDeletedMessage (confirm.go): a leader cut off
// from its group still believes it leads, and its state still holds a
// message that the group's new leader handed out and deleted. Before
// confirm.go its receive answered that message again, after the delete
// was acknowledged (the chaos harness's isolate runs found this); now the
// receive, and a peek, wait for a majority to confirm the lead, which
// never comes, and answer nothing.
func TestCutOffLeaderHandsOutNoDeletedMessage(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	li, q := c.leaderQueue("q")
	if _, err := q.Send([]engine.SendEntry{{Body: []byte("once")}}, nil); err != nil {
		t.Fatal(err)
	}
	c.converged("q", 1, 0)
	heal := isolate(t, uint64(li+1))
	ni, nq := c.otherLeader("q", li)
	got, err := nq.Receive(context.Background(), engine.ReceiveOptions{Max: 1, HasWait: true}, nil)
	if err != nil || len(got) != 1 {
		t.Fatalf("receive on the new leader (node %d): %d messages, %v", ni+1, len(got), err)
	}
	if _, err := nq.Delete([]engine.ReceiptHandle{got[0].Handle}, make([]error, 1)); err != nil {
		t.Fatalf("delete on the new leader: %v", err)
	}

	// The old leader's peek and receive, after the delete was acknowledged.
	s := c.nodes[li].shards[0]
	failed := s.confirmsFailed.Load()
	peeked, err := q.Peek(16, nil)
	if len(peeked) > 0 || !errors.Is(err, engine.ErrNotLeader) {
		t.Fatalf("the cut-off leader's peek: %d messages, %v", len(peeked), err)
	}
	again, err := q.Receive(context.Background(), engine.ReceiveOptions{Max: 16, HasWait: true}, nil)
	if len(again) > 0 {
		t.Fatalf("the cut-off leader handed out %q after its delete was acknowledged on node %d (err %v)", again[0].Body, ni+1, err)
	}
	if !errors.Is(err, engine.ErrNotLeader) {
		t.Fatalf("the cut-off leader's receive: %v, want ErrNotLeader", err)
	}
	if n := s.confirmsFailed.Load() - failed; n != 2 {
		t.Fatalf("confirmations failed: %d, want 2", n)
	}

	// Healed, the old leader follows, and every replica has the delete.
	heal()
	c.converged("q", 0, 0)
}

// TestLeadConfirmationAsksAgainAfterALostRound (confirm.go, invariant 3):
// the followers' answers to the first confirmation rounds are lost; the
// leader asks again on its ticks, and the receive is answered once a
// round gets through, not failed at the bound. Read leases are off: the
// send's append would otherwise give the leader a lease (lease.go), and
// the receive no round at all.
func TestLeadConfirmationAsksAgainAfterALostRound(t *testing.T) {
	c := startTestCluster(&testCluster{t: t, nodes: make([]*Node, 3), shards: 1, leaseTicks: -1})
	li, q := c.leaderQueue("q")
	if _, err := q.Send([]engine.SendEntry{{Body: []byte("m")}}, nil); err != nil {
		t.Fatal(err)
	}
	s := c.nodes[li].shards[0]
	first := s.confirmRounds.Load() + 1
	// Drop every answer to a round while the leader has begun fewer than
	// two since the receive: the first round's answers are all lost.
	drop := func(m *pb.Message) bool {
		return m.GetType() == pb.MsgHeartbeatResp && len(m.GetContext()) > 0 && s.confirmRounds.Load() < first+1
	}
	testHookDrop.Store(&drop)
	t.Cleanup(func() { testHookDrop.Store(nil) })
	got, err := q.Receive(context.Background(), engine.ReceiveOptions{Max: 1, HasWait: true}, nil)
	if err != nil || len(got) != 1 {
		t.Fatalf("receive: %d messages, %v (rounds begun %d, confirmations failed %d)", len(got), err, s.confirmRounds.Load()-first+1, s.confirmsFailed.Load())
	}
	if n := s.confirmRounds.Load() - first + 1; n < 2 {
		t.Fatalf("rounds begun: %d, want at least 2", n)
	}
}
