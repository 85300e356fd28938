package engine

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// gatedRouter is twoBrokers whose Move waits for gate before storing.
type gatedRouter struct {
	twoBrokers
	entered chan struct{}
	gate    chan struct{}
}

func (r *gatedRouter) Move(ctx context.Context, target string, ms []MovedMessage) error {
	close(r.entered)
	<-r.gate
	return r.twoBrokers.Move(ctx, target, ms)
}

// A move that began before a hold (Options.MovesHeld) is counted in
// MovesBusy until it ends, so that engine/cluster can wait for it before a
// backup reads anything (review: a move to another broker that started
// just before the hold stored into a queue the backup had read and deleted
// from one it read next: the message was in neither). A move that would
// begin during the hold does not.
func TestMovesBusyCountsAMoveInFlight(t *testing.T) {
	clk := NewFakeClock(t0)
	far, err := Open(Options{Clock: clk, Logger: testLogger(t), Stripes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer far.Close()
	router := &gatedRouter{twoBrokers: twoBrokers{target: far}, entered: make(chan struct{}), gate: make(chan struct{})}
	var held atomic.Bool
	b, err := Open(Options{Clock: clk, Logger: testLogger(t), Stripes: 1, DeadLetterRouter: router, MovesHeld: held.Load})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	mustQueue(t, far, "far-dlq", DefaultQueueConfig())
	src := mustQueue(t, b, "src", dlqConfig("far-dlq", 1))
	if _, err := src.Send([]SendEntry{{Body: []byte("x")}}, nil); err != nil {
		t.Fatal(err)
	}
	if len(receiveBatch(t, src)) != 1 {
		t.Fatal("first receive")
	}
	clk.Advance(11 * time.Second)
	done := make(chan error, 1)
	go func() { // due for far-dlq: the move starts
		_, err := src.Receive(context.Background(), ReceiveOptions{Max: MaxBatch, HasWait: true}, nil)
		done <- err
	}()
	select {
	case <-router.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the move never began")
	}
	held.Store(true) // a backup's hold from here on
	if n := b.MovesBusy(); n != 1 {
		t.Fatalf("a move in flight when the hold began: MovesBusy %d, want 1", n)
	}
	if b.beginMove() {
		t.Fatal("a move began while moves are held")
	}
	close(router.gate)
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, ErrMessageNotExist) {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the move never ended")
	}
	if n := b.MovesBusy(); n != 0 {
		t.Fatalf("after the move: MovesBusy %d", n)
	}
}
