package cluster

import (
	"errors"
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
	// An election timeout of 1 s, not the tests' 200 ms: under the race
	// detector on a loaded CI, a follower can take longer than 200 ms
	// over the 6.5 MiB entry, and the leader steps down (CheckQuorum).
	c := startTestCluster(&testCluster{t: t, nodes: make([]*Node, 3), shards: 1, electionTicks: 50})
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
	// A leader change with the entry in flight still fails the publish
	// with a bare ErrNotLeader (it may or may not have committed), and
	// the test publishes again, as a client would after its 503. The
	// entry is one, so each attempt delivers to every queue or to none:
	// every queue holds the same number of copies, at least one.
	var res engine.PublishResult
	attempts := 0
	eventually(t, "the publish", func() error {
		attempts++
		_, b := c.leader(topic)
		var err error
		res, err = b.Publish(topic, engine.PublishInput{Body: body})
		if err != nil && (attempts == 3 || !errors.Is(err, engine.ErrNotLeader)) {
			t.Fatalf("attempt %d: %v", attempts, err)
		}
		return err
	})
	if res.Delivered != subs {
		t.Fatalf("delivered to %d of %d subscriptions", res.Delivered, subs)
	}
	li, _ := c.leader(topic)
	info, err := c.counts(li, "bq0")
	if err != nil {
		t.Fatal(err)
	}
	copies := info.Active
	if copies < 1 || copies > int64(attempts) {
		t.Fatalf("bq0 holds %d copies after %d publishes", copies, attempts)
	}
	for i := range subs {
		c.converged(fmt.Sprintf("bq%d", i), copies, 0)
	}
	c.stop(li)
	for i := range subs {
		q := fmt.Sprintf("bq%d", i)
		msgs := c.drain(q)
		if int64(len(msgs)) != copies {
			t.Fatalf("%s on the next leader: %d messages, want %d", q, len(msgs), copies)
		}
		for _, m := range msgs {
			if string(m.Body) != string(body) {
				t.Fatalf("%s on the next leader: a body of %d bytes differs", q, len(m.Body))
			}
		}
	}
}
