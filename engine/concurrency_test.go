package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestConcurrentExactlyOnce: producers and consumers on several queues, with
// a visibility timeout no run reaches. Every sent message must be received
// and deleted exactly once, and no receipt handle may work twice.
func TestConcurrentExactlyOnce(t *testing.T) {
	const (
		queues    = 3
		producers = 4 // per queue
		consumers = 4 // per queue
		perProd   = 2000
	)
	b, err := Open(Options{Stripes: 4, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cfg := DefaultQueueConfig()
	cfg.VisibilityTimeout = MaxVisibilityTimeout
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var seen sync.Map // body -> times deleted
	var sentTotal, doneTotal atomic.Int64
	var wg sync.WaitGroup
	for qi := 0; qi < queues; qi++ {
		name := fmt.Sprintf("cq%d", qi)
		q := mustQueue(t, b, name, cfg)
		for p := 0; p < producers; p++ {
			wg.Add(1)
			go func(p int) {
				defer wg.Done()
				var out []SendResult
				for i := 0; i < perProd; {
					n := 1 + (i % MaxBatch)
					if i+n > perProd {
						n = perProd - i
					}
					entries := make([]SendEntry, n)
					for k := range entries {
						entries[k] = SendEntry{Body: []byte(fmt.Sprintf("%s/%d/%d", name, p, i+k)), Priority: 1 + (i+k)%16}
					}
					var err error
					if out, err = q.Send(entries, out[:0]); err != nil {
						t.Error(err)
						return
					}
					sentTotal.Add(int64(n))
					i += n
				}
			}(p)
		}
		for c := 0; c < consumers; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var msgs []Message
				errs := make([]error, MaxBatch)
				want := int64(queues * producers * perProd)
				for doneTotal.Load() < want && ctx.Err() == nil {
					var err error
					msgs, err = q.Receive(ctx, ReceiveOptions{Max: 1 + c*5, Wait: 200 * time.Millisecond, HasWait: true}, msgs[:0])
					if errors.Is(err, ErrMessageNotExist) || errors.Is(err, context.DeadlineExceeded) {
						continue
					}
					if err != nil {
						t.Error(err)
						return
					}
					hs := make([]ReceiptHandle, len(msgs))
					for i := range msgs {
						hs[i] = msgs[i].Handle
					}
					if failed, err := q.Delete(hs, errs); err != nil || failed != 0 {
						t.Errorf("delete: %d %v %v", failed, err, errs[:len(hs)])
						return
					}
					if failed, _ := q.Delete(hs, errs); failed != len(hs) {
						t.Errorf("handles worked twice: %d of %d failed", failed, len(hs))
						return
					}
					for i := range msgs {
						v, _ := seen.LoadOrStore(string(msgs[i].Body), new(atomic.Int32))
						if v.(*atomic.Int32).Add(1) != 1 {
							t.Errorf("message %s delivered twice", msgs[i].Body)
						}
					}
					doneTotal.Add(int64(len(msgs)))
				}
			}()
		}
	}
	wg.Wait()
	if want := int64(queues * producers * perProd); sentTotal.Load() != want || doneTotal.Load() != want {
		t.Fatalf("sent %d, done %d, want %d", sentTotal.Load(), doneTotal.Load(), want)
	}
	for qi := 0; qi < queues; qi++ {
		q, _ := b.Queue(fmt.Sprintf("cq%d", qi))
		info, _ := q.Attributes()
		if info.Active+info.Inactive+info.Delayed != 0 {
			t.Fatalf("queue %d not empty: %+v", qi, info)
		}
		checkInvariants(t, q)
	}
}

