package engine

import (
	"testing"
	"time"
)

// messageCount returns topic name's MessageCount.
func messageCount(t *testing.T, b *Broker, name string) int64 {
	t.Helper()
	info, err := b.GetTopicAttributes(name)
	if err != nil {
		t.Fatal(err)
	}
	return info.MessageCount
}

// publishN publishes n messages to topic "pt", a minute apart.
func publishN(t *testing.T, b *Broker, clk *FakeClock, n int) {
	t.Helper()
	for range n {
		if _, err := b.Publish("pt", PublishInput{Body: []byte("x"), Owner: "o"}); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Minute)
	}
}

// A topic's MessageCount survives a crash (the log tail's publishes) and a
// clean restart (the index's counts), and a checkpoint window folded twice
// (its data committed, then a crash before its position: index invariant
// 2) counts its publishes once (topic_count.go invariant 1). The counts
// age out after the retention, and go with their topic.
func TestTopicCountSurvivesRestarts(t *testing.T) {
	clk := NewFakeClock(t0)
	dir := t.TempDir()
	b := openPubDurable(t, dir, clk)
	setupPubTopic(t, b)
	if _, err := b.CreateTopic("quiet", DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	publishN(t, b, clk, 3)
	d := durableOf(b)
	from := d.cpPos.Load()
	if err := d.checkpoint(); err != nil {
		t.Fatal(err)
	}
	publishN(t, b, clk, 4) // across a five-minute bucket
	// The window before folded again with the new one, as after a crash
	// that left the first commit's data without its position.
	d.cpPos.Store(from)
	if err := d.checkpoint(); err != nil {
		t.Fatal(err)
	}
	publishN(t, b, clk, 2) // in the log tail only
	if n := messageCount(t, b, "pt"); n != 9 {
		t.Fatalf("MessageCount %d before the crash, want 9", n)
	}
	crashBroker(b)

	b = openPubDurable(t, dir, clk)
	if n := messageCount(t, b, "pt"); n != 9 {
		t.Fatalf("MessageCount %d after a crash, want 9", n)
	}
	if n := messageCount(t, b, "quiet"); n != 0 {
		t.Fatalf("a topic never published to counts %d", n)
	}
	publishN(t, b, clk, 1)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openPubDurable(t, dir, clk)
	if n := messageCount(t, b, "pt"); n != 10 {
		t.Fatalf("MessageCount %d after a clean restart, want 10", n)
	}
	tp, _ := b.topicByName("pt")
	id := tp.id

	clk.Advance(TopicRetention)
	if n := messageCount(t, b, "pt"); n != 0 {
		t.Fatalf("MessageCount %d a retention later, want 0", n)
	}
	if err := b.DeleteTopic("pt"); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openPubDurable(t, dir, clk)
	defer b.Close()
	if v, err := durableOf(b).idx.TopicCount(id); err != nil || v != nil {
		t.Fatalf("a deleted topic's counts stay in the index: %x %v", v, err)
	}
}

// A publish that delivers nowhere (a topic without subscriptions, or a tag
// no subscription filters for) counts like any other across a crash and a
// clean restart: it is logged as a header with no member.
func TestTopicCountOfPublishesDeliveredNowhere(t *testing.T) {
	clk := NewFakeClock(t0)
	dir := t.TempDir()
	b := openPubDurable(t, dir, clk)
	setupPubTopic(t, b)
	if _, err := b.CreateTopic("lonely", DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		res, err := b.Publish("lonely", PublishInput{Body: []byte("x")})
		if err != nil || res.Delivered != 0 {
			t.Fatalf("publish %d: %+v %v", i, res, err)
		}
	}
	// A tag the topic's only subscription does not filter for.
	if _, err := b.CreateTopic("picky", DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Subscribe("picky", "only-a", SubscriptionConfig{Endpoint: qEndpoint(pubSinks[0]), FilterTag: "a"}); err != nil {
		t.Fatal(err)
	}
	if res, err := b.Publish("picky", PublishInput{Body: []byte("y"), Tag: "b"}); err != nil || res.Delivered != 0 {
		t.Fatalf("a publish no subscription filters for: %+v %v", res, err)
	}
	if n := messageCount(t, b, "lonely"); n != 3 {
		t.Fatalf("MessageCount %d, want 3", n)
	}
	crashBroker(b)
	b = openPubDurable(t, dir, clk)
	if n := messageCount(t, b, "lonely"); n != 3 {
		t.Fatalf("MessageCount %d after a crash, want 3", n)
	}
	if n := messageCount(t, b, "picky"); n != 1 {
		t.Fatalf("picky's MessageCount %d after a crash, want 1", n)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openPubDurable(t, dir, clk)
	defer b.Close()
	if n := messageCount(t, b, "lonely"); n != 3 {
		t.Fatalf("MessageCount %d after a clean restart, want 3", n)
	}
}

// The log tail's publishes count after a crash when a topic or
// subscription record follows them in the tail: recovery's fold made
// its topic maps at the first such record and cleared the publishes it
// had counted with them (found by TestTopicModel, 2026-12-06).
func TestTopicCountTailBeforeATopicRecord(t *testing.T) {
	for _, after := range []string{"Subscribe", "CreateTopic", "SetTopicAttributes", "Unsubscribe"} {
		t.Run(after, func(t *testing.T) {
			clk := NewFakeClock(t0)
			dir := t.TempDir()
			b := openPubDurable(t, dir, clk)
			setupPubTopic(t, b)
			mustQueue(t, b, "later", DefaultQueueConfig())
			if err := durableOf(b).checkpoint(); err != nil {
				t.Fatal(err)
			}
			publishN(t, b, clk, 3) // in the log tail only
			var err error
			switch after {
			case "Subscribe":
				_, err = b.Subscribe("pt", "later", SubscriptionConfig{Endpoint: qEndpoint("later")})
			case "CreateTopic":
				_, err = b.CreateTopic("other", DefaultTopicConfig())
			case "SetTopicAttributes":
				on := true
				err = b.SetTopicAttributes("pt", TopicPatch{LoggingEnabled: &on})
			case "Unsubscribe":
				err = b.Unsubscribe("pt", "to-"+pubSinks[0])
			}
			if err != nil {
				t.Fatal(err)
			}
			crashBroker(b)
			b = openPubDurable(t, dir, clk)
			defer b.Close()
			if n := messageCount(t, b, "pt"); n != 3 {
				t.Fatalf("MessageCount %d after a crash, want 3", n)
			}
		})
	}
}
