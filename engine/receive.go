package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"
)

// bodyLoc remembers where a taken message's body is, to read it after the
// stripe lock is released.
type bodyLoc struct {
	pos    uint64
	size   uint32
	slot   uint32
	seq    uint64
	stripe uint8
}

// Receive takes up to opt.Max Active messages, highest priority first across
// all stripes, makes them Inactive for the queue's VisibilityTimeout and
// returns them with fresh receipt handles (appended to dst). When none is
// Active it waits up to the effective wait (opt.Wait, else the queue's
// PollingWaitSeconds) for one, and returns ErrMessageNotExist if none came.
// It returns as soon as at least one message is available; it never waits to
// fill the batch. Other errors: ctx.Err() when ctx ends first;
// ErrTooManyLongPolls when Options.MaxLongPolls receives already wait (to
// be treated as ErrMessageNotExist, after a pause); ErrQueueNotExist when
// the queue is deleted, also while this receive waits; ErrClosed; an
// *ArgumentError for opt.Max or opt.Wait out of range.
func (q *Queue) Receive(ctx context.Context, opt ReceiveOptions, dst []Message) ([]Message, error) {
	if err := q.b.usable(); err != nil {
		return dst, err
	}
	max := opt.Max
	if max == 0 {
		max = 1
	}
	if max < 1 || max > MaxBatch {
		return dst, rangeErr("numOfMessages", 1, MaxBatch, "messages")
	}
	m := q.meta()
	waitMs := m.pollWaitMs
	if opt.HasWait {
		if err := checkDuration("waitseconds", opt.Wait, 0, MaxPollingWait); err != nil {
			return dst, err
		}
		waitMs = opt.Wait.Milliseconds()
	} else if opt.Wait != 0 {
		return dst, argErr("waitseconds", "is set without HasWait (set HasWait for this receive's own wait; false means the queue's PollingWaitSeconds)")
	}
	if opt.MaxWait > 0 {
		waitMs = min(waitMs, opt.MaxWait.Milliseconds())
	}
	if err := q.b.store.waitRoom(); err != nil {
		return dst, err
	}
	base := len(dst)
	dst, err := q.receiveNow(max, dst)
	if err != nil || len(dst) > base {
		return dst, err
	}
	if waitMs <= 0 {
		return dst, ErrMessageNotExist
	}

	// Long poll.
	b := q.b
	if b.longPolls.Add(1) > int64(b.maxLongPolls) {
		b.longPolls.Add(-1)
		return dst, ErrTooManyLongPolls
	}
	defer b.longPolls.Add(-1)
	return q.waitReceive(ctx, max, dst, base, b.nowMs()+waitMs)
}

// pollInternal receives up to max messages for the pusher (push.go): as
// Receive with a wait, but not counted against MaxLongPolls, which bounds
// the clients' waits.
func (q *Queue) pollInternal(ctx context.Context, max int, dst []Message, wait time.Duration) ([]Message, error) {
	if err := q.b.usable(); err != nil {
		return dst, err
	}
	if err := q.b.store.waitRoom(); err != nil {
		return dst, err
	}
	base := len(dst)
	dst, err := q.receiveNow(max, dst)
	if err != nil || len(dst) > base {
		return dst, err
	}
	return q.waitReceive(ctx, max, dst, base, q.b.nowMs()+wait.Milliseconds())
}

// RetryWaitError is the ErrRetryOnLeader of a long poll that waited on a
// replica whose shard's lead then moved (a step-down, a hand-over): it took
// nothing, and Left is what remains of its wait, for the receive run again
// on the shard's next leader (server/cluster.go).
type RetryWaitError struct{ Left time.Duration }

func (e *RetryWaitError) Error() string {
	return fmt.Sprintf("%v; %v of the long poll's wait left", ErrRetryOnLeader, e.Left)
}

func (e *RetryWaitError) Unwrap() error { return ErrRetryOnLeader }

