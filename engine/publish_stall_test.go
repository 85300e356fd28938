package engine

// Review W of the large append (wal invariant 12, 2026-12-07): a large
// publish that meets a roll stall (no spare segment file) half way. Append
// returns the retryable stall error with a prefix of the group in the log
// (written once the stall ends); the broker goes on. The prefix must never
// be delivered: not live, not by a checkpoint, not after a restart.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smqd/smqd/wal"
)

func TestPublishStallHalfWay(t *testing.T) {
	const subs = 40
	clk := NewFakeClock(t0)
	dir := t.TempDir()
	ffs := wal.NewFaultFS(wal.OSFS())
	ffs.Filter = func(name string) bool { return strings.HasSuffix(name, ".spare") }
	open := func() *Broker {
		return openPubDurable(t, dir, clk, largeLog, func(o *Options) { o.WAL.FS, o.FreeSpaceReserve = ffs, -1 })
	}
	b := open()
	if _, err := b.CreateTopic("big", DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	for i := range subs {
		name := fmt.Sprintf("bq%d", i)
		mustQueue(t, b, name, DefaultQueueConfig())
		if _, err := b.Subscribe("big", name, SubscriptionConfig{Endpoint: qEndpoint(name), Format: FormatSimplified}); err != nil {
			t.Fatal(err)
		}
	}
	other := mustQueue(t, b, "other", DefaultQueueConfig())
	body := make([]byte, MaxMessageBytes)
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := range body {
		body[i] = byte('a' + rnd.IntN(26))
	}
	// The spare made before this is used by the first roll; the next roll
	// has none: the writer stalls half way through the 2.6 MiB group.
	ffs.FailPreallocate(syscall.ENOSPC)
	_, err := b.Publish("big", PublishInput{Body: body})
	if !errors.Is(err, ErrStorageUnavailable) {
		t.Fatalf("publish across a stalled roll: %v", err)
	}
	t.Logf("publish: %v", err)
	ffs.Disarm()
	deadline := time.Now().Add(30 * time.Second)
	for b.Health() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("still unhealthy: %v", b.Health())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := other.Send([]SendEntry{{Body: []byte("after")}}, nil); err != nil {
		t.Fatal(err)
	}
	count := func(b *Broker, what string) {
		t.Helper()
		for i := range subs {
			q, err := b.Queue(fmt.Sprintf("bq%d", i))
			if err != nil {
				t.Fatal(err)
			}
			info, err := q.Attributes()
			if err != nil {
				t.Fatal(err)
			}
			if n := info.Active + info.Inactive + info.Delayed; n != 0 {
				t.Fatalf("%s: bq%d holds %d messages of a failed publish", what, i, n)
			}
		}
		q, _ := b.Queue("other")
		if info, _ := q.Attributes(); info.Active != 1 {
			t.Fatalf("%s: other holds %d", what, info.Active)
		}
	}
	count(b, "live")
	if err := durableOf(b).checkpoint(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = open()
	defer b.Close()
	count(b, "after the checkpoint and a restart")
	t.Logf("recovery: %+v", b.Recovery())
}
