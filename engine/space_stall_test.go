package engine

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/smqd/smqd/wal"
)

// While the log waits for a segment file it cannot make, a queue change
// (CreateQueue, DeleteQueue) and a send are refused before anything is
// appended, so what the caller was told still holds after a restart. The
// embedding audit (2026-12-06) found each appended anyway and written once
// the log recovered: a DeleteQueue answered ErrStorageUnavailable took
// effect at the next start, with the messages acknowledged to the queue
// since; a retried CreateQueue left its name listed once per attempt; a
// refused send was there after the restart.
func TestStalledLogRefusesQueueChangesAndSendsBeforeLogging(t *testing.T) {
	dir := t.TempDir()
	ffs := wal.NewFaultFS(wal.OSFS())
	tweak := func(o *Options) {
		o.WAL.FS = ffs
		o.WAL.SegmentBytes = 64 << 10
		o.WAL.BufferBytes = 64 << 10
		o.WAL.RecycleSegments = -1
	}
	b := openDurableTest(t, dir, NewFakeClock(t0), tweak)
	filler := mustQueue(t, b, "filler", DefaultQueueConfig())
	orders := mustQueue(t, b, "orders", DefaultQueueConfig())
	stallLog(t, b, ffs, filler)
	if _, err := b.CreateQueue("new", DefaultQueueConfig()); !errors.Is(err, ErrStorageUnavailable) {
		t.Fatalf("CreateQueue while the log is stalled: %v", err)
	}
	if err := b.DeleteQueue("orders"); !errors.Is(err, ErrStorageUnavailable) {
		t.Fatalf("DeleteQueue while the log is stalled: %v", err)
	}
	if _, err := orders.Send([]SendEntry{{Body: []byte("refused")}}, nil); !errors.Is(err, ErrStorageUnavailable) {
		t.Fatalf("a send while the log is stalled: %v", err)
	}
	ffs.Disarm()
	deadline := time.Now().Add(30 * time.Second) // the spare goroutine retries with backoff
	for b.store.stalled() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("still stalled after the cause is gone: %v", b.store.stalled())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if created, err := b.CreateQueue("new", DefaultQueueConfig()); !created || err != nil {
		t.Fatalf("the retried CreateQueue: %v %v", created, err)
	}
	var want []string
	for i := range 5 {
		want = append(want, "kept-"+string(rune('0'+i)))
		sendBody(t, orders, want[i])
	}
	b.Close()

	b = openDurableTest(t, dir, NewFakeClock(t0), tweak)
	defer b.Close()
	names, _, err := b.ListQueues("", "", 0)
	if err != nil || !slices.Equal(names, []string{"filler", "new", "orders"}) {
		t.Fatalf("queues after the restart: %v %v", names, err)
	}
	q, err := b.Queue("orders")
	if err != nil {
		t.Fatalf("orders after the restart: %v (5 acknowledged messages)", err)
	}
	ms, err := q.Receive(context.Background(), ReceiveOptions{Max: 16, HasWait: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, string(m.Body))
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("orders after the restart holds %q, want %q", got, want)
	}
}

// While the log is stalled, a purge is refused before it changes anything,
// and a queue or topic change is refused before it takes Broker.adminMu: the one change whose record met the stall waits
// under that lock until the stall clears (adminRecord), and every other
// queued behind it, hanging for as long as the disk stayed full (review).
// The test holds the lock as that change would; the changes must answer
// without it (the 10 s bound only keeps a broken build from hanging).
func TestStalledLogRefusesAdminChangesWithoutWaitingForTheLock(t *testing.T) {
	b, ffs := openSpareFaultBroker(t)
	defer b.Close()
	q := mustQueue(t, b, "q", DefaultQueueConfig())
	if _, err := b.CreateTopic("t", DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	stallLog(t, b, ffs, q)
	before := attrs(t, q)
	if _, err := q.Purge(); !errors.Is(err, ErrStorageUnavailable) {
		t.Fatalf("a purge while the log is stalled: %v", err)
	}
	if after := attrs(t, q); after.Active != before.Active {
		t.Fatalf("a refused purge removed messages: %d -> %d", before.Active, after.Active)
	}
	b.adminMu.Lock()
	errc := make(chan error, 4)
	go func() {
		errc <- b.DeleteQueue("q")
		errc <- b.SetQueueAttributes("q", ConfigPatch{})
		errc <- b.DeleteTopic("t")
		_, err := b.Subscribe("t", "s", SubscriptionConfig{Endpoint: qEndpoint("q")})
		errc <- err
	}()
	for i := range 4 {
		select {
		case err := <-errc:
			if !errors.Is(err, ErrStorageUnavailable) {
				t.Errorf("change %d while the log is stalled: %v", i, err)
			}
		case <-time.After(10 * time.Second):
			b.adminMu.Unlock()
			t.Fatalf("change %d waited for the admin lock while the log is stalled", i)
		}
	}
	b.adminMu.Unlock()
	ffs.Disarm()
}
