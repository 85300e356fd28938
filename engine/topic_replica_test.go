package engine

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// topicState is what a broker shows of its topics, subscriptions and
// their deliveries, for comparing replicas.
// MessageCount included: it is durable (topic_count.go).
func topicState(t *testing.T, b *Broker) string {
	t.Helper()
	var out bytes.Buffer
	names, _, err := b.ListTopics("", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		info, err := b.GetTopicAttributes(n)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&out, "topic %s %+v created %d modified %d\n", n, info.Config, info.CreateTime.UnixMilli(), info.LastModifyTime.UnixMilli())
		fmt.Fprintf(&out, "  count %d\n", info.MessageCount)
		subs, _, err := b.ListSubscriptions(n, "", "", 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range subs {
			si, err := b.GetSubscriptionAttributes(n, s)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&out, "  sub %s %+v created %d modified %d\n", s, si.Config, si.CreateTime.UnixMilli(), si.LastModifyTime.UnixMilli())
			tp, _ := b.topicByName(n)
			sub, _ := b.subByName(tp, s)
			if q := b.internalQueue(pushQueueName(sub.id)); q != nil {
				fmt.Fprintf(&out, "    push queue %s\n", queueBodies(t, q))
			}
		}
	}
	qs, _, err := b.ListQueues("", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range qs {
		q, err := b.Queue(n)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&out, "queue %s %s\n", n, queueBodies(t, q))
	}
	return out.String()
}