// waitReceive is the long poll of Receive: it waits for messages until
// deadline (ms on the broker's clock) or until ctx ends.
func (q *Queue) waitReceive(ctx context.Context, max int, dst []Message, base int, deadline int64) ([]Message, error) {
	b := q.b
	w := b.getWaiter()
	defer b.putWaiter(w)
	// The timer is armed once, for the whole wait: it measures the wait
	// on the clock's timers, so a clock stepped back (one that is not
	// SystemClock's) never makes the wait longer than asked. Re-measured
	// from the clock after each wake-up, a step back was added to it.
	if left := deadline - b.nowMs(); left > 0 {
		w.fired.Store(false)
		w.timer.Reset(time.Duration(left) * time.Millisecond)
	} else {
		w.fired.Store(true)
	}
	for {
		q.waiters.push(w)
		var err error
		dst, err = q.receiveNow(max, dst)
		if err != nil || len(dst) > base {
			q.waiters.leave(w)
			return dst, retryWait(err, b, deadline)
		}
		if w.fired.Load() || deadline-b.nowMs() <= 0 {
			q.waiters.leave(w)
			return dst, ErrMessageNotExist
		}
		select {
		case <-w.ch:
		case <-ctx.Done():
			q.waiters.leave(w)
			return dst, ctx.Err()
		}
		q.waiters.remove(w) // woken or timed out: it looks again, using any wake-up it had
		if err := b.usable(); err != nil {
			return dst, retryWait(err, b, deadline)
		}
	}
}

// retryWait turns the ErrRetryOnLeader of a long poll into a
// RetryWaitError: the lead moved while the receive waited, and it took
// nothing, so the rest of its wait (to deadline) can go on on the next
// leader. Other errors pass unchanged.
func retryWait(err error, b *Broker, deadline int64) error {
	if !errors.Is(err, ErrRetryOnLeader) {
		return err
	}
	left := max(deadline-b.nowMs(), 0)
	return &RetryWaitError{Left: time.Duration(left) * time.Millisecond}
}

// receiveNow is tryReceive admitted as an operation that changes state
// (storage.enter: a replica handing its lead over refuses it before it
// takes anything). A replica's leader answers what it took only once its
// lead is confirmed (replica_confirm.go), and the receive stays admitted
// until then: a hand-over waits for it (Settled), so that the lead does
// not move between the take and the answer.
func (q *Queue) receiveNow(max int, dst []Message) ([]Message, error) {
	term, err := q.b.store.enterLeading()
	if err != nil {
		return dst, err
	}
	defer q.b.store.leave()
	base := len(dst)
	dst, err = q.tryReceive(max, dst, retryDamaged)
	return q.b.confirmRead(term, dst, base, err)
}

