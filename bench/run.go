package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Run executes one workload against t and returns its result. The caller
// owns t (Run neither prepares other state nor closes it). Every loop is
// bounded by cfg's durations, its message cap and ctx.
func Run(ctx context.Context, t Target, cfg Config) (*Result, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &runner{t: t, cfg: cfg}
	names := make([]string, cfg.Queues)
	for i := range names {
		names[i] = cfg.QueuePrefix + "-" + strconv.Itoa(i)
	}
	if err := t.Prepare(ctx, names, !cfg.KeepQueues); err != nil {
		return nil, fmt.Errorf("prepare %s: %w", t.Name(), err)
	}
	res := r.newResult()
	if err := r.makeWorkers(ctx); err != nil {
		return nil, err
	}
	defer r.closeWorkers()
	var err error
	switch cfg.Workload {
	case Cycle, Produce:
		err = r.timed(ctx, res, cfg.Workload == Cycle || cfg.Workload == Consume, true)
	case Publish:
		if err = r.prepareTopic(ctx); err != nil {
			return nil, err
		}
		err = r.timed(ctx, res, cfg.Consumers > 0, true)
	case Consume:
		if cfg.Messages > 0 {
			if err = r.preload(ctx, res); err != nil {
				break
			}
			for _, w := range r.producers { // the preload is not the measured load
				w.wSent, w.wReq, w.wErr = 0, 0, 0
				w.hSend.Reset()
			}
		}
		err = r.timed(ctx, res, true, false)
	case Backlog:
		err = r.backlog(ctx, res)
	}
	r.finish(res)
	return res, err
}

type runner struct {
	t         Target
	cfg       Config
	producers []*worker
	consumers []*worker
	phase     atomic.Pointer[string]
}

func (r *runner) makeWorkers(ctx context.Context) error {
	id := 0
	mk := func(n int) ([]*worker, error) {
		var ws []*worker
		for i := 0; i < n; i++ {
			c, err := r.t.NewClient(ctx)
			if err != nil {
				return ws, fmt.Errorf("client for %s: %w", r.t.Name(), err)
			}
			ws = append(ws, newWorker(id, c, &r.cfg))
			id++
		}
		return ws, nil
	}
	var err error
	if r.producers, err = mk(r.cfg.Producers); err != nil {
		return err
	}
	r.consumers, err = mk(r.cfg.Consumers)
	return err
}

func (r *runner) closeWorkers() {
	for _, w := range r.all() {
		w.c.Close()
	}
}

func (r *runner) all() []*worker {
	return append(append([]*worker(nil), r.producers...), r.consumers...)
}

// queuesOf returns the queues worker i of n uses: i%Q, then every n-th.
func (r *runner) queuesOf(i, n int) []int {
	var qs []int
	for q := i % r.cfg.Queues; q < r.cfg.Queues; q += n {
		qs = append(qs, q)
	}
	if n < r.cfg.Queues {
		return qs
	}
	return []int{i % r.cfg.Queues}
}

func (r *runner) setPhase(p string) {
	r.phase.Store(&p)
}

// startPhase names the phase and starts the progress reports of a phase
// that began at start; the returned func stops them and waits.
func (r *runner) startPhase(ctx context.Context, phase string, start time.Time) (stop func()) {
	r.setPhase(phase)
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); r.progress(pctx, start) }()
	return func() { cancel(); <-done }
}

// progress reports every interval until ctx ends.
func (r *runner) progress(ctx context.Context, start time.Time) {
	if r.cfg.Progress == nil {
		return
	}
	tk := time.NewTicker(r.cfg.ProgressInterval)
	defer tk.Stop()
	var lastSent, lastDel int64
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tk.C:
			var sent, del, errs int64
			var hs, he Histogram
			for _, w := range r.all() {
				sent += w.sent.Load()
				del += w.deleted.Load()
				errs += w.errs.Load()
				hs.Merge(&w.hSend)
				he.Merge(&w.hE2E)
			}
			dt := now.Sub(last).Seconds()
			p := Progress{
				Phase: *r.phase.Load(), Elapsed: now.Sub(start),
				SentPerS: float64(sent-lastSent) / dt, DeletedPerS: float64(del-lastDel) / dt,
				Errors: errs, SendP99: time.Duration(hs.Quantile(0.99)), E2EP99: time.Duration(he.Quantile(0.99)),
			}
			lastSent, lastDel, last = sent, del, now
			r.cfg.Progress(p)
		}
	}
}

