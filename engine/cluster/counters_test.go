package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
)

// Every replica counts a queue's sends, receives and deletes as its
// leader did (engine/apply.go), so that a queue's counters go on from the
// same values on the next leader. Receives were counted by the leader
// alone: after a failover a queue's receive count started again from 0
// while its sends and deletes carried on.
func TestReplicasCountAsTheLeader(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	li, q := c.leaderQueue("counted")
	for k := range 6 {
		if _, err := q.Send([]engine.SendEntry{{Body: []byte(fmt.Sprint(k))}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := q.Receive(context.Background(), engine.ReceiveOptions{Max: 4, HasWait: true}, nil)
	if err != nil || len(ms) != 4 {
		t.Fatalf("received %d: %v", len(ms), err)
	}
	if _, _, err := q.ChangeVisibility(ms[3].Handle, time.Hour); err != nil { // not a receive
		t.Fatal(err)
	}
	errs := make([]error, 2)
	if _, err := q.Delete([]engine.ReceiptHandle{ms[0].Handle, ms[1].Handle}, errs); err != nil {
		t.Fatal(err)
	}
	c.converged("counted", 2, 2)
	stats := func(i int) (engine.QueueStats, error) {
		n := c.nodes[i]
		b := n.Broker(n.ShardOf("counted"))
		if b == nil {
			return engine.QueueStats{}, fmt.Errorf("node %d is rebuilding", i+1)
		}
		for _, s := range b.Stats().Queues {
			if s.Name == "counted" {
				return s, nil
			}
		}
		return engine.QueueStats{}, fmt.Errorf("node %d has no queue", i+1)
	}
	want, err := stats(li)
	if err != nil {
		t.Fatal(err)
	}
	if want.Sent != 6 || want.Received != 4 || want.Deleted != 2 {
		t.Fatalf("the leader counts %d sent, %d received, %d deleted; want 6, 4, 2", want.Sent, want.Received, want.Deleted)
	}
	for i := range c.nodes {
		eventually(t, fmt.Sprintf("node %d counts as the leader", i+1), func() error {
			got, err := stats(i)
			if err != nil {
				return err
			}
			if got.Sent != want.Sent || got.Received != want.Received || got.Deleted != want.Deleted {
				return fmt.Errorf("%d sent, %d received, %d deleted; the leader %d, %d, %d", got.Sent, got.Received, got.Deleted, want.Sent, want.Received, want.Deleted)
			}
			return nil
		})
	}
}

// A move to a dead-letter queue on the same shard is one record
// (engine/record.go, recDeadLetter): every replica counts it as the
// leader does, a dead letter of its source, not a delete. The followers
// counted it as a delete, so after a failover the queue's dead-letter
// count started again from 0 and its delete count held the moves.
func TestReplicasCountADeadLetterMoveAsTheLeader(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	c.preferredLeaders() // no hand-over under the receives below
	c.onLeaderIdempotent("dlq", func(b *engine.Broker) error {
		_, err := b.CreateQueue("dlq", engine.DefaultQueueConfig())
		return err
	})
	cfg := engine.DefaultQueueConfig()
	cfg.VisibilityTimeout = time.Second
	cfg.DeadLetterQueue, cfg.MaxReceiveCount = "dlq", 1
	li, b := c.leader("src")
	if _, err := b.CreateQueue("src", cfg); err != nil {
		t.Fatal(err)
	}
	q, err := b.Queue("src")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Send([]engine.SendEntry{{Body: []byte("poison")}}, nil); err != nil {
		t.Fatal(err)
	}
	stats := func(i int) (engine.QueueStats, error) {
		n := c.nodes[i]
		b := n.Broker(n.ShardOf("src"))
		if b == nil {
			return engine.QueueStats{}, fmt.Errorf("node %d is rebuilding", i+1)
		}
		for _, s := range b.Stats().Queues {
			if s.Name == "src" {
				return s, nil
			}
		}
		return engine.QueueStats{}, fmt.Errorf("node %d has no queue src", i+1)
	}
	// Received once, then moved by a receive after its visibility
	// timeout (MaxReceiveCount 1).
	eventually(t, "the message moved to dlq", func() error {
		if _, err := q.Receive(context.Background(), engine.ReceiveOptions{Max: 1, HasWait: true}, nil); err != nil && !errors.Is(err, engine.ErrMessageNotExist) {
			return err
		}
		if s, err := stats(li); err != nil || s.DeadLettered != 1 {
			return fmt.Errorf("the leader counts %+v (%v)", s, err)
		}
		return nil
	})
	want, err := stats(li)
	if err != nil {
		t.Fatal(err)
	}
	if want.DeadLettered != 1 || want.Deleted != 0 {
		t.Fatalf("the leader counts %d dead-lettered, %d deleted; want 1 and 0", want.DeadLettered, want.Deleted)
	}
	for i := range c.nodes {
		eventually(t, fmt.Sprintf("node %d counts as the leader", i+1), func() error {
			got, err := stats(i)
			if err != nil {
				return err
			}
			if got.Received != want.Received || got.DeadLettered != want.DeadLettered || got.Deleted != want.Deleted {
				return fmt.Errorf("%d received, %d dead-lettered, %d deleted; the leader %d, %d, %d",
					got.Received, got.DeadLettered, got.Deleted, want.Received, want.DeadLettered, want.Deleted)
			}
			return nil
		})
	}
}