// tryReceive takes up to max Active messages without waiting. If every
// message it took was dropped as damaged, or held for a dead-letter move
// (Options.MovesHeld), it tries again, up to again times; while every
// message it took was moved to the dead-letter queue it looks again, up
// to maxMoveRounds rounds, since each round takes what it moved off the
// lanes. With a bounded retry there, a queue whose head held more than 80
// messages due for the dead-letter queue answered MessageNotExist to a
// receive while a message was Active behind them, and a long poll slept
// its whole wait, since nothing wakes it (semantics audit, 2026-12-06:
// 512 such messages, three receives to get the one behind them).
func (q *Queue) tryReceive(max int, dst []Message, again int) ([]Message, error) {
	base := len(dst)
	var locs [MaxBatch]bodyLoc
	var movingSince time.Time // the first round that only moved (read only then: no clock read per receive)
	// hopFailed: a hop to a dead-letter queue held elsewhere failed in
	// this receive (its shard has no leader, say: each hop waits up to
	// moveTimeout). The rounds after it hide the messages due for a move
	// without trying another hop, as while moves are held, and look on
	// for an Active message (dead-letter audit, 2026-12-07: one receive
	// with no wait made five failed hops, 25 s in a cluster, and answered
	// MessageNotExist with a message Active behind them).
	hopFailed := false
	hidRounds := 0 // rounds that only hid, after hopFailed (hideRoundsAfterFailedHop)
	for round := 1; ; round++ {
		if q.dead.Load() {
			return dst, q.goneErr()
		}
		now := q.b.nowMs()
		for i := range q.stripes {
			q.stripes[i].catchUp(now)
		}
		// Messages due for the dead-letter queue (deadletter.go): only a
		// queue with a live policy pays for the scratch.
		var mv *moves
		if m := q.meta(); m.maxRecv != 0 {
			if t := q.deadLetterTarget(m); t != nil {
				mv = &moves{target: t, maxRecv: m.maxRecv}
			} else if name := q.deadLetterElsewhere(m); name != "" {
				mv = &moves{elsewhere: name, maxRecv: m.maxRecv}
			}
		}
		if mv != nil && (q.b.movesHeld() || hopFailed && mv.elsewhere != "") {
			mv.held = true // Options.MovesHeld, or a failed hop (deadletter.go heldHide)
		}
		S := len(q.stripes)
		for attempt := 0; len(dst)-base < max && attempt < max+2*S; attempt++ {
			start := int(q.recvRR.Add(1))
			best, bestP, secondP := -1, numLanes, numLanes
			for k := 0; k < S; k++ {
				j := (start + k) % S
				p := bestLane(q.stripes[j].laneBits.Load())
				if p < bestP {
					secondP, bestP, best = bestP, p, j
				} else if p < secondP {
					secondP = p
				}
			}
			if best < 0 {
				break
			}
			st := &q.stripes[best]
			st.mu.Lock()
			if st.dead {
				st.mu.Unlock()
				return dst[:base], q.goneErr()
			}
			dst = st.takeLocked(now, max-(len(dst)-base), secondP, dst, locs[len(dst)-base:], mv)
			st.scheduleLocked(now)
			st.flushLocked()
			st.mu.Unlock()
			if mv != nil && mv.n == len(mv.locs) {
				break // move these first
			}
		}
		if mv != nil && mv.n > 0 {
			// Registered only around a move that runs (beginMove), not for
			// every receive of a queue with a policy: a hold waits for the
			// count to reach 0.
			moved, giveUp := false, false
			switch {
			case mv.held, !q.b.beginMove():
				// Held (Options.MovesHeld): they stay hidden in this queue
				// (for heldHide, or, held since they were hidden, their
				// visibility timeout), as after a move that could not be
				// made, and are moved once visible again.
				if hopFailed && mv.held {
					// Hidden past a failed hop: look on, as after moves,
					// a bounded number of rounds.
					hidRounds++
					moved = hidRounds < hideRoundsAfterFailedHop
					giveUp = !moved // nor the retries of a round that moved nothing
				}
				mv.n = 0
			default:
				hid := mv.n
				n, err := q.deadLetter(mv)
				q.b.endMove()
				if err != nil {
					return dst, err
				}
				moved = n > 0
				if n == 0 && hid > 0 && mv.elsewhere != "" {
					hopFailed = true
					moved = true // look on without hops (hopFailed)
				}
			}
			if len(dst) == base {
				// Everything taken was moved, or held, or could not be
				// moved (a dead-letter queue on another shard that does
				// not answer): look again, while moves are made, else a
				// few times.
				if moved {
					if movingSince.IsZero() {
						movingSince = q.b.clock.Now()
					}
					if round < maxMoveRounds && q.b.clock.Now().Sub(movingSince) < maxMoveTime {
						continue
					}
				} else if again > 0 && !giveUp {
					again--
					continue
				}
			}
		}
		if len(dst) == base {
			return dst, nil
		}
		var dropped int
		var err error
		dst, dropped, err = q.readBodies(dst, base, locs[:len(dst)-base])
		q.received.Add(int64(len(dst) - base))
		if err == nil && len(dst) == base && dropped > 0 && again > 0 {
			// Everything taken was damaged and dropped: look again, so that
			// another message's damage never ends this receive empty-handed.
			again--
			continue
		}
		return dst, err
	}
}

// maxMoveRounds and maxMoveTime bound the rounds of one receive whose
// every message was moved to the dead-letter queue: 16,384 messages, or a
// second (moves to another shard's queue that each succeed slowly: 256
// hops took 5.2 s, review G), then it answers as for an empty queue.
//
// hideRoundsAfterFailedHop bounds the rounds that only hide messages due
// for a move after a hop that failed in the same receive (hopFailed): up
// to 256 messages looked past for an Active one. Bounded by the two above
// only, one receive hid a 4,000-message backlog (a state record, and in a
// cluster a proposal, each round) while the target's shard had no leader
// (review X, 2026-12-07).
const (
	maxMoveRounds            = 1024
	maxMoveTime              = time.Second
	hideRoundsAfterFailedHop = 16
)