// backlogNow sums Backlog over all queues.
func (r *runner) backlogNow(ctx context.Context) (int64, error) {
	var sum int64
	for i := 0; i < r.cfg.Queues; i++ {
		n, err := r.t.Backlog(ctx, i)
		if err != nil {
			return 0, err
		}
		sum += n
	}
	return sum, nil
}

// timed runs producers (if produce) and consumers (if consume) for warmup
// plus duration and measures the window after the warmup.
func (r *runner) timed(ctx context.Context, res *Result, consume, produce bool) error {
	cfg := &r.cfg
	start := time.Now()
	warmEnd := start.Add(cfg.Warmup)
	end := warmEnd.Add(cfg.Duration)
	win := window{warmEnd.UnixNano(), end.UnixNano()}
	stopProgress := r.startPhase(ctx, "warmup", start)
	defer stopProgress()

	var q *quota
	if cfg.Messages > 0 && produce {
		q = &quota{}
		q.left.Store(cfg.Messages)
	}
	var fl *flow
	if produce && consume && cfg.Rate == 0 && cfg.MaxBacklog >= 0 {
		fl = &flow{limit: cfg.MaxBacklog, perSent: int64(r.fanout())}
		if fl.limit == 0 {
			fl.limit = int64(10 * cfg.Consumers * cfg.RecvBatch)
		}
		res.MaxBacklog = fl.limit
	}
	// The backlog at rest, before any worker starts (for Result.RestDiff).
	var rest0 int64
	rerr := errors.New("not measured")
	if produce && consume {
		rest0, rerr = r.backlogNow(ctx)
	}
	var capped *capTrack
	switch {
	case q != nil && consume:
		capped = &capTrack{perSent: int64(r.fanout())}
		capped.producing.Store(int64(len(r.producers)))
	case consume && !produce && res.Preloaded > 0:
		// consume --messages: its window ends with the preload's last delete.
		capped = &capTrack{perSent: 1}
		capped.sent.Store(res.Preloaded)
	}
	var late *lateTrack
	if produce && consume && cfg.Rate > 0 {
		// A delayed message is due its delay after its schedule: the
		// consumers wait that much longer for it.
		var maxDelay int64
		for _, d := range cfg.DelayMix {
			maxDelay = max(maxDelay, int64(d.Value)*int64(time.Second))
		}
		late = &lateTrack{perSent: int64(r.fanout()), giveUp: win.to + 2*lateGrace.Nanoseconds() + maxDelay}
		late.producing.Store(int64(len(r.producers)))
	}
	var wg sync.WaitGroup
	if produce {
		perRate := 0.0
		if cfg.Rate > 0 {
			perRate = cfg.Rate / float64(len(r.producers))
		}
		for i, w := range r.producers {
			wg.Add(1)
			go func(i int, w *worker) {
				defer wg.Done()
				if late != nil {
					defer late.producing.Add(-1)
				}
				if capped != nil {
					defer func() { capped.done(w.tSent) }()
				}
				// Stagger open-loop producers evenly over one interval.
				s := start.UnixNano()
				if perRate > 0 {
					s += int64(float64(i) / float64(len(r.producers)) * float64(cfg.SendBatch) / perRate * 1e9)
				}
				w.produce(ctx, cfg, q, fl, late, s, win.to, perRate, win, r.queuesOf(i, len(r.producers)))
			}(i, w)
		}
	}
	stop := &consumeStop{at: win.to, late: late, capped: capped, deleted: new(atomic.Int64), flow: fl}
	if consume {
		for i, w := range r.consumers {
			wg.Add(1)
			go func(i int, w *worker) {
				defer wg.Done()
				w.consume(ctx, cfg, stop, win, r.queuesOf(i, len(r.consumers)))
			}(i, w)
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	// CPU clocks, then the backlog, at the start and the end of the window
	// (the workers stop at its end, or earlier when a message cap runs out).
	var berr error
	waitUntil(ctx, warmEnd, done)
	r.setPhase("measure")
	cpu0 := sampleCPU(r.serverPID(), r.cfg.ServerPIDs...)
	if produce && consume {
		res.BacklogStart, berr = r.backlogNow(ctx)
	}
	waitUntil(ctx, end, done)
	measured := time.Since(warmEnd)
	cpu1 := sampleCPU(r.serverPID(), r.cfg.ServerPIDs...)
	if produce && consume {
		if b, err := r.backlogNow(ctx); err == nil {
			res.BacklogEnd = b
		} else if berr == nil {
			berr = err
		}
	}
	<-done
	stopProgress()
	if rerr == nil {
		r.countAtRest(ctx, res, rest0)
	}
	if late != nil {
		res.E2EUnseen = max(0, late.want.Load()-late.got.Load())
	}
	res.WindowS = cfg.Duration.Seconds()
	if measured > 0 && measured < cfg.Duration {
		// The workers stopped before the window's end (a message cap ran
		// out): the rates are over the time they ran, as the CPU is. A
		// cycle's consumers stop once every message sent is deleted, but
		// one in a long poll then waits it out: its rates end at the last
		// delete.
		res.WindowS = measured.Seconds()
		if capped != nil {
			var last int64
			for _, w := range r.consumers {
				last = max(last, w.lastDel)
			}
			if d := time.Duration(last - win.from); d > 0 && d < measured {
				res.WindowS = d.Seconds()
			}
		}
	}
	var msgs int64
	for _, w := range r.all() {
		if consume {
			msgs += w.wDel
		} else {
			msgs += w.wSent
		}
	}
	setCPU(res, cpu0, cpu1, msgs)
	if berr != nil {
		return fmt.Errorf("backlog counts: %w", berr)
	}
	return ctx.Err()
}

// countAtRest sets res.RestDiff and res.RestTolerance from the backlog
// now that every worker stopped, and rest0, the backlog before they
// started: the whole run's counts, with no request in flight.
func (r *runner) countAtRest(ctx context.Context, res *Result, rest0 int64) {
	// Asynchronous deliveries (a cluster's relays to queues on other
	// shards, a peer that applies acks late) may still land: take the
	// backlog once it held still for a second, within 10 s.
	b, err := r.backlogNow(ctx)
	if err != nil {
		return
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && ctx.Err() == nil; {
		sleepCtx(ctx, time.Second)
		again, err := r.backlogNow(ctx)
		if err != nil {
			return
		}
		if again == b {
			break
		}
		b = again
	}
	var sent, del, errs int64
	for _, w := range r.all() {
		sent += w.tSent
		del += w.tDel
		errs += w.errs.Load()
	}
	fan := int64(r.fanout())
	res.RestDiff = (b - rest0) - (sent*fan - del)
	res.RestTolerance = errs * fan
}

// preload sends cfg.Messages with the producers as fast as they go.
func (r *runner) preload(ctx context.Context, res *Result) error {
	cfg := &r.cfg
	start := time.Now()
	stopProgress := r.startPhase(ctx, "preload", start)
	defer stopProgress()
	q := &quota{}
	q.left.Store(cfg.Messages)
	stopAt := start.Add(cfg.MaxTime).UnixNano()
	// The whole preload is the window of the send histogram.
	win := window{start.UnixNano(), math.MaxInt64}
	var wg sync.WaitGroup
	for i, w := range r.producers {
		w.resetPhase()
		wg.Add(1)
		go func(i int, w *worker) {
			defer wg.Done()
			w.produce(ctx, cfg, q, nil, nil, 0, stopAt, 0, win, r.queuesOf(i, len(r.producers)))
		}(i, w)
	}
	wg.Wait()
	stopProgress()
	var sent, last int64
	for _, w := range r.producers {
		sent += w.tSent
		last = max(last, w.lastSend)
	}
	res.Preloaded = sent
	if last > 0 {
		res.PreloadS = float64(last-start.UnixNano()) / 1e9
		res.PreloadPerS = float64(sent) / res.PreloadS
	}
	if sent < cfg.Messages {
		return fmt.Errorf("preload stored %d of %d messages (errors: %s)", sent, cfg.Messages, r.errSample())
	}
	return ctx.Err()
}

// drain runs the consumers until they deleted target messages in total or
// find the queues empty, and returns how many they deleted and the time
// from start to the last delete.
func (r *runner) drain(ctx context.Context, target int64) (int64, time.Duration) {
	cfg := &r.cfg
	start := time.Now()
	stopProgress := r.startPhase(ctx, "drain", start)
	defer stopProgress()
	stop := &consumeStop{at: start.Add(cfg.MaxTime).UnixNano(), onEmpty: true, target: target, deleted: new(atomic.Int64)}
	win := window{start.UnixNano(), math.MaxInt64}
	var wg sync.WaitGroup
	for i, w := range r.consumers {
		w.resetPhase()
		wg.Add(1)
		go func(i int, w *worker) {
			defer wg.Done()
			w.consume(ctx, cfg, stop, win, r.queuesOf(i, len(r.consumers)))
		}(i, w)
	}
	wg.Wait()
	stopProgress()
	var last int64
	for _, w := range r.consumers {
		last = max(last, w.lastDel)
	}
	if last == 0 {
		return stop.deleted.Load(), 0
	}
	return stop.deleted.Load(), time.Duration(last - start.UnixNano())
}

// backlog: preload, resident memory, drain (with the restart check half
// way when asked).
func (r *runner) backlog(ctx context.Context, res *Result) error {
	cfg := &r.cfg
	if err := r.preload(ctx, res); err != nil {
		return err
	}
	if cfg.AfterPreload != nil {
		cfg.AfterPreload()
	}
	pid := -1
	switch _, inproc := r.t.(*InprocTarget); {
	case cfg.Daemon != nil:
		pid, res.RSSOf = cfg.Daemon.PID(), "daemon"
	case cfg.RSSPID > 0:
		pid, res.RSSOf = cfg.RSSPID, "pid "+strconv.Itoa(cfg.RSSPID)
	case inproc:
		pid, res.RSSOf = 0, "smqbench (engine in process)"
	}
	if pid >= 0 {
		res.RSSBytes, _ = ReadRSS(pid)
		res.RSSAnonBytes, res.RSSFileBytes = ReadRSSParts(pid)
		res.RSSSettledBytes, res.RSSSettledS = settledRSS(ctx, pid, cfg.SettleTime)
	}
	first := res.Preloaded
	if cfg.RestartCheck {
		first = int64(float64(res.Preloaded) * cfg.RestartAfter)
	}
	// The drain's CPU, server and smqbench, per message drained: its first
	// phase only (a restart check's kill gives the server a new PID).
	cpu0 := sampleCPU(r.serverPID(), r.cfg.ServerPIDs...)
	d1, t1 := r.drain(ctx, first)
	setCPU(res, cpu0, sampleCPU(r.serverPID(), r.cfg.ServerPIDs...), d1)
	res.Drained, res.DrainS = d1, t1.Seconds()
	// Cores over the drain itself, to its last delete, not over the empty
	// receives that ended it (a second of idle long poll at 20,000).
	if res.CPUWallS > 0 && res.DrainS > 0 {
		res.ServerCores = round2(res.ServerCPUS / res.DrainS)
		res.ClientCores = round2(res.ClientCPUS / res.DrainS)
		res.CPUWallS = round3(res.DrainS)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if cfg.RestartCheck {
		if err := r.restart(ctx, res); err != nil {
			return err
		}
		// Drain until empty: a restart may redeliver messages whose
		// deletes were acknowledged but not yet written when it was killed
		// (at-least-once; DESIGN.md "Durability").
		d2, t2 := r.drain(ctx, 0)
		res.Drained += d2
		res.DrainS += t2.Seconds()
		// Redelivered messages whose receive survived the kill but whose
		// delete did not are Inactive until their visibility timeout ends:
		// wait for them (not counted in the drain rate).
		deadline := time.Now().Add(cfg.MaxTime)
		for ctx.Err() == nil && time.Now().Before(deadline) {
			left, err := r.backlogNow(ctx)
			if err != nil {
				return err
			}
			if left == 0 {
				break
			}
			d3, _ := r.drain(ctx, 0)
			res.DrainedLate += d3
		}
	}
	if res.DrainS > 0 {
		res.DrainPerS = float64(res.Drained) / res.DrainS
	}
	left, err := r.backlogNow(ctx)
	if err != nil {
		return err
	}
	res.BacklogEnd = left
	if left != 0 {
		return fmt.Errorf("backlog: %d messages left after the drain", left)
	}
	// Every message preloaded is drained: once, or with the restart check
	// at least once (deletes acknowledged but not written at the kill come
	// back). A drain rate of a broker that lost messages is no figure.
	switch got := res.Drained + res.DrainedLate; {
	case got < res.Preloaded:
		return fmt.Errorf("backlog: drained %d of the %d messages preloaded: %d lost", got, res.Preloaded, res.Preloaded-got)
	case got > res.Preloaded && !cfg.RestartCheck:
		return fmt.Errorf("backlog: drained %d messages of %d preloaded: %d delivered twice", got, res.Preloaded, got-res.Preloaded)
	}
	return ctx.Err()
}

// restart kills the daemon, starts it again, times the first successful
// receive and counts what it recovered.
func (r *runner) restart(ctx context.Context, res *Result) error {
	cfg := &r.cfg
	r.setPhase("restart")
	res.ExpectedAfterRestart = res.Preloaded - res.Drained
	t0 := time.Now()
	if err := cfg.Daemon.Kill(); err != nil {
		return fmt.Errorf("kill daemon: %w", err)
	}
	if err := cfg.Daemon.Start(); err != nil {
		return fmt.Errorf("restart daemon: %w", err)
	}
	c := r.consumers[0].c
	deadline := t0.Add(cfg.MaxTime)
	var lastErr error
	for {
		n, err := c.Receive(ctx, 0, 1, 0, nil)
		if err == nil && n == 1 {
			break
		}
		lastErr = err
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("no successful receive within %v after restart (last error: %v)", cfg.MaxTime, lastErr)
		}
		time.Sleep(2 * time.Millisecond)
	}
	res.RestartMs = float64(time.Since(t0).Microseconds()) / 1000
	// The received message is Inactive: it still counts.
	n, err := r.backlogNow(ctx)
	if err != nil {
		return fmt.Errorf("count after restart: %w", err)
	}
	res.CountAfterRestart = n
	res.RestartCountOK = n == res.ExpectedAfterRestart
	res.Redelivered = n - res.ExpectedAfterRestart
	if _, err := c.Delete(ctx, 1); err != nil {
		return fmt.Errorf("delete after restart: %w", err)
	}
	res.Drained++
	if cfg.Daemon != nil {
		res.RSSAfterRestartBytes, _ = ReadRSS(cfg.Daemon.PID())
	}
	return nil
}

// fanout is the queue messages one message sent becomes: the number of
// subscriptions (queues) for Publish, else 1.
func (r *runner) fanout() int {
	if r.cfg.Workload == Publish {
		return r.cfg.Queues
	}
	return 1
}

// serverPID is the process whose CPU counts as the server's: the spawned
// daemon, else Config.ServerPID (0: none).
func (r *runner) serverPID() int {
	if r.cfg.Daemon != nil {
		if pid := r.cfg.Daemon.PID(); pid > 0 {
			return pid
		}
	}
	return r.cfg.ServerPID
}

// waitUntil returns at t, when done is closed or when ctx ends.
func waitUntil(ctx context.Context, t time.Time, done <-chan struct{}) {
	d := time.Until(t)
	if d <= 0 {
		return
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
	case <-done:
	case <-tm.C:
	}
}

func (r *runner) errSample() string {
	for _, w := range r.all() {
		if w.errSample != "" {
			return w.errSample
		}
	}
	return "none"
}

// ErrBacklogGrew marks a cycle whose backlog grew beyond the tolerance.
var ErrBacklogGrew = errors.New("bench: backlog grew during the measured window")

// settledRSS waits, at most max, for the resident memory of pid to stop
// falling once the preload is over (the broker finishes its checkpoints and
// returns the memory of that burst) and returns it with the seconds waited:
// the memory the backlog itself costs.
func settledRSS(ctx context.Context, pid int, max time.Duration) (int64, float64) {
	start := time.Now()
	prev, _ := ReadRSS(pid)
	if max <= 0 {
		return prev, 0
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	stable := 0
	for time.Since(start) < max {
		select {
		case <-ctx.Done():
			return prev, time.Since(start).Seconds()
		case <-t.C:
		}
		cur, err := ReadRSS(pid)
		if err != nil {
			return prev, time.Since(start).Seconds()
		}
		if cur >= prev-prev/100 {
			stable++
		} else {
			stable = 0
		}
		prev = cur
		if stable >= 10 {
			break
		}
	}
	return prev, time.Since(start).Seconds()
}
