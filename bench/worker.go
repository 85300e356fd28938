package bench

// Producer and consumer loops. Each worker owns its client, its histograms
// and its window counters; the live counters are atomics read by the
// progress reporter. Only events that complete inside the measured window
// [from, to) count in the window figures and histograms.

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// window is the measured interval in Unix nanoseconds.
type window struct{ from, to int64 }

func (w window) in(t int64) bool { return t >= w.from && t < w.to }

// worker is one producer or consumer.
type worker struct {
	id  int
	c   Client
	rng *rand.Rand

	hSend, hRecv, hDel, hE2E Histogram // window only

	// live totals (whole run), for progress
	sent, deleted, errs atomic.Int64

	// window counters, owned by the worker
	wSent, wRecv, wDel, wErr, wEmpty, wReq int64
	// whole-phase counters
	tSent, tDel, tRecv int64
	firstSend          int64 // Unix ns of the first completed send of the phase
	lastSend, lastDel  int64 // Unix ns of the last completed send / delete
	errSample          string

	bodies [16][]byte
	out    [16]Outgoing
	stamps []int64
}

func newWorker(id int, c Client, cfg *Config) *worker {
	w := &worker{id: id, c: c, rng: rand.New(rand.NewPCG(cfg.Seed, uint64(id)+1))}
	for i := range w.bodies {
		w.bodies[i] = newBody(cfg.BodyBytes, cfg.Seed*1000003+uint64(id*16+i))
	}
	w.stamps = make([]int64, 0, 16)
	return w
}

// resetPhase clears the per-phase counters (not the window histograms).
func (w *worker) resetPhase() {
	w.tSent, w.tDel, w.tRecv, w.firstSend, w.lastSend, w.lastDel = 0, 0, 0, 0, 0, 0
}

func (w *worker) fail(err error, now int64, win window) {
	w.errs.Add(1)
	if win.in(now) {
		w.wErr++
	}
	if w.errSample == "" {
		w.errSample = err.Error()
	}
}

func pick(r *rand.Rand, mix []Weight) int {
	total := 0
	for _, m := range mix {
		total += m.Weight
	}
	if total == 0 {
		return 0
	}
	x := r.IntN(total)
	for _, m := range mix {
		if x < m.Weight {
			return m.Value
		}
		x -= m.Weight
	}
	return 0
}

// quota hands out message allowances against a cap (unlimited when nil).
type quota struct{ left atomic.Int64 }

// take returns how many of n may be sent (0: the cap is reached).
func (q *quota) take(n int) int {
	if q == nil {
		return n
	}
	left := q.left.Add(-int64(n))
	if left >= 0 {
		return n
	}
	if got := int64(n) + left; got > 0 {
		return int(got)
	}
	return 0
}

// flow holds producers back while more than limit messages are sent and
// not yet deleted (nil: no limit). A message sent counts perSent times (a
// publish is delivered to every subscription; 0 means 1).
type flow struct {
	limit       int64
	perSent     int64
	outstanding atomic.Int64
}

// wait blocks while the limit is exceeded, until stop (Unix ns).
func (f *flow) wait(ctx context.Context, stop int64) {
	if f == nil {
		return
	}
	for f.outstanding.Load() > f.limit && ctx.Err() == nil && time.Now().UnixNano() < stop {
		time.Sleep(50 * time.Microsecond)
	}
}

func (f *flow) add(n int64) {
	if f != nil {
		f.outstanding.Add(n)
	}
}

// addSent counts n messages sent.
func (f *flow) addSent(n int64) {
	if f != nil {
		f.outstanding.Add(n * max(f.perSent, 1))
	}
}

// errLate: an open-loop batch scheduled in the window and not sent within
// lateGrace after it.
var errLate = errors.New("bench: a batch scheduled in the window was not sent within the grace after it")

// lateGrace is how long an open-loop producer goes on sending, after the
// window, the batches scheduled in it that it could not send in time.
const lateGrace = 10 * time.Second