// nextMessage extends dst by one element, keeping that element's Body buffer.
func nextMessage(dst []Message) ([]Message, *Message) {
	n := len(dst)
	if n < cap(dst) {
		dst = dst[:n+1]
		old := &dst[n]
		dst[n] = Message{Body: old.Body[:0], Properties: old.Properties[:0], props: old.props[:0]}
	} else {
		dst = append(dst, Message{})
	}
	return dst, &dst[n]
}

// takeLocked pops up to want messages from the stripe's lanes, best first,
// not going below priority lane limit, and makes them Inactive. A message
// the queue's dead-letter policy says was received often enough is not
// returned but hidden and added to mv (deadletter.go; nil: the queue has
// no live policy), while mv has room.
func (st *stripe) takeLocked(now int64, want, limit int, dst []Message, locs []bodyLoc, mv *moves) []Message {
	if now < st.wheel.now {
		// The caller read its time before taking the lock, and another
		// goroutine has advanced the wheel past it since: a visibility
		// deadline computed from the older time could lie in the wheel's
		// past (seen: a panic in TestPush* with a fake clock that jumps).
		now = st.wheel.now
	}
	q := st.q
	visMs := q.meta().visMs
	for k := 0; k < want; k++ {
		p := bestLane(st.laneBits.Load())
		if p >= numLanes || p > limit {
			break
		}
		idx := st.lanes[p].head
		s := st.slab.at(idx)
		if mv != nil && s.dequeues >= mv.maxRecv {
			if mv.n == len(mv.locs) {
				break
			}
			hide := visMs
			if mv.held {
				hide = min(visMs, heldHide.Milliseconds())
			} else if mv.target == nil {
				// A hop to another broker may take up to moveTimeout: a
				// hide that ended first would leave a second copy.
				hide = max(visMs, 2*moveTimeout.Milliseconds())
			}
			st.hideForMoveLocked(idx, now, hide, mv)
			k--
			continue
		}
		st.laneRemoveLocked(idx)
		st.wheel.remove(&st.slab, idx)
		st.prefetchNextLocked(p)
		s.setState(stInactive)
		st.nActive--
		st.nInactive++
		s.gen++
		s.dequeues++
		enq := s.enqueueMs()
		// The offsets are unsigned: from the enqueue time at least. A
		// send stamped after this receive read its time (concurrent), or
		// by a clock ahead of this one (an old leader's), made them wrap
		// to 49.7 days: a FirstDequeueTime that far ahead, and a message
		// received and not deleted that never came back.
		at := max(now, enq)
		if s.dequeues == 1 {
			s.firstOff = uint32(at - enq)
		}
		s.visOff = uint32(at + visMs - enq)
		if !st.wheel.insert(&st.slab, idx, s.deadline()) {
			panic("engine: visibility deadline not in the future")
		}
		q.b.store.changeRecord(st, recState, idx)

		var m *Message
		dst, m = nextMessage(dst)
		m.ID = q.messageID(s.seq)
		m.Handle = q.key.issue(st.idx, idx, s.seq, s.gen)
		m.EnqueueTime = time.UnixMilli(enq)
		m.FirstDequeueTime = time.UnixMilli(s.firstDequeueMs())
		m.NextVisibleTime = time.UnixMilli(s.visibleMs())
		m.DequeueCount = int(s.dequeues)
		m.Priority = s.prio()
		locs[k] = bodyLoc{pos: s.bodyPos, size: s.recSize, slot: idx, seq: s.seq, stripe: st.idx}
	}
	return dst
}

// bodyReader is the scratch of reading a batch of bodies back, pooled so
// that a receive or peek allocates nothing (Broker.readers). It is also the
// sink a run of records is read into (storage.readRun).
type bodyReader struct {
	buf   []byte    // read buffer, kept across calls
	msgs  []Message // the batch being filled
	ord   [MaxBatch]uint8
	sizes [MaxBatch]int
	done  [MaxBatch]bool // msgs[i] has its body
	run   int            // index in ord of the first record of the run being read
}

