package engine

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// A snapshot's topic counts are those of its index (topic_count.go
// invariant 5): the member that installs it replays the entries after the
// index, and counts their publishes itself. Before, the stream held the
// exporter's live counts, and a member counted each publish of an entry
// after the index twice (a cluster test counted 456 for 400 publishes; the
// long chaos run 17,880 for 14,237). Both a leader (counts at append) and
// a follower (counts at apply) export, over publishes with members and
// without, spread over several five-minute buckets; the member's counts
// hold across a restart.
func TestReplicaSnapshotCountsAsOfItsIndex(t *testing.T) {
	h := leadingHandShard(t, 0)
	L := h.leader
	h.do(func() error { _, err := L.CreateQueue("q", DefaultQueueConfig()); return err })
	for _, n := range []string{"t", "u"} {
		h.do(func() error { _, err := L.CreateTopic(n, DefaultTopicConfig()); return err })
	}
	h.do(func() error {
		_, err := L.Subscribe("t", "to-q", SubscriptionConfig{Endpoint: "acs:mns:cn-hangzhou:1:queues/q"})
		return err
	})
	publish := func(topic string, n int) {
		for range n {
			h.do(func() error { _, err := L.Publish(topic, PublishInput{Body: []byte("x"), Owner: "1"}); return err })
			h.clk.Advance(2 * time.Minute)
		}
	}
	publish("t", 5) // "t" delivers to q; "u" nowhere (a header alone)
	publish("u", 3)
	at := h.next - 1 // the snapshot's index
	publish("t", 7)
	publish("u", 2)
	want := map[string]int64{"t": 12, "u": 5}
	for _, n := range []string{"t", "u"} {
		if got := messageCount(t, L, n); got != want[n] {
			t.Fatalf("the leader counts %d publishes to %s, want %d", got, n, want[n])
		}
	}
	after, ok, err := L.Entries(at+1, h.next, 1<<30)
	if err != nil || !ok || len(after) != int(h.next-1-at) {
		t.Fatalf("the entries after %d: %d of them, ok %v, err %v", at, len(after), ok, err)
	}

	// install imports a stream as a new member at the snapshot's index
	// and replays the entries after it, as Raft would.
	install := func(stream []byte) (*Broker, string) {
		t.Helper()
		dir := t.TempDir()
		nb := h.open(dir, &handReplica{kick: make(chan struct{}, 1)})
		if err := nb.ImportState(bytes.NewReader(stream), at, 1, nil); err != nil {
			nb.Close()
			t.Fatal(err)
		}
		if err := nb.PersistEntries(after); err != nil {
			t.Fatal(err)
		}
		if err := nb.ApplyCommitted(after); err != nil {
			t.Fatal(err)
		}
		return nb, dir
	}
	check := func(what string, b *Broker) {
		t.Helper()
		for _, n := range []string{"t", "u"} {
			if got := messageCount(t, b, n); got != want[n] {
				t.Fatalf("%s counts %d publishes to %s, want %d", what, got, n, want[n])
			}
		}
	}
	for _, from := range []struct {
		name string
		b    *Broker
	}{{"the leader", L}, {"the follower", h.follower}} {
		var snap bytes.Buffer
		if err := from.b.ExportStateAt(&snap, at); err != nil {
			t.Fatal(err)
		}
		nb, dir := install(snap.Bytes())
		check("a member from "+from.name+"'s snapshot", nb)
		// A crash: the counts come back from the index (the import's
		// checkpoint) and the log's tail.
		if err := nb.PersistHardState(ReplicaHardState{Term: 1, Vote: 1, Commit: h.next - 1}); err != nil {
			t.Fatal(err)
		}
		if err := nb.SyncLog(); err != nil {
			t.Fatal(err)
		}
		if err := nb.CloseForRebuild(); err != nil {
			t.Fatal(err)
		}
		nb = h.open(dir, &handReplica{kick: make(chan struct{}, 1)})
		check("a member from "+from.name+"'s snapshot, restarted", nb)
		if err := nb.Close(); err != nil {
			t.Fatal(err)
		}
	}

	// The live counts, as a member of an earlier version asks for them
	// (ExportState), count the entries after the index twice: what the
	// test above would see without ExportStateAt.
	var live bytes.Buffer
	if err := L.ExportState(&live); err != nil {
		t.Fatal(err)
	}
	nb, _ := install(live.Bytes())
	if got := messageCount(t, nb, "t"); got != 12+7 {
		t.Fatalf("from the live counts a member counts %d publishes to t, want 19 (7 twice)", got)
	}
	nb.Close()

	// Counts of another point than the snapshot's are refused, and so is
	// a point this log cannot give them for.
	var snap bytes.Buffer
	if err := L.ExportStateAt(&snap, at); err != nil {
		t.Fatal(err)
	}
	other := h.open(t.TempDir(), &handReplica{kick: make(chan struct{}, 1)})
	defer other.Close()
	if err := other.ImportState(&snap, at+1, 1, nil); err == nil || !strings.Contains(err.Error(), "counts as of entry") {
		t.Fatalf("a stream of counts as of another entry was imported: %v", err)
	}
	if err := L.ExportStateAt(&bytes.Buffer{}, h.next); err == nil {
		t.Fatal("an export as of an entry past the log's end succeeded")
	}
}

// An export as of an index keeps the entries after it in the log while it
// streams (pinAfter): it reads their publishes at its end, and a
// checkpoint meanwhile would forget them. Without the pin, such an export
// failed after streaming every message. An index whose entries are gone
// is refused before anything is streamed.
func TestReplicaExportPinsTheEntriesAfterItsIndex(t *testing.T) {
	h := leadingHandShard(t, 2)
	L := h.leader
	h.do(func() error { _, err := L.CreateTopic("t", DefaultTopicConfig()); return err })
	publish := func(n int) {
		for range n {
			h.do(func() error { _, err := L.Publish("t", PublishInput{Body: []byte("x")}); return err })
		}
	}
	publish(10)
	r := L.store.(*replStore)
	at := h.next - 8
	holds := func() bool {
		_, ok, err := L.Entries(at+1, at+2, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	unpin, err := r.pinAfter(at)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.checkpoint(); err != nil {
		t.Fatal(err)
	}
	if !holds() {
		t.Fatal("a checkpoint forgot an entry an export pinned")
	}
	unpin()
	publish(1)
	if err := r.checkpoint(); err != nil {
		t.Fatal(err)
	}
	if holds() {
		t.Fatal("the checkpoint kept the entry after the export unpinned it: the test does not test the pin")
	}
	var out bytes.Buffer
	if err := L.ExportStateAt(&out, at); err == nil || !strings.Contains(err.Error(), "does not hold") || out.Len() > 0 {
		t.Fatalf("an export as of an index whose entries are gone: %v, %d bytes streamed", err, out.Len())
	}
}

// leadingHandShard opens a hand-driven leader and follower (keeping keep
// entries after a checkpoint; 0: the default), the leader leading term 1;
// both close with the test.
func leadingHandShard(t *testing.T, keep int) *handShard {
	t.Helper()
	h := &handShard{t: t, rep: &handReplica{kick: make(chan struct{}, 1)}, clk: NewFakeClock(t0), next: 1, keep: keep}
	h.leader = h.open(t.TempDir(), h.rep)
	h.fdir = t.TempDir()
	h.follower = h.open(h.fdir, &handReplica{kick: make(chan struct{}, 1)})
	t.Cleanup(func() { h.leader.Close(); h.follower.Close() })
	if err := h.leader.SetLeader(true, 1); err != nil {
		t.Fatal(err)
	}
	return h
}
