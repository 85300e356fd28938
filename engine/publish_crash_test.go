package engine

// Crash tests of topics and publishes (publish.go invariants 1-4,
// topic.go invariant 1): a publish group torn at every record boundary and
// inside every record, topics surviving crashes and restarts.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// openPubDurable opens a durable broker on dir that checkpoints only when
// closed cleanly, so that the log tail holds everything of a test.
func openPubDurable(t *testing.T, dir string, clk *FakeClock) *Broker {
	t.Helper()
	o := Options{Dir: dir, Clock: clk, Stripes: 2}
	o.WAL.Sync = SyncAlways
	o.WAL.SegmentBytes = 64 << 10
	o.CheckpointInterval = 24 * time.Hour
	o.CheckpointRecords, o.MaxReplayRecords = 1<<40, 1<<40
	o.CheckpointBytes, o.MaxReplayBytes = 1<<40, 1<<40
	b, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var pubSinks = []string{"sink-a", "sink-b", "sink-c"}

// setupPubTopic creates the sinks, the topic and one subscription per sink
// (SIMPLIFIED, so a delivery's body is the published body; the last one XML).
func setupPubTopic(t *testing.T, b *Broker) {
	t.Helper()
	for _, n := range pubSinks {
		mustQueue(t, b, n, DefaultQueueConfig())
	}
	if _, err := b.CreateTopic("pt", DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	for i, n := range pubSinks {
		f := FormatSimplified
		if i == len(pubSinks)-1 {
			f = FormatXML
		}
		if _, err := b.Subscribe("pt", "to-"+n, SubscriptionConfig{Endpoint: qEndpoint(n), Format: f}); err != nil {
			t.Fatal(err)
		}
	}
}

// deliveries counts, per sink, the messages whose body is or carries body.
func deliveries(t *testing.T, b *Broker, body string) []int {
	t.Helper()
	var out []int
	for i, n := range pubSinks {
		q, err := b.Queue(n)
		if err != nil {
			t.Fatalf("sink %s lost: %v", n, err)
		}
		c := 0
		err = dumpQueue(q, func(_ MessageID, got []byte, _ string, _ uint32, _ int64) {
			want := body
			if i == len(pubSinks)-1 {
				want = "<Message>" + body + "</Message>"
			}
			if string(got) == want || (i == len(pubSinks)-1 && contains(got, want)) {
				c++
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

func contains(b []byte, s string) bool {
	for i := 0; i+len(s) <= len(b); i++ {
		if string(b[i:i+len(s)]) == s {
			return true
		}
	}
	return false
}

// allOrNone fails unless every sink holds the same count, and returns it.
func allOrNone(t *testing.T, got []int, what string) int {
	t.Helper()
	for _, c := range got {
		if c != got[0] {
			t.Fatalf("%s: deliveries per sink %v: a publish is in some subscriptions' queues and not in others", what, got)
		}
	}
	return got[0]
}

// TestPublishTornGroup cuts the log inside a publish group at every record
// boundary and inside every record (header and each member), the way a
// crash or power loss tears the tail, and checks after each restart that
// the publish is in every queue or in none, that a complete group survives,
// and that a torn group stays gone once later records follow it and a
// checkpoint folds past it (invariants 1, 2, 4).
func TestPublishTornGroup(t *testing.T) {
	clk := NewFakeClock(t0)
	pristine := t.TempDir()
	b := openPubDurable(t, pristine, clk)
	setupPubTopic(t, b)
	before := durableOf(b).wal.End()
	res, err := b.Publish("pt", PublishInput{Body: []byte("p1"), Owner: "o"})
	if err != nil || res.Delivered != len(pubSinks) {
		t.Fatalf("publish: %+v %v", res, err)
	}
	crashBroker(b)

	var group []walRecord
	for _, r := range listRecords(t, pristine) {
		if r.pos >= uint64(before) {
			group = append(group, r)
		}
	}
	// (Only the verdicts below are checked, not the records' shape: the
	// test must fail on the verdicts if the group is not atomic.)
	if len(group) < len(pubSinks) {
		t.Fatalf("the publish wrote %v, want at least %d records", group, len(pubSinks))
	}
	end := group[len(group)-1].pos + group[len(group)-1].size
	cuts := map[uint64]bool{end: true}
	for _, r := range group {
		cuts[r.pos], cuts[r.pos+4], cuts[r.pos+r.size/2&^3], cuts[r.pos+r.size-4] = true, true, true, true
	}
	var sorted []uint64
	for c := range cuts {
		sorted = append(sorted, c)
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	complete := 0
	for _, cut := range sorted {
		t.Run(fmt.Sprintf("cut=%d", cut-group[0].pos), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "d")
			copyDir(t, pristine, dir)
			for _, r := range group {
				if from := max(cut, r.pos); from < r.pos+r.size {
					damageAt(t, dir, from, int(r.pos+r.size-from), func(b []byte) { clear(b) })
				}
			}
			b := openPubDurable(t, dir, clk)
			n := allOrNone(t, deliveries(t, b, "p1"), "after the cut")
			if cut == end && n != 1 {
				t.Fatalf("the whole group is in the log, yet the publish is in %d queues' worth", n)
			}
			if cut < end && n != 0 {
				t.Fatalf("a group cut at %d of %d bytes was delivered", cut-group[0].pos, end-group[0].pos)
			}
			if rs := b.Recovery(); cut < end && cut >= group[1].pos && rs.AbortedPublishes != 1 {
				t.Fatalf("recovery aborted %d publishes, want 1", rs.AbortedPublishes)
			}
			if c := messageCount(t, b, "pt"); c != int64(n) {
				t.Fatalf("MessageCount %d, the publish delivered %d times (topic_count.go invariant 2)", c, n)
			}
			complete += n
			// Later records after the torn group, a clean close (a
			// checkpoint folds the whole log) and a crash-free restart:
			// the verdict stands.
			if _, err := b.Publish("pt", PublishInput{Body: []byte("p2"), Owner: "o"}); err != nil {
				t.Fatal(err)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			b = openPubDurable(t, dir, clk)
			defer b.Close()
			if got := allOrNone(t, deliveries(t, b, "p1"), "after a checkpoint"); got != n {
				t.Fatalf("p1 in %d after the checkpoint, %d before", got, n)
			}
			if got := allOrNone(t, deliveries(t, b, "p2"), "p2"); got != 1 {
				t.Fatalf("the publish after the cut is in %d", got)
			}
			if c := messageCount(t, b, "pt"); c != int64(n)+1 {
				t.Fatalf("MessageCount %d after a checkpoint, want %d", c, n+1)
			}
		})
	}
	if complete != 1 {
		t.Fatalf("%d cuts kept the publish, want exactly 1 (the cut after the group)", complete)
	}
}

// TestTopicsDurable: topics and subscriptions survive a crash (from the log
// tail) and a clean restart (from the index), deletions too, and ids are
// not reused.
func TestTopicsDurable(t *testing.T) {
	clk := NewFakeClock(t0)
	dir := t.TempDir()
	b := openPubDurable(t, dir, clk)
	setupPubTopic(t, b)
	if _, err := b.CreateTopic("gone", DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Subscribe("gone", "s", SubscriptionConfig{Endpoint: qEndpoint("sink-a")}); err != nil {
		t.Fatal(err)
	}
	size, exp, tag := 4096, ExponentialDecayRetry, "tg"
	if err := b.SetTopicAttributes("pt", TopicPatch{MaxMessageBytes: &size}); err != nil {
		t.Fatal(err)
	}
	if err := b.SetSubscriptionAttributes("pt", "to-sink-a", SubscriptionPatch{Strategy: &exp, FilterTag: &tag}); err != nil {
		t.Fatal(err)
	}
	if err := b.Unsubscribe("pt", "to-sink-b"); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteTopic("gone"); err != nil {
		t.Fatal(err)
	}
	check := func(b *Broker, when string) {
		t.Helper()
		names, _, err := b.ListTopics("", "", 0)
		if err != nil || fmt.Sprint(names) != "[pt]" {
			t.Fatalf("%s: topics %v %v", when, names, err)
		}
		info, err := b.GetTopicAttributes("pt")
		if err != nil || info.Config.MaxMessageBytes != 4096 || info.CreateTime.UnixMilli() != t0.UnixMilli() {
			t.Fatalf("%s: topic %+v %v", when, info, err)
		}
		subs, _, err := b.ListSubscriptions("pt", "", "", 0)
		if err != nil || fmt.Sprint(subs) != "[to-sink-a to-sink-c]" {
			t.Fatalf("%s: subscriptions %v %v", when, subs, err)
		}
		si, err := b.GetSubscriptionAttributes("pt", "to-sink-a")
		if err != nil || si.Config.Strategy != ExponentialDecayRetry || si.Config.FilterTag != "tg" || si.Config.Format != FormatSimplified {
			t.Fatalf("%s: subscription %+v %v", when, si, err)
		}
		// Deliveries follow the recovered subscriptions.
		res, err := b.Publish("pt", PublishInput{Body: []byte(when), Tag: "tg"})
		if err != nil || res.Delivered != 2 {
			t.Fatalf("%s: publish %+v %v", when, res, err)
		}
	}
	crashBroker(b)
	b = openPubDurable(t, dir, clk)
	check(b, "after a crash")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openPubDurable(t, dir, clk)
	if b.Recovery().Replayed > 1 {
		t.Fatalf("a clean restart replayed %d records: topics were not checkpointed", b.Recovery().Replayed)
	}
	check(b, "after a clean restart")
	if _, err := b.CreateTopic("new", DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	tp, _ := b.topicByName("new")
	if tp.id <= 2 {
		t.Fatalf("topic id %d reused", tp.id)
	}
	b.Close()
}

// TestPublishLargerThanTheLogBuffer: a fan-out whose group does not fit the
// log's write buffer is refused with InvalidArgument, nothing is delivered,
// and the broker stays healthy (it is not a storage failure).
func TestPublishLargerThanTheLogBuffer(t *testing.T) {
	o := Options{Dir: t.TempDir(), Clock: NewFakeClock(t0)}
	o.WAL.BufferBytes = 256 << 10
	b, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.CreateTopic("big", DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		name := fmt.Sprintf("bq%d", i)
		mustQueue(t, b, name, DefaultQueueConfig())
		if _, err := b.Subscribe("big", name, SubscriptionConfig{Endpoint: qEndpoint(name), Format: FormatSimplified}); err != nil {
			t.Fatal(err)
		}
	}
	body := make([]byte, MaxMessageBytes)
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := range body {
		body[i] = byte('a' + rnd.IntN(26)) // incompressible enough: the log compresses large records
	}
	if _, err := b.Publish("big", PublishInput{Body: body}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a 5 x 64 KiB fan-out through a 256 KiB buffer: %v", err)
	}
	if err := b.Health(); err != nil {
		t.Fatalf("the broker failed: %v", err)
	}
	for i := range 5 {
		q, _ := b.Queue(fmt.Sprintf("bq%d", i))
		if n := len(receiveAll(t, q)); n != 0 {
			t.Fatalf("bq%d holds %d messages of a refused publish", i, n)
		}
		checkInvariants(t, q)
	}
	if res, err := b.Publish("big", PublishInput{Body: []byte("small")}); err != nil || res.Delivered != 5 {
		t.Fatalf("a small publish after it: %+v %v", res, err)
	}
}