// TestDeleteQueueEndsLongPolls: a queue deletion answers waiting receives
// with ErrQueueNotExist at once.
func TestDeleteQueueEndsLongPolls(t *testing.T) {
	b, _ := openTest(t, Options{})
	q := mustQueue(t, b, "q", DefaultQueueConfig())
	errc := make(chan error, 10)
	for i := 0; i < 10; i++ {
		go func() {
			_, err := q.Receive(context.Background(), ReceiveOptions{Wait: 30 * time.Second, HasWait: true}, nil)
			errc <- err
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for q.waiters.waiting() < 10 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if err := b.DeleteQueue("q"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		select {
		case err := <-errc:
			if !errors.Is(err, ErrQueueNotExist) {
				t.Fatalf("waiter got %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("waiter not released")
		}
	}
}

// TestLongPollTimeoutAndCancel uses the fake clock for the timeout and a
// context for cancellation.
func TestLongPollTimeoutAndCancel(t *testing.T) {
	b, clk := openTest(t, Options{})
	q := mustQueue(t, b, "q", DefaultQueueConfig())
	errc := make(chan error, 1)
	go func() {
		_, err := q.Receive(context.Background(), ReceiveOptions{Wait: 2 * time.Second, HasWait: true}, nil)
		errc <- err
	}()
	waitFor(t, func() bool { return q.waiters.waiting() == 1 })
	clk.Advance(1999 * time.Millisecond)
	select {
	case err := <-errc:
		t.Fatalf("returned before the wait ended: %v", err)
	default:
	}
	clk.Advance(time.Millisecond)
	if err := <-errc; !errors.Is(err, ErrMessageNotExist) {
		t.Fatalf("timeout: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, err := q.Receive(ctx, ReceiveOptions{Wait: 30 * time.Second, HasWait: true}, nil)
		errc <- err
	}()
	waitFor(t, func() bool { return q.waiters.waiting() == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancel: %v", err)
	}
	if q.waiters.waiting() != 0 || b.longPolls.Load() != 0 {
		t.Fatalf("waiter leaked: %d %d", q.waiters.waiting(), b.longPolls.Load())
	}
}

// TestLongPollWokenByDelayAndVisibilityEnd: a waiter wakes when a delayed
// message becomes Active and when a visibility timeout ends.
func TestLongPollWokenByDelayAndVisibilityEnd(t *testing.T) {
	b, clk := openTest(t, Options{})
	cfg := DefaultQueueConfig()
	cfg.VisibilityTimeout = 5 * time.Second
	q := mustQueue(t, b, "q", cfg)
	q.Send([]SendEntry{{Body: []byte("d"), Delay: 3 * time.Second, HasDelay: true}}, nil)
	got := make(chan []Message, 1)
	recv := func() {
		m, err := q.Receive(context.Background(), ReceiveOptions{Wait: 30 * time.Second, HasWait: true}, nil)
		if err != nil {
			t.Error(err)
		}
		got <- m
	}
	go recv()
	waitFor(t, func() bool { return q.waiters.waiting() == 1 })
	clk.Advance(3 * time.Second)
	m := <-got
	if string(m[0].Body) != "d" {
		t.Fatalf("%q", m[0].Body)
	}
	go recv()
	waitFor(t, func() bool { return q.waiters.waiting() == 1 })
	clk.Advance(5 * time.Second)
	if m := <-got; m[0].DequeueCount != 2 {
		t.Fatalf("dequeue count %d", m[0].DequeueCount)
	}
}

func TestTooManyLongPolls(t *testing.T) {
	b, _ := openTest(t, Options{MaxLongPolls: 2})
	q := mustQueue(t, b, "q", DefaultQueueConfig())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := 0; i < 2; i++ {
		go q.Receive(ctx, ReceiveOptions{Wait: 30 * time.Second, HasWait: true}, nil)
	}
	waitFor(t, func() bool { return q.waiters.waiting() == 2 })
	if _, err := q.Receive(ctx, ReceiveOptions{Wait: 30 * time.Second, HasWait: true}, nil); !errors.Is(err, ErrTooManyLongPolls) {
		t.Fatalf("got %v", err)
	}
	// A short poll is never refused.
	if _, err := q.Receive(ctx, ReceiveOptions{HasWait: true}, nil); !errors.Is(err, ErrMessageNotExist) {
		t.Fatalf("short poll: %v", err)
	}
}

// waitFor polls cond until it holds or 5 s pass.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 5s")
		}
		time.Sleep(time.Millisecond)
	}
}
