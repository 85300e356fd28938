package engine

import (
	"testing"
	"time"
)

// relayPair opens a broker whose topic "t" has a queue subscription
// "to-far" relayed to far's queue "far-q" through router, and publishes n
// messages, each acknowledged.
func relayPair(t *testing.T, clk *FakeClock, push PushOptions, n int) (b, far *Broker, router *twoBrokers, sub *subscription) {
	t.Helper()
	far, err := Open(Options{Clock: clk, Logger: testLogger(t), Stripes: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { far.Close() })
	mustQueue(t, far, "far-q", DefaultQueueConfig())
	router = &twoBrokers{target: far, refuse: 1 << 30}
	push.Concurrency = 2
	b, err = Open(Options{Clock: clk, Logger: testLogger(t), Stripes: 2, DeadLetterRouter: router, Push: push})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if _, err := b.CreateTopic("t", DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Subscribe("t", "to-far", SubscriptionConfig{Endpoint: "acs:mns:cn-hangzhou:1:queues/far-q", Format: FormatSimplified}); err != nil {
		t.Fatal(err)
	}
	tp, err := b.topicByName("t")
	if err != nil {
		t.Fatal(err)
	}
	if sub, err = b.subByName(tp, "to-far"); err != nil || !sub.relay {
		t.Fatalf("subscription: %v, relayed %v", err, sub != nil && sub.relay)
	}
	for i := range n {
		if _, err := b.Publish("t", PublishInput{Body: []byte{'m', byte('0' + i)}, Owner: "1"}); err != nil {
			t.Fatal(err)
		}
	}
	// The first hops are refused (an election on the queue's shard): the
	// deliveries wait in the push queue for their retry.
	waitUntil(t, "a refused hop", func() bool { router.mu.Lock(); defer router.mu.Unlock(); return router.hops > 0 })
	return b, far, router, sub
}

// TestUnsubscribeWaitsForRelayedDeliveries (topic_relay.go invariant 4):
// an Unsubscribe or DeleteTopic made while the deliveries of acknowledged
// publishes to a queue of another broker wait for their hop lets them
// through first; a publish made meanwhile no longer goes there. It
// discarded them (topics audit: 500 publishes acknowledged, then
// Unsubscribe; the queues on the other shards got 165 and 267).
func TestUnsubscribeWaitsForRelayedDeliveries(t *testing.T) {
	for _, how := range []string{"unsubscribe", "delete-topic"} {
		t.Run(how, func(t *testing.T) {
			clk := NewFakeClock(t0)
			const n = 3
			b, far, router, sub := relayPair(t, clk, PushOptions{RelayDrain: time.Minute}, n)
			done := make(chan error, 1)
			go func() {
				if how == "unsubscribe" {
					done <- b.Unsubscribe("t", "to-far")
				} else {
					done <- b.DeleteTopic("t")
				}
			}()
			closing := func() bool { b.topics.mu.RLock(); defer b.topics.mu.RUnlock(); return b.topics.closing[sub.id] > 0 }
			waitUntil(t, "the subscription closed to publishes", func() bool { return closing() || len(done) > 0 })
			if _, err := b.Publish("t", PublishInput{Body: []byte("late"), Owner: "1"}); err != nil && how == "unsubscribe" {
				t.Fatal(err)
			}
			router.mu.Lock()
			router.refuse = 0 // the queue's shard has a leader again
			router.mu.Unlock()
			var err error
			waitUntil(t, how+" done", func() bool {
				select {
				case err = <-done:
					return true
				default:
					clk.Advance(time.Second) // the hops' retries
					return false
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			fq, err := far.Queue("far-q")
			if err != nil {
				t.Fatal(err)
			}
			if a, _, _, _ := fq.counts(); a != n {
				t.Fatalf("after %s the relayed queue holds %d messages, want the %d acknowledged before it (and not the one published during it); PushStats %+v", how, a, n, b.PushStats())
			}
			if st := b.PushStats(); st.Discarded != 0 {
				t.Fatalf("%d deliveries discarded", st.Discarded)
			}
		})
	}
}

// TestUnsubscribeDiscardsRelayedDeliveriesAfterRelayDrain: while the
// queue's broker refuses every hop, Unsubscribe waits RelayDrain at most,
// then discards what waits (counted), as for an HTTP endpoint.
func TestUnsubscribeDiscardsRelayedDeliveriesAfterRelayDrain(t *testing.T) {
	clk := NewFakeClock(t0)
	const n = 3
	b, _, _, _ := relayPair(t, clk, PushOptions{RelayDrain: 20 * time.Millisecond}, n)
	if err := b.Unsubscribe("t", "to-far"); err != nil {
		t.Fatal(err)
	}
	if st := b.PushStats(); st.Discarded != n {
		t.Fatalf("%d deliveries discarded, want %d", st.Discarded, n)
	}
}
