package engine

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// Fixes from the embedding audit (2026-12-06); each test failed before.

// Durations finer than a millisecond are taken in whole milliseconds, the
// precision the queue record stores: CreateQueue with the same config is
// still "the same attributes" after a restart (it answered
// ErrQueueAlreadyExist, failing a service's start-up on its first restart).
func TestQueueConfigInWholeMilliseconds(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultQueueConfig()
	cfg.VisibilityTimeout = 30*time.Second + 500*time.Microsecond
	cfg.PollingWait = 2*time.Second + time.Nanosecond
	b := openDurableTest(t, dir, NewFakeClock(t0), nil)
	if created, err := b.CreateQueue("q", cfg); !created || err != nil {
		t.Fatalf("create: %v %v", created, err)
	}
	b.Close()
	b = openDurableTest(t, dir, NewFakeClock(t0), nil)
	defer b.Close()
	if created, err := b.CreateQueue("q", cfg); created || err != nil {
		t.Fatalf("the same CreateQueue after a restart: created %v, %v", created, err)
	}
}

// ReceiveOne on an ended context takes nothing, as SendOne and DeleteOne
// do nothing (it took a message that context could then not delete).
func TestReceiveOneOnAnEndedContextTakesNothing(t *testing.T) {
	b, _ := openTest(t, Options{})
	q := mustQueue(t, b, "q", DefaultQueueConfig())
	sendBody(t, q, "m")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := q.ReceiveOne(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("ReceiveOne on an ended context: %v", err)
	}
	if info := attrs(t, q); info.Active != 1 || info.Inactive != 0 {
		t.Fatalf("the message: %+v, want still visible", info)
	}
}

// A MemSegmentBytes too large is refused by Open (it panicked allocating
// the first segment).
func TestOpenRefusesAHugeMemSegment(t *testing.T) {
	for _, n := range []int{1 << 62, maxMemSegmentBytes + 1} {
		if b, err := Open(Options{MemSegmentBytes: n, Logger: testLogger(t)}); err == nil {
			b.Close()
			t.Fatalf("MemSegmentBytes %d accepted", n)
		}
	}
}

// A MessageID and a ReceiptHandle round-trip through JSON as their text
// forms (a handle was "{}", an id 16 numbers), so an embedder can keep
// them in a job record.
func TestIDsAndHandlesAsText(t *testing.T) {
	b, _ := openTest(t, Options{})
	q := mustQueue(t, b, "q", DefaultQueueConfig())
	sendBody(t, q, "m")
	ms, err := q.Receive(context.Background(), ReceiveOptions{Max: 1, HasWait: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	type job struct {
		ID     MessageID
		Handle ReceiptHandle
	}
	in := job{ms[0].ID, ms[0].Handle}
	j, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"ID":"` + in.ID.String() + `","Handle":"` + in.Handle.String() + `"}`
	if string(j) != want {
		t.Fatalf("JSON %s, want %s", j, want)
	}
	var out job
	if err := json.Unmarshal(j, &out); err != nil || out != in {
		t.Fatalf("round trip: %+v %v, want %+v", out, err, in)
	}
	if err := q.DeleteOne(context.Background(), out.Handle); err != nil {
		t.Fatalf("the handle read back: %v", err)
	}
	// As versions before MarshalText wrote it: an array of 16 numbers.
	old, _ := json.Marshal([16]byte(in.ID))
	var back MessageID
	if err := json.Unmarshal(old, &back); err != nil || back != in.ID {
		t.Fatalf("an id in the earlier JSON form %s: %v, %v", old, back, err)
	}
	if _, err := ParseMessageID([]byte("not an id")); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a bad id: %v", err)
	}
}

// After Close, Queue answers ErrClosed (it returned the queue), and an
// in-memory broker lets its message bodies go even while the *Broker is
// kept (104 MB stayed reachable).
func TestClosedBrokerQueueAndBodies(t *testing.T) {
	b, err := Open(Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	q := mustQueue(t, b, "q", DefaultQueueConfig())
	sendBody(t, q, "m")
	b.Close()
	if _, err := b.Queue("q"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Queue after Close: %v", err)
	}
	m := b.store.(*memStore)
	m.mu.Lock()
	n := len(m.segs)
	m.mu.Unlock()
	if n != 0 || len(*m.snap.Load()) != 0 {
		t.Fatalf("a closed in-memory broker keeps %d segments", n)
	}
}

// While moves are held (Options.MovesHeld, a cluster backup), a message
// due for its dead-letter queue is hidden for heldHide, not for its
// queue's whole visibility timeout (review: an hour here, up to 12 h), and
// is moved once the hold ends.
func TestHeldMoveWaitsOnlyHeldHide(t *testing.T) {
	var held atomic.Bool
	b, clk := openTest(t, Options{MovesHeld: held.Load})
	mustQueue(t, b, "dlq", DefaultQueueConfig())
	cfg := DefaultQueueConfig()
	cfg.VisibilityTimeout = time.Hour
	cfg.DeadLetterQueue, cfg.MaxReceiveCount = "dlq", 1
	q := mustQueue(t, b, "src", cfg)
	sendBody(t, q, "poison")
	ms, err := q.Receive(context.Background(), ReceiveOptions{Max: 1, HasWait: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := q.ChangeVisibility(ms[0].Handle, time.Second); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	held.Store(true)
	if ms, err := q.Receive(context.Background(), ReceiveOptions{Max: 1, HasWait: true}, nil); len(ms) != 0 || !errors.Is(err, ErrMessageNotExist) {
		t.Fatalf("a receive while moves are held: %d messages, %v", len(ms), err)
	}
	dlq, _ := b.Queue("dlq")
	if info := attrs(t, dlq); info.Active != 0 {
		t.Fatalf("moved while held: %+v", info)
	}
	held.Store(false)
	clk.Advance(heldHide)
	q.Receive(context.Background(), ReceiveOptions{Max: 1, HasWait: true}, nil)
	if info := attrs(t, dlq); info.Active != 1 {
		t.Fatalf("%v after the hold ended, the dead-letter queue holds %+v, want the message", heldHide, info)
	}
}
