package cluster

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
)

// Every acknowledged publish reaches both subscribed queues, the one on the
// topic's shard (in the publish itself) and the one on a shard another
// node leads (relayed: engine/topic_relay.go), at least once, while the
// queue's leader drops relay hops unread and stores some without
// answering, and then the leaders of the queue's and the topic's shards
// are stopped in turn.
func TestClusterTopicRelaySurvivesLeaderLoss(t *testing.T) {
	c := newTestClusterWith(t, 3, 4, func(_ int, o *engine.Options) {
		o.Push.Timeout, o.Push.Lease = time.Second, 2*time.Second // a former leader's relays come back soon
	})
	const topic = "relay-topic"
	ti, _ := c.leader(topic)
	var near, far string
	for k := 0; near == "" || far == ""; k++ {
		name := fmt.Sprintf("relay-q-%d", k)
		same := c.nodes[ti].ShardOf(name) == c.nodes[ti].ShardOf(topic)
		if li, _ := c.leader(name); same && near == "" {
			near = name
		} else if !same && li != ti && far == "" {
			far = name
		}
	}
	for _, q := range []string{near, far} {
		c.onLeaderIdempotent(q, func(b *engine.Broker) error {
			_, err := b.CreateQueue(q, engine.DefaultQueueConfig())
			return err
		})
	}
	c.onLeaderIdempotent(topic, func(b *engine.Broker) error {
		_, err := b.CreateTopic(topic, engine.DefaultTopicConfig())
		return err
	})
	for _, q := range []string{near, far} {
		// The queue of another shard was just created through its own
		// leader: Subscribe reads it after a read barrier (CatchUp).
		c.onLeaderIdempotent(topic, func(b *engine.Broker) error {
			_, err := b.Subscribe(topic, "to-"+q, engine.SubscriptionConfig{Endpoint: "acs:mns:test:1:queues/" + q, Format: engine.FormatSimplified})
			return err
		})
	}
	for _, nd := range c.nodes {
		nd.testDropMoves.Store(4)
		nd.testMuteMoves.Store(4)
	}

	// One publisher on the topic's leader, wherever it is; a publish that
	// failed may or may not have been stored.
	var mu sync.Mutex
	acked := map[string]bool{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var once sync.Once
	halt := func() { once.Do(func() { close(stop) }); wg.Wait() }
	defer halt() // the nodes log through t: stop before the test ends
	var nodesMu sync.Mutex
	nodes := append([]*Node(nil), c.nodes...)
	renew := func() {
		nodesMu.Lock()
		nodes = append(nodes[:0:0], c.nodes...)
		nodesMu.Unlock()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for j := 0; ; j++ {
			select {
			case <-stop:
				return
			default:
			}
			body := fmt.Sprintf("pub-%d", j)
			nodesMu.Lock()
			ns := nodes
			nodesMu.Unlock()
			for _, n := range ns {
				if n == nil {
					continue
				}
				if b, _, err := n.Route(topic); err == nil && b != nil {
					if _, err := b.Publish(topic, engine.PublishInput{Body: []byte(body), Owner: "1"}); err == nil {
						mu.Lock()
						acked[body] = true
						mu.Unlock()
					}
					break
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	count := func(q string) int64 {
		_, b := c.leader(q)
		qq, err := b.Queue(q)
		if err != nil {
			return 0
		}
		info, _ := qq.Attributes()
		return info.Active
	}
	fault := func(after int64, whose string) {
		eventuallyWithin(t, 60*time.Second, "relays under way", func() error {
			if n := count(far); n < after {
				return fmt.Errorf("%d relayed", n)
			}
			return nil
		})
		if whose == far {
			// No node stopped yet: every hop that met an injected fault
			// was counted failed by the node that sent it.
			var failed, faults int64
			for _, nd := range c.nodes {
				failed += nd.Status().TopicRelayHopsFailed
				faults += int64(8 - max(nd.testDropMoves.Load(), 0) - max(nd.testMuteMoves.Load(), 0))
			}
			if failed != faults || faults == 0 {
				t.Errorf("%d relay hops counted failed, %d met a fault", failed, faults)
			}
		}
		i, _ := c.leader(whose)
		t.Logf("stopping node %d, the leader of %s (%d copies in %s)", i+1, whose, count(far), far)
		c.stop(i)
		renew()
		time.Sleep(500 * time.Millisecond)
		c.start(i)
		renew()
	}
	fault(100, far)
	fault(300, topic)
	eventuallyWithin(t, 60*time.Second, "more relays after the faults", func() error {
		if n := count(far); n < 500 {
			return fmt.Errorf("%d relayed", n)
		}
		return nil
	})
	halt()

	mu.Lock()
	defer mu.Unlock()
	for _, q := range []string{near, far} {
		seen := map[string]int{}
		eventuallyWithin(t, 60*time.Second, "every acknowledged publish in "+q, func() error {
			_, b := c.leader(q)
			qq, err := b.Queue(q)
			if err != nil {
				return err
			}
			for {
				ms, err := qq.Receive(t.Context(), engine.ReceiveOptions{Max: engine.MaxBatch}, nil)
				if errors.Is(err, engine.ErrMessageNotExist) {
					break
				}
				if err != nil {
					return err
				}
				for i := range ms {
					seen[string(ms[i].Body)]++
				}
			}
			missing := 0
			for body := range acked {
				if seen[body] == 0 {
					missing++
				}
			}
			if missing > 0 {
				return fmt.Errorf("%d of %d acknowledged publishes not there yet", missing, len(acked))
			}
			return nil
		})
		dups := 0
		for body, k := range seen {
			if k > 1 {
				dups += k - 1
			}
			if _, err := fmt.Sscanf(body, "pub-%d", new(int)); err != nil {
				t.Errorf("%s holds %q, which was never published", q, body)
			}
		}
		t.Logf("%s: %d acknowledged publishes, %d distinct copies, %d duplicates", q, len(acked), len(seen), dups)
	}
}

// Deliveries to a subscribed queue of another shard that was deleted are
// dropped, as on a single node; the hops count them as dropped, not as
// failed ("retried for up to a day"), which they are not (scale audit,
// 2026-12-06: 860 such hops counted failed).
func TestClusterRelayToADeletedQueueCountsDropped(t *testing.T) {
	c := newTestCluster(t, 3, 4)
	const topic = "drop-topic"
	ti, _ := c.leader(topic)
	var far string
	for k := 0; far == ""; k++ {
		if name := fmt.Sprintf("drop-q-%d", k); c.nodes[ti].ShardOf(name) != c.nodes[ti].ShardOf(topic) {
			far = name
		}
	}
	c.onLeaderIdempotent(far, func(b *engine.Broker) error {
		_, err := b.CreateQueue(far, engine.DefaultQueueConfig())
		return err
	})
	c.onLeaderIdempotent(topic, func(b *engine.Broker) error {
		_, err := b.CreateTopic(topic, engine.DefaultTopicConfig())
		return err
	})
	c.onLeaderIdempotent(topic, func(b *engine.Broker) error {
		_, err := b.Subscribe(topic, "to-far", engine.SubscriptionConfig{Endpoint: "acs:mns:test:1:queues/" + far, Format: engine.FormatSimplified})
		return err
	})
	c.onLeader(far, func(b *engine.Broker) error { return b.DeleteQueue(far) })
	for i := range 5 {
		c.onLeader(topic, func(b *engine.Broker) error {
			_, err := b.Publish(topic, engine.PublishInput{Body: []byte(fmt.Sprint("p", i)), Owner: "1"})
			return err
		})
	}
	eventually(t, "the deliveries to the deleted queue dropped", func() error {
		var dropped, failed int64
		for _, nd := range c.nodes {
			st := nd.Status()
			dropped += st.TopicRelayHopsDropped
			failed += st.TopicRelayHopsFailed
		}
		if failed != 0 {
			return fmt.Errorf("%d hops counted failed", failed)
		}
		if dropped == 0 {
			return errors.New("none counted dropped yet")
		}
		return nil
	})
}
