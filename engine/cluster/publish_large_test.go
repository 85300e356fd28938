package cluster

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/smqd/smqd/engine"
)

// A publish to 100 subscriptions of a 64 KiB message that does not
// compress is one raft entry of about 6.5 MiB, three times the shard's
// log buffer (2 MiB): the leader takes it (wal invariant 12), every
// replica applies it whole, and the node that leads next holds every
// delivery. It was refused at 32 subscriptions (topics audit, 2026-12-07).
func TestClusterPublishLargerThanTheShardLog(t *testing.T) {
	const subs = 100
	c := newTestCluster(t, 3, 1)
	// No balancer hand-over under the creates and the publish: a proposal
	// in flight at one fails with a bare ErrNotLeader.
	c.preferredLeaders()
	const topic = "big-topic"
	c.onLeaderIdempotent(topic, func(b *engine.Broker) error {
		_, err := b.CreateTopic(topic, engine.DefaultTopicConfig())
		return err
	})
	for i := range subs {
		q := fmt.Sprintf("bq%d", i)
		c.onLeaderIdempotent(q, func(b *engine.Broker) error {
			if _, err := b.CreateQueue(q, engine.DefaultQueueConfig()); err != nil {
				return err
			}
			_, err := b.Subscribe(topic, "to-"+q, engine.SubscriptionConfig{Endpoint: "acs:mns:test:1:queues/" + q, Format: engine.FormatSimplified})
			return err
		})
	}
	body := make([]byte, engine.MaxMessageBytes)
	rnd := rand.New(rand.NewPCG(3, 4))
	for i := range body {
		body[i] = byte('a' + rnd.IntN(26))
	}
	var res engine.PublishResult
	c.onLeader(topic, func(b *engine.Broker) error {
		var err error
		res, err = b.Publish(topic, engine.PublishInput{Body: body})
		return err
	})
	if res.Delivered != subs {
		t.Fatalf("delivered to %d of %d subscriptions", res.Delivered, subs)
	}
	for i := range subs {
		c.converged(fmt.Sprintf("bq%d", i), 1, 0)
	}
	li, _ := c.leader(topic)
	c.stop(li)
	for i := range subs {
		q := fmt.Sprintf("bq%d", i)
		msgs := c.drain(q)
		if len(msgs) != 1 || string(msgs[0].Body) != string(body) {
			t.Fatalf("%s on the next leader: %d messages", q, len(msgs))
		}
	}
}