// take implements runSink: record i of the current run was read.
func (r *bodyReader) take(i int, typ uint8, payload []byte) {
	j := r.ord[r.run+i]
	sum, props, body, err := bodyOf(typ, payload)
	if err != nil {
		return // readBody reads it again and reports it
	}
	m := &r.msgs[j]
	if m.setProps(props) != nil {
		return // likewise
	}
	m.MD5 = sum
	m.Body = append(m.Body[:0], body...)
	r.done[j] = true
}

func (b *Broker) getReader() *bodyReader {
	if r, ok := b.readers.Get().(*bodyReader); ok {
		return r
	}
	return &bodyReader{buf: make([]byte, 0, 4096)}
}

func (b *Broker) putReader(r *bodyReader) {
	r.msgs = nil
	b.readers.Put(r)
}

// readBodies fills in Body and MD5 of dst[base:] from the log. A message
// whose body moved (compaction) is looked up again; one that vanished in
// between (expired) is left out of the result. A message whose body is
// damaged is dropped (poison.go) and left out; dropped counts them. One whose
// body could not be read for another reason (an I/O error) is reported at
// Error level and left out, and stays where it is (a received one becomes
// visible again at its visibility timeout); the call fails only if it read
// nothing and dropped nothing.
func (q *Queue) readBodies(dst []Message, base int, locs []bodyLoc) (out []Message, dropped int, err error) {
	r := q.b.getReader()
	defer q.b.putReader(r)
	r.done = [MaxBatch]bool{}
	if len(locs) > 1 && len(locs) <= MaxBatch {
		q.readRuns(r, dst[base:], locs)
	}
	n := base
	var firstErr error
	for i := range locs {
		m := &dst[base+i]
		ok, err := true, error(nil)
		if i >= MaxBatch || !r.done[i] {
			ok, err = q.readBody(r, m, &locs[i])
		}
		if errors.Is(err, errDamaged) {
			if q.dropUnreadable(&locs[i], err) {
				dropped++
			}
			continue
		}
		if err != nil {
			// A broker closed under the read (a cluster member's step-down
			// rebuilds it) damaged nothing: no Error line for it (churn
			// audit). The message is received again after its timeout.
			lvl := slog.LevelError
			if errors.Is(err, ErrClosed) {
				lvl = slog.LevelInfo
			}
			q.b.log.Log(context.Background(), lvl, "message body could not be read; the message is not delivered", "queue", q.name,
				"message_id", q.messageID(locs[i].seq).String(), "pos", locs[i].pos, "err", err)
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if !ok {
			continue
		}
		if n != base+i {
			dst[n], dst[base+i] = dst[base+i], dst[n]
		}
		n++
	}
	if n == base && dropped == 0 && firstErr != nil {
		return dst[:base], 0, firstErr
	}
	return dst[:n], dropped, nil
}

// readRuns reads the bodies of a batch that lie back to back in the log (a
// batch that was sent together and is received in order) as runs
// (storage.readRun): the durable backend reads a run with one read instead of
// one per message, which on a drained backlog saves most of the read system
// calls. It fills in msgs[i] and sets r.done[i] for each body it read;
// anything else (a body moved by compaction, unreadable, a run of one) is
// left to readBody, which also reports errors.
func (q *Queue) readRuns(r *bodyReader, msgs []Message, locs []bodyLoc) {
	n := len(locs)
	for i := 0; i < n; i++ { // r.ord: locs indices by log position
		r.ord[i] = uint8(i)
		for k := i; k > 0 && locs[r.ord[k]].pos < locs[r.ord[k-1]].pos; k-- {
			r.ord[k], r.ord[k-1] = r.ord[k-1], r.ord[k]
		}
	}
	r.msgs = msgs
	for s := 0; s < n; {
		e := s + 1
		for e < n && locs[r.ord[e-1]].size > 0 && locs[r.ord[e]].pos == locs[r.ord[e-1]].pos+uint64(locs[r.ord[e-1]].size) {
			e++
		}
		if e-s >= 2 {
			for k := s; k < e; k++ {
				r.sizes[k-s] = int(locs[r.ord[k]].size)
			}
			r.run = s
			r.buf = q.b.store.readRun(locs[r.ord[s]].pos, r.sizes[:e-s], r.buf, r)
		}
		s = e
	}
}

func (q *Queue) readBody(r *bodyReader, m *Message, loc *bodyLoc) (bool, error) {
	for attempt := 0; ; attempt++ {
		typ, payload, buf, err := q.b.store.read(loc.pos, loc.size, r.buf)
		r.buf = buf
		if err == nil {
			sum, props, body, err := bodyOf(typ, payload)
			if err == nil {
				err = m.setProps(props)
			}
			if err != nil {
				return false, fmt.Errorf("engine: read body at %d: %w: %w", loc.pos, errDamaged, err)
			}
			m.MD5 = sum
			m.Body = append(m.Body[:0], body...)
			return true, nil
		}
		if err != errSegmentRemoved || attempt == 3 {
			return false, fmt.Errorf("engine: read body at %d: %w", loc.pos, err)
		}
		// The body was relocated after we looked: find it again.
		st := &q.stripes[loc.stripe]
		st.mu.Lock()
		// Checked before at: a dead stripe has no chunks, and one that
		// emptied and shrank (slab.go) none past its first.
		alive := !st.dead && st.slab.valid(loc.slot) && st.slab.at(loc.slot).seq == loc.seq
		if alive {
			s := st.slab.at(loc.slot)
			loc.pos, loc.size = s.bodyPos, s.recSize
		}
		st.mu.Unlock()
		if !alive {
			return false, nil
		}
	}
}

// Peek returns up to max Active messages, highest priority first, without
// changing them and without receipt handles (appended to dst). It never
// waits; with none Active it returns ErrMessageNotExist.
func (q *Queue) Peek(max int, dst []Message) ([]Message, error) {
	if err := q.b.readable(); err != nil {
		return dst, err
	}
	if max < 1 || max > MaxBatch {
		return dst, rangeErr("numOfMessages", 1, MaxBatch, "messages")
	}
	term, base := q.b.store.leading(), len(dst)
	dst, err := q.peek(max, dst, retryDamaged)
	return q.b.confirmRead(term, dst, base, err)
}

// retryDamaged bounds how often a receive or peek whose every message was
// dropped as damaged looks again.
const retryDamaged = 4

func (q *Queue) peek(max int, dst []Message, again int) ([]Message, error) {
	if q.dead.Load() {
		return dst, q.goneErr()
	}
	now := q.b.nowMs()
	type cand struct {
		loc               bodyLoc
		prio              int
		enq, first, order int64
		dequeues          uint32
	}
	var cands []cand
	for si := range q.stripes {
		st := &q.stripes[si]
		st.catchUp(now)
		st.mu.Lock()
		if st.dead {
			st.mu.Unlock()
			return dst, q.goneErr()
		}
		n := 0
		for p := 0; st.lanes != nil && p < numLanes && n < max; p++ {
			for idx := st.lanes[p].head; idx != nilSlot && n < max; idx = st.slab.at(idx).next {
				s := st.slab.at(idx)
				cands = append(cands, cand{
					loc:      bodyLoc{pos: s.bodyPos, size: s.recSize, slot: idx, seq: s.seq, stripe: st.idx},
					prio:     s.prio(),
					enq:      s.enqueueMs(),
					first:    s.firstDequeueMs(),
					order:    int64(n),
					dequeues: s.dequeues,
				})
				n++
			}
		}
		st.mu.Unlock()
	}
	if len(cands) == 0 {
		return dst, ErrMessageNotExist
	}
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := &cands[i], &cands[j]
		if a.prio != b.prio {
			return a.prio < b.prio
		}
		return a.order < b.order // lane order within a stripe, interleaved across stripes
	})
	if len(cands) > max {
		cands = cands[:max]
	}
	base := len(dst)
	locs := make([]bodyLoc, len(cands))
	for i := range cands {
		c := &cands[i]
		var m *Message
		dst, m = nextMessage(dst)
		m.ID = q.messageID(c.loc.seq)
		m.EnqueueTime = time.UnixMilli(c.enq)
		m.FirstDequeueTime = time.UnixMilli(c.first)
		m.DequeueCount = int(c.dequeues)
		m.Priority = c.prio
		locs[i] = c.loc
	}
	dst, dropped, err := q.readBodies(dst, base, locs)
	if err == nil && len(dst) == base {
		if dropped > 0 && again > 0 {
			return q.peek(max, dst[:base], again-1) // the candidates were damaged and dropped
		}
		err = ErrMessageNotExist
	}
	return dst, err
}
