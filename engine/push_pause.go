package engine

// What a push worker does besides pushing: starting more workers while a
// backlog waits, pausing after slow failures, and giving back what it took
// and did not try.

import (
	"context"
	"time"
)

// pushPauseMax bounds a worker's pause after slow failures.
const pushPauseMax = time.Minute

// pauseAfterSlowFailure counts a slow failure of the subscription and
// returns how long the worker pauses: the push timeout, doubling with each
// slow failure since the last delivery, at most pushPauseMax. A hanging
// path holds its endpoint's slots for the timeout each; paused, its
// workers leave most of them to the endpoint's other subscriptions (one
// hanging path cut a healthy one's rate behind the same gateway 20 times:
// push audit, 2026-12-06). The retries keep their schedule's times as
// visibility; a paused worker only takes them later.
func (ps *pushSub) pauseAfterSlowFailure() time.Duration {
	k := min(ps.slow.Add(1), 7)
	return min(pushPauseMax, ps.p.opts.Timeout<<(k-1))
}

// sleep waits d on the broker's clock; false if ctx ended first.
func (ps *pushSub) sleep(ctx context.Context, d time.Duration) bool {
	fired := make(chan struct{})
	t := ps.p.b.clock.AfterFunc(d, func() { close(fired) })
	defer t.Stop()
	select {
	case <-fired:
		return true
	case <-ctx.Done():
		return false
	}
}

// giveBack returns the notifications of ms that still hold their lease,
// never tried, to the push queue (Queue.giveBack).
func (ps *pushSub) giveBack(ms []Message) {
	for i := range ms {
		if ms[i].Handle.IsZero() {
			continue
		}
		if err := ps.q.giveBack(ms[i].Handle); err != nil {
			ps.p.b.log.Debug("an untried notification stays leased; it comes back after its lease", "err", err)
		}
	}
}

// grow starts one more worker while ps has fewer than its workers and ctx
// has not ended. A subscription starts with one; a worker that took a
// full batch (more may wait) starts another, and one started so leaves
// once a poll finds nothing. 2,000 idle HTTP subscriptions were 32,000
// goroutines parked in long polls: 409 MB and 13.6 % of a CPU at rest
// (push audit, 2026-12-06).
func (ps *pushSub) grow(ctx context.Context) {
	for {
		n := ps.running.Load()
		if n >= ps.workers || ctx.Err() != nil {
			return
		}
		if ps.running.CompareAndSwap(n, n+1) {
			ps.p.wg.Add(1) // a running worker holds the group: never at zero here
			ps.p.live.Add(1)
			go ps.work(ctx, false)
			return
		}
	}
}
