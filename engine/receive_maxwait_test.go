package engine

import (
	"context"
	"errors"
	"testing"
	"time"
)

// ReceiveOptions.MaxWait caps the effective wait, whether it is the
// receive's own or the queue's PollingWaitSeconds: the poll's timer is
// armed for MaxWait, and the poll ends, empty, once that passed (a clock
// advanced by hand; nothing timed). Without the cap the timer is armed
// for the full 30 s and the poll still waits at 29.5 s.
func TestReceiveMaxWaitCapsTheWait(t *testing.T) {
	const capped = 29500 * time.Millisecond
	for _, own := range []bool{true, false} {
		clk := newStepClock(t0)
		b := openStep(t, "", clk)
		cfg := DefaultQueueConfig()
		cfg.PollingWait = MaxPollingWait
		q := mustQueue(t, b, "q", cfg)
		opt := ReceiveOptions{MaxWait: capped}
		if own {
			opt.Wait, opt.HasWait = MaxPollingWait, true
		}
		done := make(chan error, 1)
		go func() {
			_, err := q.Receive(context.Background(), opt, nil)
			done <- err
		}()
		for i := 0; i < 400 && q.waiters.waiting() == 0; i++ {
			time.Sleep(5 * time.Millisecond)
		}
		armed := false
		for _, d := range clk.Pending() {
			armed = armed || d == capped
			if d > capped && d <= MaxPollingWait {
				t.Fatalf("own wait %v: a timer armed for %v, over MaxWait %v (pending %v)", own, d, capped, clk.Pending())
			}
		}
		if !armed {
			t.Fatalf("own wait %v: no timer armed for %v (pending %v)", own, capped, clk.Pending())
		}
		clk.Advance(capped)
		select {
		case err := <-done:
			if !errors.Is(err, ErrMessageNotExist) {
				t.Fatalf("own wait %v: %v, want ErrMessageNotExist", own, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("own wait %v: the poll still waits %v after it began, with MaxWait %v", own, capped, capped)
		}
		b.Close()
	}
}
