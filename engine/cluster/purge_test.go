package cluster

import (
	"context"
	"testing"

	"github.com/smqd/smqd/engine"
)

// TestClusterPurgeReplicates: a purge on a shard's leader, of more slots
// than one chunk of a stripe (engine/purge.go), reaches every replica as
// deletes, and a follower restarted from its log after it agrees.
//
// Its 600 sends and the purge take seconds under the race detector: with
// the default 0.2 s election timeout, a busy host made a leader step down
// (quorum not heard in time) and an operation meet its closed broker
// (engine: broker closed), 2 runs of 3 beside other load. A 1 s timeout.
func TestClusterPurgeReplicates(t *testing.T) {
	c := startTestCluster(&testCluster{t: t, nodes: make([]*Node, 3), shards: 1, electionTicks: 50,
		tweak: func(_ int, o *engine.Options) { o.Stripes = 1 }})
	c.onLeaderIdempotent("q", func(b *engine.Broker) error {
		_, err := b.CreateQueue("q", engine.DefaultQueueConfig())
		return err
	})
	const batches = 600 // 9,600 messages: three chunks of the one stripe
	c.sendBatches("m", batches)
	c.onLeader("q", func(b *engine.Broker) error {
		q, err := b.Queue("q")
		if err == nil {
			_, err = q.Receive(context.Background(), engine.ReceiveOptions{Max: 16, HasWait: true}, nil)
		}
		return err
	})
	c.converged("q", batches*16-16, 16)
	var purged int
	c.onLeader("q", func(b *engine.Broker) error {
		q, err := b.Queue("q")
		if err == nil {
			purged, err = q.Purge()
		}
		return err
	})
	if purged != batches*16 {
		t.Fatalf("Purge: %d, want %d", purged, batches*16)
	}
	c.converged("q", 0, 0)
	li, _ := c.leader("q")
	fi := (li + 1) % 3
	c.stop(fi)
	c.start(fi)
	c.converged("q", 0, 0)
}