// produce sends batches until stop (Unix ns), ctx ends, or q runs out.
// With rate > 0 (messages per second for this producer) it follows a fixed
// schedule from start and measures from each batch's scheduled time:
// every batch scheduled in the window is sent and its latency recorded,
// however late (a stall at the window's end hid every batch it delayed:
// coordinated omission); one still unsent lateGrace after the window
// counts as an error with the latency it had then.
func (w *worker) produce(ctx context.Context, cfg *Config, q *quota, fl *flow, late *lateTrack, start, stop int64, rate float64, win window, queues []int) {
	var pub Publisher
	if cfg.Workload == Publish {
		pub = w.c.(Publisher) // checked by runner.prepareTopic
	}
	var interval float64
	if rate > 0 {
		interval = float64(cfg.SendBatch) / rate * 1e9
	}
	for k := 0; ; k++ {
		if ctx.Err() != nil {
			return
		}
		now := time.Now().UnixNano()
		sched := now
		if rate > 0 {
			sched = start + int64(float64(k)*interval)
			if sched >= stop {
				return
			}
			if d := sched - now; d > 0 {
				sleepCtx(ctx, time.Duration(d))
				now = time.Now().UnixNano()
			}
		}
		if fl != nil {
			fl.wait(ctx, stop)
			now = time.Now().UnixNano()
			sched = now
		}
		if now >= stop {
			if rate == 0 {
				return
			}
			if now >= stop+lateGrace.Nanoseconds() {
				for s := sched; s < stop; k++ {
					w.hSend.Record(now - s)
					w.fail(errLate, s, win)
					s = start + int64(float64(k+1)*interval)
				}
				return
			}
		}
		n := q.take(cfg.SendBatch)
		if n == 0 {
			return
		}
		for i := 0; i < n; i++ {
			putStamp(w.bodies[i], sched)
			w.out[i] = Outgoing{Body: w.bodies[i], Priority: pick(w.rng, cfg.PriorityMix), Delay: pick(w.rng, cfg.DelayMix)}
		}
		qi := queues[k%len(queues)]
		var ok int
		var err error
		if pub != nil {
			if err = pub.Publish(ctx, &w.out[0]); err == nil {
				ok = 1
			}
		} else {
			ok, err = w.c.Send(ctx, qi, w.out[:n])
		}
		done := time.Now().UnixNano()
		if w.firstSend == 0 {
			w.firstSend = done
		}
		w.sent.Add(int64(ok))
		fl.addSent(int64(ok))
		w.tSent += int64(ok)
		if ok > 0 {
			w.lastSend = done
		}
		if win.in(done) {
			w.wSent += int64(ok)
			if err == nil {
				w.wReq++ // a failed request counts once, as an error (fail)
			}
		}
		// Latency of requests that succeeded only; in open loop by the
		// window of the batch's schedule, else of its completion.
		if err == nil && (rate > 0 && win.in(sched) || rate == 0 && win.in(done)) {
			w.hSend.Record(done - sched)
		}
		if late != nil && win.in(sched) {
			late.want.Add(int64(ok) * late.perSent)
		}
		if err != nil {
			// In open loop a failure belongs to its schedule's window too.
			at := done
			if rate > 0 {
				at = sched
			}
			w.fail(err, at, win)
			backoff(ctx)
		}
	}
}

// lateTrack follows, in open loop, the messages scheduled in the window:
// the consumers go on after the window until they received every one of
// them, so that each one's end-to-end latency is recorded however late it
// comes (a stall at the window's end would otherwise hide what it delayed,
// as for sends), or until give-up. Those never received by then are
// counted (Result.E2EUnseen).
type lateTrack struct {
	want      atomic.Int64 // acknowledged messages (deliveries) scheduled in the window
	perSent   int64        // deliveries per message sent (a publish's subscriptions)
	got       atomic.Int64 // of them received
	producing atomic.Int64 // producers still running
	giveUp    int64        // Unix ns
}

// caughtUp says whether every message scheduled in the window was received.
func (l *lateTrack) caughtUp() bool {
	return l.producing.Load() == 0 && l.got.Load() >= l.want.Load()
}

// capTrack follows the producers of a run capped by Config.Messages, so
// that its consumers stop once the producers ran out of messages and every
// one they sent is deleted, not at the window's end: the rates of a capped
// cycle are over the time it ran (they were over the whole window, however
// early the messages were all deleted).
type capTrack struct {
	producing atomic.Int64 // producers still running
	sent      atomic.Int64 // messages the stopped producers sent
	perSent   int64        // deliveries per message sent (a publish's subscriptions)
}

