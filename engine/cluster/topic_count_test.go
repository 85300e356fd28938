package cluster

import (
	"fmt"
	"testing"

	"github.com/smqd/smqd/engine"
)

// Every replica counts a topic's publishes, those that deliver nowhere (no
// subscription) too: they are replicated as a publish header with no
// member. Before, only the leader counted them, so a follower answered
// MessageCount 0, and a failover lost the count.
func TestClusterTopicCountsPublishesDeliveredNowhere(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	c.onLeader("t", func(b *engine.Broker) error {
		_, err := b.CreateTopic("t", engine.DefaultTopicConfig())
		return err
	})
	const n = 20
	for range n {
		c.onLeader("t", func(b *engine.Broker) error {
			_, err := b.Publish("t", engine.PublishInput{Body: []byte("x")})
			return err
		})
	}
	for i := range c.nodes {
		eventually(t, fmt.Sprintf("node %d counts the publishes", i+1), func() error {
			b := c.nodes[i].Broker(0)
			if b == nil {
				return fmt.Errorf("rebuilding")
			}
			info, err := b.GetTopicAttributes("t")
			if err != nil {
				return err
			}
			if info.MessageCount != n {
				return fmt.Errorf("MessageCount %d, want %d", info.MessageCount, n)
			}
			return nil
		})
	}
}
