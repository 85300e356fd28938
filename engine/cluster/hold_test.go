package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
)

// holdCluster is three nodes and one shard whose leaders hold proposals
// nobody waits for for hold (hold.go), with queue q created and one
// message sent and replicated everywhere. It returns the leader's index.
func holdCluster(t *testing.T, hold time.Duration) (*testCluster, int) {
	c := &testCluster{t: t, nodes: make([]*Node, 3), shards: 1, proposalHold: hold}
	startTestCluster(c)
	c.onLeaderIdempotent("q", func(b *engine.Broker) error { _, err := b.CreateQueue("q", engine.DefaultQueueConfig()); return err })
	c.onLeader("q", func(b *engine.Broker) error {
		q, err := b.Queue("q")
		if err != nil {
			return err
		}
		_, err = q.Send([]engine.SendEntry{{Body: []byte("m")}}, nil)
		return err
	})
	c.everywhere("q", 1, 0)
	li, _ := c.leader("q")
	return c, li
}

// everywhere waits until every node's replica of queue holds active
// Active and inactive Inactive messages.
func (c *testCluster) everywhere(queue string, active, inactive int64) {
	c.t.Helper()
	for i := range c.nodes {
		eventually(c.t, fmt.Sprintf("node %d holds %d active and %d inactive", i+1, active, inactive), func() error {
			info, err := c.counts(i, queue)
			if err != nil {
				return err
			}
			if info.Active != active || info.Inactive != inactive {
				return fmt.Errorf("%d active, %d inactive", info.Active, info.Inactive)
			}
			return nil
		})
	}
}

// receiveOn receives queue's one message on node i's broker (which leads).
func (c *testCluster) receiveOn(i int, queue string) engine.Message {
	c.t.Helper()
	q, err := c.nodes[i].Broker(c.nodes[i].ShardOf(queue)).Queue(queue)
	if err != nil {
		c.t.Fatal(err)
	}
	msgs, err := q.Receive(context.Background(), engine.ReceiveOptions{Max: 1, HasWait: true}, nil)
	if err != nil || len(msgs) != 1 {
		c.t.Fatalf("receive: %d messages, %v", len(msgs), err)
	}
	return msgs[0]
}

// TestClusterHeldReceiveGoesWithTheDelete (hold.go): a receive's proposal
// is held (its commit index does not move, and no follower sees the
// message taken) until the delete of the message, which waits for its
// commit, urges it to Raft; both commit. The hold is an hour, so nothing
// but the urge can release it: a delete that did not urge would wait.
func TestClusterHeldReceiveGoesWithTheDelete(t *testing.T) {
	c, li := holdCluster(t, time.Hour)
	commit := func() uint64 { return c.nodes[li].Status().Shards[0].Commit }
	before := commit()
	m := c.receiveOn(li, "q")
	// Heartbeats and ticks wake the loop meanwhile; none of them releases it.
	time.Sleep(200 * time.Millisecond)
	if got := commit(); got != before {
		t.Fatalf("commit index %d after a held receive, want %d: the receive was not held", got, before)
	}
	for i := range c.nodes {
		if i == li {
			continue
		}
		if info, err := c.counts(i, "q"); err != nil || info.Inactive != 0 {
			t.Fatalf("follower %d: %+v, %v: it applied a receive that should be held", i+1, info, err)
		}
	}
	done := make(chan error, 1)
	go func() {
		q, err := c.nodes[li].Broker(0).Queue("q")
		if err == nil {
			var errs [1]error
			if _, err = q.Delete([]engine.ReceiptHandle{m.Handle}, errs[:]); err == nil {
				err = errs[0]
			}
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the delete waits on a held proposal: nothing urged it")
	}
	if got := commit(); got < before+2 {
		t.Fatalf("commit index %d after the delete, want at least %d (the receive and the delete)", got, before+2)
	}
	c.everywhere("q", 0, 0)
}

// TestClusterHeldReceiveGoesAfterTheHold: with nothing to go with, a held
// receive goes to Raft once it has waited the hold, and every replica
// applies it.
func TestClusterHeldReceiveGoesAfterTheHold(t *testing.T) {
	c, li := holdCluster(t, 30*time.Millisecond)
	c.receiveOn(li, "q")
	c.everywhere("q", 0, 1)
}

// TestClusterHandOverReleasesHeldProposals (hold.go invariant 2,
// transfer.go invariant 2): a leader that hands the lead over sends what it
// holds to Raft at once, so its broker settles: the receive commits, the
// next leader has the message taken, and the old leader keeps its broker
// (no rebuild). Were it held through the hand-over, its proposal would
// fail at the step-down and the receive would be undone: the message
// active again everywhere (seen so, with the release removed).
func TestClusterHandOverReleasesHeldProposals(t *testing.T) {
	c, li := holdCluster(t, time.Hour)
	ls := c.nodes[li].shards[0]
	rebuilds := ls.rebuilds.Load()
	c.receiveOn(li, "q")
	to := (li + 1) % len(c.nodes)
	ls.do(func() { ls.handLeadTo(uint64(to + 1)) })
	eventually(t, "the lead moved", func() error {
		if b, _, err := c.nodes[to].Route("q"); err != nil || b == nil {
			return errors.New("the target does not lead yet")
		}
		return nil
	})
	if got := ls.rebuilds.Load(); got != rebuilds {
		t.Fatalf("the old leader rebuilt its broker %d times: its held receive failed at the step-down", got-rebuilds)
	}
	c.everywhere("q", 0, 1)
}