// done records a producer that stopped after sending sent messages.
func (c *capTrack) done(sent int64) {
	c.sent.Add(sent)
	c.producing.Add(-1)
}

// drained says whether every producer stopped and deleted covers all the
// deliveries of what they sent.
func (c *capTrack) drained(deleted int64) bool {
	return c.producing.Load() == 0 && deleted >= c.sent.Load()*c.perSent
}

// consumeStop says when a consumer ends.
type consumeStop struct {
	at      int64         // Unix ns: stop receiving
	late    *lateTrack    // open loop: go on after at until caught up (nil: closed loop)
	capped  *capTrack     // a run capped by Config.Messages: stop once it is all deleted (nil: no cap)
	flow    *flow         // producers' flow control, or nil
	onEmpty bool          // stop after a receive that came back empty
	target  int64         // stop once all consumers deleted this many (0: no target)
	deleted *atomic.Int64 // deletes of all consumers in this phase
}

func (s *consumeStop) done(now int64) bool {
	if now >= s.at {
		return s.late == nil || now >= s.late.giveUp || s.late.caughtUp()
	}
	if s.capped != nil && s.capped.drained(s.deleted.Load()) {
		return true
	}
	return s.target > 0 && s.deleted.Load() >= s.target
}

// consume receives and deletes until the stop condition holds; it deletes
// everything it received before returning.
func (w *worker) consume(ctx context.Context, cfg *Config, stop *consumeStop, win window, queues []int) {
	onBody := func(b []byte) {
		if t, ok := stampOf(b); ok {
			w.stamps = append(w.stamps, t)
		}
	}
	qk := 0
	for ctx.Err() == nil && !stop.done(time.Now().UnixNano()) {
		qi := queues[qk%len(queues)]
		w.stamps = w.stamps[:0]
		t0 := time.Now().UnixNano()
		n, err := w.c.Receive(ctx, qi, cfg.RecvBatch, cfg.Wait, onBody)
		t1 := time.Now().UnixNano()
		if err != nil {
			w.fail(err, t1, win)
			backoff(ctx)
			continue
		}
		w.tRecv += int64(n)
		if win.in(t1) {
			w.wReq++
			if n == 0 {
				w.wEmpty++
			} else {
				w.wRecv += int64(n)
				w.hRecv.Record(t1 - t0)
			}
		}
		// End-to-end latency: in open loop of each message scheduled in
		// the window, whenever it comes; else of those received in it.
		for _, s := range w.stamps {
			if stop.late != nil && win.in(s) {
				w.hE2E.Record(t1 - s)
				stop.late.got.Add(1)
			} else if stop.late == nil && win.in(t1) {
				w.hE2E.Record(t1 - s)
			}
		}
		for w.c.Pending() >= cfg.DeleteBatch {
			w.deleteBatch(ctx, cfg.DeleteBatch, stop, win)
		}
		if n == 0 {
			w.flush(ctx, cfg, stop, win)
			if stop.onEmpty {
				return
			}
			qk++ // try the next queue of this consumer
		}
	}
	w.flush(ctx, cfg, stop, win)
}

func (w *worker) flush(ctx context.Context, cfg *Config, stop *consumeStop, win window) {
	for w.c.Pending() > 0 {
		w.deleteBatch(context.WithoutCancel(ctx), cfg.DeleteBatch, stop, win)
	}
}

func (w *worker) deleteBatch(ctx context.Context, n int, stop *consumeStop, win window) {
	t0 := time.Now().UnixNano()
	ok, err := w.c.Delete(ctx, n)
	t1 := time.Now().UnixNano()
	w.deleted.Add(int64(ok))
	stop.deleted.Add(int64(ok))
	stop.flow.add(-int64(ok))
	w.tDel += int64(ok)
	if ok > 0 {
		w.lastDel = t1
	}
	if win.in(t1) {
		w.wDel += int64(ok)
		if err == nil {
			w.wReq++ // a failed request counts once, as an error (fail)
			w.hDel.Record(t1 - t0)
		}
	}
	if err != nil {
		w.fail(err, t1, win)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// backoff pauses after a failed request so that a dead server does not
// turn a worker into a busy loop.
func backoff(ctx context.Context) { sleepCtx(ctx, 5*time.Millisecond) }
