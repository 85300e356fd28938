package cluster

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
)

// TestClusterHandOverGivesBackUntriedPushes: a leader that hands its
// shard's lead over (a SIGTERM's HandOverLeads, a preferred leader taking
// its shards back) gives the notifications its push worker had taken and
// not tried yet back at once, as a clean stop of a single node does
// (docs/operations.md, "Topics and HTTP push", "Durability"): the next
// leader pushes them without waiting for their lease. Before, the give-back
// was refused on the yielding replica ("not the leader of this queue's
// shard"), so they stayed leased for PushOptions.Lease (60 s by default)
// with the receive counted as an attempt of their retry strategy (topics2
// audit, 2026-12-07: 8 of 10 notifications pushed 61 s after a SIGTERM).
//
// The lease here is 10 minutes: what stays leased cannot arrive before the
// deadline, whatever the machine's speed.
func TestClusterHandOverGivesBackUntriedPushes(t *testing.T) {
	var mu sync.Mutex
	got := map[string]int{}
	calls := 0
	held := "" // the body of the second call: being pushed at the hand-over
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got[string(body)]++
		calls++
		k := calls
		if k == 2 {
			held = string(body)
		}
		mu.Unlock()
		switch k {
		case 1: // n0: held until the batch behind it is published
			select {
			case <-release:
			case <-r.Context().Done():
			}
		case 2: // the first of the batch: held until the pusher gives up (the hand-over)
			<-r.Context().Done()
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	seen := func(body string) bool {
		mu.Lock()
		defer mu.Unlock()
		return got[body] > 0
	}
	c := newTestClusterWith(t, 3, 1, func(_ int, o *engine.Options) {
		o.Push.Concurrency = 1 // one worker: it takes the backlog in one batch
		o.Push.Timeout = 30 * time.Second
		o.Push.Lease = 10 * time.Minute
	})
	const topic = "handover-topic"
	c.onLeaderIdempotent(topic, func(b *engine.Broker) error {
		_, err := b.CreateTopic(topic, engine.DefaultTopicConfig())
		return err
	})
	c.onLeaderIdempotent(topic, func(b *engine.Broker) error {
		_, err := b.Subscribe(topic, "hook", engine.SubscriptionConfig{Endpoint: srv.URL + "/hook", Format: engine.FormatSimplified})
		return err
	})
	publish := func(body string) {
		c.onLeader(topic, func(b *engine.Broker) error {
			_, err := b.Publish(topic, engine.PublishInput{Body: []byte(body), Owner: "1"})
			return err
		})
	}
	publish("n0")
	eventuallyWithin(t, 30*time.Second, "n0 pushed", func() error {
		if !seen("n0") {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	const n = 6
	for i := 1; i <= n; i++ {
		publish(fmt.Sprintf("n%d", i))
	}
	close(release) // n0 answered: the worker takes n1..n6 in one batch and holds the first it tries
	eventuallyWithin(t, 30*time.Second, "the batch's first push", func() error {
		mu.Lock()
		defer mu.Unlock()
		if held == "" {
			return fmt.Errorf("not yet (received: %v)", got)
		}
		return nil
	})
	li, _ := c.leader(topic)
	to := (li + 1) % len(c.nodes)
	s := c.nodes[li].shards[c.nodes[li].ShardOf(topic)]
	s.do(func() { s.handLeadTo(uint64(to + 1)) })
	eventuallyWithin(t, 30*time.Second, "the lead handed over", func() error {
		if nl, _ := c.leader(topic); nl == li {
			return fmt.Errorf("node %d still leads", li+1)
		}
		return nil
	})
	// The one being pushed stays leased (at least once); the rest of the
	// batch was never tried: the next leader pushes it now.
	eventuallyWithin(t, 60*time.Second, "the untried notifications pushed by the next leader", func() error {
		for i := 1; i <= n; i++ {
			if b := fmt.Sprintf("n%d", i); !seen(b) {
				mu.Lock()
				defer mu.Unlock()
				return fmt.Errorf("%s not pushed (received: %v)", b, got)
			}
		}
		return nil
	})
}
