package engine

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestPurge: a purge deletes the Active, Inactive and Delayed messages of
// its queue and no other's, their handles stop working, the queue goes on
// taking messages, and after a crash (no final checkpoint: the log is
// replayed) the purged messages stay gone (invariants 1, 2 and 4).
func TestPurge(t *testing.T) {
	dir := t.TempDir()
	clk := NewFakeClock(t0)
	b := openDurableTest(t, dir, clk, nil)
	cfg := DefaultQueueConfig()
	cfg.VisibilityTimeout = time.Minute
	q := mustQueue(t, b, "p", cfg)
	other := mustQueue(t, b, "other", cfg)
	for i := range 40 {
		if _, err := q.Send([]SendEntry{{Body: []byte{'m', byte(i)}, Priority: 1 + i%16}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.Send([]SendEntry{{Body: []byte("delayed"), Delay: time.Hour, HasDelay: true}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Send([]SendEntry{{Body: []byte("o1")}, {Body: []byte("o2")}}, nil); err != nil {
		t.Fatal(err)
	}
	got, err := q.Receive(context.Background(), ReceiveOptions{Max: 3, HasWait: true}, nil)
	if err != nil || len(got) != 3 {
		t.Fatal(err, len(got))
	}
	handle := got[0].Handle

	n, err := q.Purge()
	if err != nil || n != 41 {
		t.Fatalf("Purge: %d, %v; want 41", n, err)
	}
	checkInvariants(t, q)
	if info, _ := q.Attributes(); info.Active+info.Inactive+info.Delayed != 0 {
		t.Fatalf("after the purge: %+v", info)
	}
	if _, err := q.Receive(context.Background(), ReceiveOptions{Max: 16, HasWait: true}, nil); !errors.Is(err, ErrMessageNotExist) {
		t.Errorf("receive after the purge: %v", err)
	}
	errs := make([]error, 1)
	if _, err := q.Delete([]ReceiptHandle{handle}, errs); err != nil || !errors.Is(errs[0], ErrMessageNotExist) {
		t.Errorf("delete by a purged message's handle: %v, %v", err, errs[0])
	}
	if _, err := q.Send([]SendEntry{{Body: []byte("after")}}, nil); err != nil {
		t.Fatal(err)
	}
	if n, err := q.Purge(); n != 1 || err != nil {
		t.Fatalf("second purge: %d, %v", n, err)
	}
	if _, err := q.Send([]SendEntry{{Body: []byte("kept")}}, nil); err != nil {
		t.Fatal(err)
	}

	crashBroker(b)
	b = openDurableTest(t, dir, clk, nil)
	q, _ = b.Queue("p")
	other, _ = b.Queue("other")
	if info, _ := q.Attributes(); info.Active != 1 || info.Inactive+info.Delayed != 0 {
		t.Fatalf("after the crash: %+v, want the one message sent after the purges", info)
	}
	ms, err := q.Receive(context.Background(), ReceiveOptions{Max: 16, HasWait: true}, nil)
	if err != nil || len(ms) != 1 || string(ms[0].Body) != "kept" {
		t.Fatalf("receive after the crash: %v, %d", err, len(ms))
	}
	if info, _ := other.Attributes(); info.Active != 2 {
		t.Errorf("the other queue after the crash: %+v", info)
	}
	// The log folds into the index as deletes: a clean restart agrees.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openDurableTest(t, dir, clk, nil)
	q, _ = b.Queue("p")
	if info, _ := q.Attributes(); info.Active != 0 || info.Inactive != 1 {
		t.Errorf("after a clean restart: %+v", info)
	}
}

// TestPurgeLargeStripe: a stripe of more slots than a chunk is purged
// whole, a chunk at a time (invariant 5), and receives made between the
// chunks' lock holds see a consistent stripe.
func TestPurgeLargeStripe(t *testing.T) {
	b, _ := openTest(t, Options{Stripes: 1})
	q := mustQueue(t, b, "big", DefaultQueueConfig())
	const n = 3*purgeChunk + 100
	batch := make([]SendEntry, MaxBatch)
	for i := range batch {
		batch[i] = SendEntry{Body: []byte("x")}
	}
	for sent := 0; sent < n; sent += MaxBatch {
		if _, err := q.Send(batch[:min(MaxBatch, n-sent)], nil); err != nil {
			t.Fatal(err)
		}
	}
	got, err := q.Purge()
	if err != nil || got != n {
		t.Fatalf("Purge: %d, %v; want %d", got, err, n)
	}
	checkInvariants(t, q)
	if info, _ := q.Attributes(); info.Active != 0 {
		t.Errorf("after the purge: %+v", info)
	}
	if st := b.Stats(); len(st.Queues) != 1 || st.Queues[0].Deleted != n {
		t.Errorf("counters %+v, want %d deleted", st.Queues, n)
	}
}

// TestPurgeOfADeletedQueue: a purge of a queue deleted meanwhile answers
// as any operation on it does.
func TestPurgeOfADeletedQueue(t *testing.T) {
	b, _ := openTest(t, Options{})
	q := mustQueue(t, b, "gone", DefaultQueueConfig())
	if err := b.DeleteQueue("gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Purge(); !errors.Is(err, ErrQueueNotExist) {
		t.Errorf("Purge of a deleted queue: %v", err)
	}
}