// queueBodies lists a queue's messages: body and properties, sorted.
func queueBodies(t *testing.T, q *Queue) []string {
	t.Helper()
	var all []string
	if err := dumpQueueMsgs(q, func(id MessageID, m *Message, state string, _ uint32, _ int64) {
		all = append(all, fmt.Sprintf("%s %q %d props %s", id, m.Body, m.Priority, propsString(m.Properties)))
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(all)
	return all
}

func propsString(ps []Property) string {
	var b bytes.Buffer
	for _, p := range ps {
		fmt.Fprintf(&b, "%s=%s;", p.Name, p.Value)
	}
	return b.String()
}

// A follower applies every topic record its leader logs (topic_replica.go):
// topics, their attributes, subscriptions and their changes, publishes
// (the deliveries to queues and to push queues, all or none, and the
// topic's MessageCount), unsubscribes and deletes; it keeps them across a
// restart, a snapshot carries them to a new member, and ids stay above
// every id used (invariant 2). The leader's pushes are off here; a
// follower starts none until it leads, and stops them when it stops
// leading (invariant 4).
func TestReplicaTopics(t *testing.T) {
	h := &handShard{t: t, rep: &handReplica{kick: make(chan struct{}, 1)}, clk: NewFakeClock(t0), next: 1}
	h.mod = func(o *Options) { o.Push.Disabled = true }
	h.leader = h.open(t.TempDir(), h.rep)
	h.fdir = t.TempDir()
	h.mod = nil // the follower pushes once it leads
	h.follower = h.open(h.fdir, &handReplica{kick: make(chan struct{}, 1)})
	defer func() { h.leader.Close(); h.follower.Close() }()
	if err := h.leader.SetLeader(true, 1); err != nil {
		t.Fatal(err)
	}
	L := h.leader
	h.do(func() error { _, err := L.CreateQueue("q", DefaultQueueConfig()); return err })
	h.do(func() error { _, err := L.CreateQueue("dead", DefaultQueueConfig()); return err })
	for _, n := range []string{"t", "gone"} {
		h.do(func() error { _, err := L.CreateTopic(n, DefaultTopicConfig()); return err })
	}
	h.do(func() error {
		_, err := L.Subscribe("t", "to-q", SubscriptionConfig{Endpoint: "acs:mns:cn-hangzhou:1:queues/q", Format: FormatSimplified})
		return err
	})
	h.do(func() error {
		_, err := L.Subscribe("t", "web", SubscriptionConfig{Endpoint: "http://127.0.0.1:9/hook", Format: FormatJSON, DeadLetterQueue: "dead"})
		return err
	})
	h.do(func() error {
		_, err := L.Subscribe("gone", "web2", SubscriptionConfig{Endpoint: "http://127.0.0.1:9/other"})
		return err
	})
	for i := range 3 {
		h.do(func() error {
			in := PublishInput{Body: []byte(fmt.Sprint("m", i)), Owner: "1"}
			if i == 1 {
				in.Properties, in.Tag = testProps(i), "x"
			}
			_, err := L.Publish("t", in)
			return err
		})
	}
	h.do(func() error {
		return L.SetTopicAttributes("t", TopicPatch{MaxMessageBytes: new(2048)})
	})
	h.do(func() error {
		return L.SetSubscriptionAttributes("t", "to-q", SubscriptionPatch{FilterTag: new("x")})
	})
	h.do(func() error { _, err := L.Publish("t", PublishInput{Body: []byte("untagged"), Owner: "1"}); return err })
	h.do(func() error {
		_, err := L.Subscribe("t", "dropped", SubscriptionConfig{Endpoint: "http://127.0.0.1:9/dropped"})
		return err
	})
	h.do(func() error { return L.Unsubscribe("t", "dropped") })
	h.do(func() error { return L.DeleteTopic("gone") })
	h.clk.Advance(time.Second)
	want := topicState(t, L)
	for _, line := range []string{`"m1"`, "order=1;", `sub to-q`, `sub web`, "push queue", "count 4"} {
		if !bytes.Contains([]byte(want), []byte(line)) {
			t.Fatalf("the leader's state lacks %s:\n%s", line, want)
		}
	}
	if bytes.Contains([]byte(want), []byte("gone")) {
		t.Fatalf("the deleted topic is still there:\n%s", want)
	}
	check := func(what string, b *Broker) {
		t.Helper()
		want := topicState(t, L)
		if got := topicState(t, b); got != want {
			t.Fatalf("%s:\n%s\nthe leader:\n%s", what, got, want)
		}
		if b.topics.nextTopicID < L.topics.nextTopicID || b.topics.nextSubID < L.topics.nextSubID {
			t.Fatalf("%s: next ids %d/%d below the leader's %d/%d", what, b.topics.nextTopicID, b.topics.nextSubID, L.topics.nextTopicID, L.topics.nextSubID)
		}
	}
	check("the follower", h.follower)
	h.restartFollower()
	check("the follower after a restart", h.follower)

	// A new member from a snapshot.
	var snap bytes.Buffer
	if err := L.ExportState(&snap); err != nil {
		t.Fatal(err)
	}
	ndir := t.TempDir()
	nb := h.open(ndir, &handReplica{kick: make(chan struct{}, 1)})
	if err := nb.ImportState(&snap, h.next-1, 1, nil); err != nil {
		t.Fatal(err)
	}
	check("a member from a snapshot", nb)
	if err := nb.Close(); err != nil {
		t.Fatal(err)
	}
	nb = h.open(ndir, &handReplica{kick: make(chan struct{}, 1)})
	defer nb.Close()
	check("a member from a snapshot, restarted", nb) // the counts folded at the import (topic_count.go)

	// The follower pushes only while it leads, and a new term's topic
	// messages count from the term.
	F := h.follower
	F.pusher.mu.Lock()
	n := len(F.pusher.subs)
	F.pusher.mu.Unlock()
	if n != 0 {
		t.Fatalf("a follower runs %d push subscriptions", n)
	}
	if err := F.SetLeader(true, 2); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the new leader pushes", func() bool {
		F.pusher.mu.Lock()
		defer F.pusher.mu.Unlock()
		return len(F.pusher.subs) == 1
	})
	tp, err := F.topicByName("t")
	if err != nil {
		t.Fatal(err)
	}
	if tp.seq.Load() < 2<<bootShift {
		t.Fatalf("topic seq %d below term 2's base", tp.seq.Load())
	}
	if err := F.SetLeader(false, 2); err != nil {
		t.Fatal(err)
	}
	F.pusher.mu.Lock()
	n = len(F.pusher.subs)
	F.pusher.mu.Unlock()
	if n != 0 {
		t.Fatalf("a replica that stopped leading runs %d push subscriptions", n)
	}

	// An unsubscribe record written before it carried its topic's id.
	s, err := F.subByName(tp, "to-q")
	if err != nil {
		t.Fatal(err)
	}
	if err := F.applyTopicRecord(recUnsubscribe, 0, encodeID(s.id)); err != nil {
		t.Fatal(err)
	}
	if _, err := F.subByName(tp, "to-q"); !errors.Is(err, ErrSubscriptionNotExist) {
		t.Fatalf("an unsubscribe of the older form left the subscription: %v", err)
	}
}
