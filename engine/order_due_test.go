package engine

// archeng audit: "Within a stripe the order is priority, then the order in
// which messages became Active" (docs/architecture.md, "Priority lanes and
// receive"), with a stripe timer that fires late. time.AfterFunc promises
// only "at least d": on a loaded machine (GC, two busy cores) the stripe's
// timer runs after the delay or visibility end it was set for. A send in
// that window must not overtake the message whose delay or visibility
// ended before it was sent: the receive after both gets the earlier one
// first. The clock below is a fake whose timers fire only when the test
// says (a late timer); nothing is timed.

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// lateClock is a settable clock whose timers never fire by themselves.
type lateClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *lateClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *lateClock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func (c *lateClock) AfterFunc(time.Duration, func()) Timer { return lateTimer{} }

type lateTimer struct{}

func (lateTimer) Stop() bool               { return true }
func (lateTimer) Reset(time.Duration) bool { return true }

// lateBroker opens an in-memory broker of stripes on a lateClock, closed
// with the test.
func lateBroker(t *testing.T, stripes int) (*lateClock, *Broker) {
	t.Helper()
	clk := &lateClock{now: t0}
	b, err := Open(Options{Clock: clk, Stripes: stripes, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return clk, b
}

func TestSendDoesNotOvertakeAMessageVisibleBeforeIt(t *testing.T) {
	for _, kind := range []string{"delay", "visibility", "publish", "dead-letter"} {
		t.Run(kind, func(t *testing.T) {
			clk, b := lateBroker(t, 1)
			cfg := DefaultQueueConfig()
			cfg.VisibilityTimeout = time.Second
			q := mustQueue(t, b, "order", cfg)
			ctx := context.Background()
			var src *Queue
			switch kind {
			case "publish":
				if _, err := b.CreateTopic("t", DefaultTopicConfig()); err != nil {
					t.Fatal(err)
				}
				if _, err := b.Subscribe("t", "s", SubscriptionConfig{Endpoint: "acs:mns:cn-hangzhou:1:queues/order", Format: FormatSimplified}); err != nil {
					t.Fatal(err)
				}
			case "dead-letter":
				scfg := cfg
				scfg.DeadLetterQueue, scfg.MaxReceiveCount = "order", 1
				src = mustQueue(t, b, "src", scfg)
				if _, err := src.Send([]SendEntry{{Body: []byte("second")}}, nil); err != nil {
					t.Fatal(err)
				}
				if got, err := src.Receive(ctx, ReceiveOptions{Max: 1, HasWait: true}, nil); err != nil || len(got) != 1 {
					t.Fatal(err, len(got))
				}
			}
			first := SendEntry{Body: []byte("first")}
			if kind != "visibility" {
				first.Delay, first.HasDelay = time.Second, true
			}
			if _, err := q.Send([]SendEntry{first}, nil); err != nil {
				t.Fatal(err)
			}
			if kind == "visibility" {
				got, err := q.Receive(ctx, ReceiveOptions{Max: 1, HasWait: true}, nil)
				if err != nil || len(got) != 1 {
					t.Fatal(err, len(got))
				}
			}
			// "first" becomes visible at t0+1s; "second" is sent at
			// t0+1.5s, while the stripe's timer has not run yet.
			clk.add(1500 * time.Millisecond)
			switch kind {
			case "publish":
				if _, err := b.Publish("t", PublishInput{Body: []byte("second")}); err != nil {
					t.Fatal(err)
				}
			case "dead-letter":
				// src's message, received once, is moved to "order" by
				// this receive (its visibility ended with first's delay).
				if got, err := src.Receive(ctx, ReceiveOptions{Max: 1, HasWait: true}, nil); !errors.Is(err, ErrMessageNotExist) || len(got) != 0 {
					t.Fatal(err, len(got))
				}
			default:
				if _, err := q.Send([]SendEntry{{Body: []byte("second")}}, nil); err != nil {
					t.Fatal(err)
				}
			}
			got, err := q.Receive(ctx, ReceiveOptions{Max: 2, HasWait: true}, nil)
			if err != nil || len(got) != 2 {
				t.Fatal(err, len(got))
			}
			if string(got[0].Body) != "first" || string(got[1].Body) != "second" {
				t.Fatalf("received %q then %q: the message sent at t0+1.5s came before the one visible since t0+1s", got[0].Body, got[1].Body)
			}
		})
	}
}

// Peek and Attributes see the state at now exactly (stripe.catchUp), with a
// stripe timer that has not fired.
func TestPeekAndCountsWithALateTimer(t *testing.T) {
	clk, b := lateBroker(t, 2)
	cfg := DefaultQueueConfig()
	cfg.Retention = time.Minute
	q := mustQueue(t, b, "late", cfg)
	if _, err := q.Send([]SendEntry{{Body: []byte("d"), Delay: time.Second, HasDelay: true}, {Body: []byte("x")}}, nil); err != nil {
		t.Fatal(err)
	}
	clk.add(time.Second)
	if info, _ := q.Attributes(); info.Active != 2 || info.Delayed != 0 {
		t.Fatalf("at the delay's end: %+v", info)
	}
	if got, err := q.Peek(MaxBatch, nil); err != nil || len(got) != 2 {
		t.Fatal(err, len(got))
	}
	clk.add(time.Minute) // both past their retention
	if info, _ := q.Attributes(); info.Active != 0 || info.Delayed != 0 {
		t.Fatalf("past retention: %+v", info)
	}
	if _, err := q.Peek(MaxBatch, nil); !errors.Is(err, ErrMessageNotExist) {
		t.Fatal("peek past retention:", err)
	}
}

// A delayed send's handle works until the millisecond its delay ends, and
// not at it, with or without the stripe's timer having fired.
func TestDelayedHandleBoundary(t *testing.T) {
	clk := &lateClock{now: t0}
	b, err := Open(Options{Clock: clk, Stripes: 1, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	q := mustQueue(t, b, "edge", DefaultQueueConfig())
	res, err := q.Send([]SendEntry{{Body: []byte("a"), Delay: time.Second, HasDelay: true}, {Body: []byte("b"), Delay: time.Second, HasDelay: true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	clk.add(999 * time.Millisecond)
	nh, _, err := q.ChangeVisibility(res[0].Handle, time.Second)
	if err != nil {
		t.Fatal("1 ms before the delay's end:", err)
	}
	if _, _, err := q.ChangeVisibility(res[0].Handle, time.Second); !errors.Is(err, ErrMessageNotExist) {
		t.Fatal("the replaced handle:", err)
	}
	clk.add(time.Millisecond)
	errs := make([]error, 1)
	if _, err := q.Delete([]ReceiptHandle{res[1].Handle}, errs); err != nil || !errors.Is(errs[0], ErrMessageNotExist) {
		t.Fatal("at the delay's end:", err, errs[0])
	}
	clk.add(998 * time.Millisecond) // a's moved end is t0+1999ms
	if _, err := q.Delete([]ReceiptHandle{nh}, errs); err != nil || errs[0] != nil {
		t.Fatal("the new handle 1 ms before its end:", err, errs[0])
	}
	got, err := q.Receive(context.Background(), ReceiveOptions{Max: MaxBatch, HasWait: true}, nil)
	if err != nil || len(got) != 1 || string(got[0].Body) != "b" {
		t.Fatal(err, len(got))
	}
}
