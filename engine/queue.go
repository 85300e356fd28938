package engine

import (
	"crypto/md5"
	"errors"
	"sync/atomic"
	"time"

	"github.com/smqd/smqd/engine/internal/md5x"
	"github.com/smqd/smqd/wal"
)

// Queue is one message queue. All methods are safe for concurrent use.
//
// A queue owns S stripes (the unit of locking), its waiting receives (long
// polls) and its attributes. A message lives in exactly one stripe, chosen
// round robin at send; receive takes from the stripe whose best non-empty
// lane has the highest priority. No lock is ever held across stripes or
// across I/O.
type Queue struct {
	b       *Broker
	name    string
	id      uint64 // broker-unique, never reused: MessageIds carry it
	key     handleKey
	keysToo []handleKey // Options.AcceptHandleSecrets': accepted, never issued
	stripes []stripe

	cfg     atomic.Pointer[queueMeta] // immutable snapshots, replaced by SetQueueAttributes
	seq     atomic.Uint64             // last message sequence number handed out
	sendRR  atomic.Uint32
	recvRR  atomic.Uint32
	waiters waitQueue

	// Counters for metrics.
	sent, received, deleted, expired atomic.Int64
	unreadable                       atomic.Int64 // messages dropped as damaged (poison.go)
	deadLettered                     atomic.Int64 // messages moved to the dead-letter queue (deadletter.go)
	dead                             atomic.Bool  // deleted: every call fails with ErrQueueNotExist
}

// queueMeta is an immutable snapshot of a queue's attributes.
type queueMeta struct {
	cfg        QueueConfig
	createMs   int64
	modifyMs   int64
	visMs      int64 // cfg.VisibilityTimeout in ms
	delayMs    int64 // cfg.Delay in ms
	retainMs   int64 // cfg.Retention in ms
	maxBody    int
	pollWaitMs int64
	maxRecv    uint32 // cfg.MaxReceiveCount: 0 = no dead-letter policy
}

func newQueueMeta(cfg QueueConfig, createMs, modifyMs int64) *queueMeta {
	return &queueMeta{
		cfg:        cfg,
		createMs:   createMs,
		modifyMs:   modifyMs,
		visMs:      cfg.VisibilityTimeout.Milliseconds(),
		delayMs:    cfg.Delay.Milliseconds(),
		retainMs:   cfg.Retention.Milliseconds(),
		maxBody:    cfg.MaxMessageBytes,
		pollWaitMs: cfg.PollingWait.Milliseconds(),
		maxRecv:    uint32(cfg.MaxReceiveCount),
	}
}

func newQueue(b *Broker, name string, id uint64, nstripes int, meta *queueMeta) *Queue {
	q := &Queue{b: b, name: name, id: id}
	q.key, q.keysToo = b.queueKey(id), b.acceptedKeys(id)
	q.cfg.Store(meta)
	q.seq.Store(b.store.seqBase())
	q.stripes = make([]stripe, nstripes)
	now := b.nowMs()
	for i := range q.stripes {
		q.stripes[i].init(q, i, now)
	}
	q.waiters.init()
	return q
}

// Name returns the queue's name.
func (q *Queue) Name() string { return q.name }

func (q *Queue) meta() *queueMeta { return q.cfg.Load() }

// sendBatch is the per-call scratch of Send, pooled so a send allocates
// nothing per message.
type sendBatch struct {
	recs  [MaxBatch]logRec
	heads [MaxBatch][bodyHeadLen]byte // the body records' heads (storage.bodyRecord)
	slots [MaxBatch]uint32
	delay [MaxBatch]int64
	props []byte // scratch: one entry's encoded properties (props.go)
}

// appendSendMD5s appends a result per entry holding the MD5 of its body,
// eight bodies at a time where the CPU can (md5x: at batch 16 with 1 KiB
// bodies, one by one was 8 % of the server's CPU).
func appendSendMD5s(out []SendResult, entries []SendEntry) []SendResult {
	var bodies [md5x.Lanes][]byte
	var sums [md5x.Lanes][md5.Size]byte
	for i := 0; i < len(entries); i += md5x.Lanes {
		k := min(md5x.Lanes, len(entries)-i)
		for j := 0; j < k; j++ {
			bodies[j] = entries[i+j].Body
		}
		md5x.Sum8(&bodies, k, &sums)
		for j := 0; j < k; j++ {
			out = append(out, SendResult{MD5: sums[j]})
		}
	}
	return out
}

// Send stores a batch of 1..16 messages. The whole batch is validated first;
// an invalid entry fails the call with an *ArgumentError and nothing is
// stored. In durable mode Send returns after the batch is acknowledged by the
// log's sync mode. Results are appended to out in entry order.
func (q *Queue) Send(entries []SendEntry, out []SendResult) ([]SendResult, error) {
	if err := q.b.usable(); err != nil {
		return out, err
	}
	m := q.meta()
	n := len(entries)
	if n < 1 || n > MaxBatch {
		return out, argErr("Messages", "must hold between 1 and %d messages", MaxBatch)
	}
	total := 0
	for i := range entries {
		e := &entries[i]
		if len(e.Body) == 0 {
			return out, argErr("MessageBody", "must not be empty")
		}
		if len(e.Body) > m.maxBody {
			return out, argErr("MessageBody", "is %d bytes, more than the queue's MaximumMessageSize of %d bytes", len(e.Body), m.maxBody)
		}
		if e.Priority != 0 && (e.Priority < MinPriority || e.Priority > MaxPriority) {
			return out, rangeErr("Priority", MinPriority, MaxPriority, "")
		}
		if e.HasDelay {
			if err := checkDuration("DelaySeconds", e.Delay, 0, MaxDelay); err != nil {
				return out, err
			}
		} else if e.Delay != 0 {
			// Not silently the queue's delay instead of the one asked for.
			return out, argErr("DelaySeconds", "is set without HasDelay (set HasDelay for a message's own delay; false means the queue's DelaySeconds)")
		}
		need := maxMoveHead + len(e.Body)
		if len(e.Properties) > 0 {
			n, err := checkProps(e.Properties)
			if err != nil {
				return out, err
			}
			need += n
		}
		if need > q.b.maxRecord {
			// Only with a log smaller than its defaults (Options.WAL): the
			// append failed as a storage failure, and the broker refused
			// every change until reopened (embedding audit 2, 2026-12-06).
			return out, argErr("MessageBody", "with its properties may need a log record of %d bytes (as a dead letter), more than this broker's log takes in one (%d: Options.WAL.SegmentBytes and BufferBytes)", need, q.b.maxRecord)
		}
		total += len(e.Body)
	}
	if n > 1 && total > MaxBatchBodyBytes {
		return out, argErr("Messages", "carry %d body bytes, more than the batch limit of %d bytes", total, MaxBatchBodyBytes)
	}
	if err := q.b.store.acceptNew(); err != nil {
		return out, err
	}

	sb, _ := q.b.sendPool.Get().(*sendBatch)
	if sb == nil {
		sb = new(sendBatch)
	}
	defer q.b.sendPool.Put(sb)
	base := len(out)
	out = appendSendMD5s(out, entries)
	res := out[base:]

	st := &q.stripes[int(q.sendRR.Add(1))%len(q.stripes)]
	now := q.b.nowMs()
	store := q.b.store

	// Phase 1: reserve slots (pending: invisible to everything else).
	st.mu.Lock()
	if st.dead {
		st.mu.Unlock()
		return out[:base], q.goneErr()
	}
	// Never behind the wheel: a clock stepped back (one that is not
	// SystemClock's) made a message whose retention was shorter than the
	// step expire as it was sent, and one whose delay was ignored.
	now = max(now, st.wheel.now)
	for i := range entries {
		e := &entries[i]
		idx, ok := st.slab.alloc()
		if !ok {
			for j := 0; j < i; j++ {
				st.slab.release(sb.slots[j])
			}
			st.mu.Unlock()
			return out[:base], argErr("Messages", "stripe is full")
		}
		prio := e.Priority
		if prio == 0 {
			prio = DefaultPriority
		}
		delay := m.delayMs
		if e.HasDelay {
			delay = e.Delay.Milliseconds()
		}
		s := st.slab.at(idx)
		s.seq = q.seq.Add(1)
		s.setMeta(now, prio, stPending)
		s.visOff = uint32(delay)
		s.expOff = uint32(m.retainMs)
		s.tnext, s.tprev = nilSlot, nilSlot
		s.next, s.prev = nilSlot, nilSlot
		sb.slots[i] = idx
		sb.delay[i] = delay
		res[i].ID = q.messageID(s.seq)
		var props []byte
		if len(e.Properties) > 0 {
			props = appendProps(sb.props[:0], e.Properties)
			sb.props = props[:0]
		}
		store.bodyRecord(&sb.recs[i], &sb.heads[i], q.id, st.idx, idx, s, &res[i].MD5, props, e.Body, false)
	}
	st.mu.Unlock()

	// Phase 2: append the bodies and wait for the sync mode's acknowledgement.
	recs := sb.recs[:n]
	err := store.waitRoom()
	if err == nil {
		err = store.append(recs)
	}
	if err == nil {
		err = store.waitDurable(recs[n-1].pos)
		if err != nil {
			for i := range recs {
				store.addLive(recs[i].pos, -int64(recs[i].size))
			}
		}
	}
	if err != nil {
		if errors.Is(err, wal.ErrRecordTooLarge) {
			// Nothing was written: a record outgrows the log's write
			// buffer (a BufferBytes below the defaults; a batch larger
			// than it is taken, wal invariant 12). The caller's error,
			// not the storage's (as in Publish).
			err = argErr("Messages", "need more than this broker's log takes in one write (Options.WAL.BufferBytes): send fewer at once (%v)", err)
		} else {
			q.b.storageFailed(err)
		}
		st.mu.Lock()
		if !st.dead {
			for i := 0; i < n; i++ {
				st.slab.release(sb.slots[i])
			}
		}
		st.mu.Unlock()
		clear(sb.recs[:n])
		return out[:base], err
	}

	// Phase 3: make the messages Delayed or Active.
	activated := 0
	now = q.b.nowMs() // the wait may have been long; the times stay those of the send
	st.mu.Lock()
	if st.dead {
		st.mu.Unlock()
		for i := range recs {
			store.addLive(recs[i].pos, -int64(recs[i].size))
		}
		clear(sb.recs[:n])
		return out[:base], q.goneErr()
	}
	// Messages whose delay or visibility ended before now go first: the
	// stripe's timer may not have run yet (it fires late under load), and
	// a message sent now must not overtake them in their lane.
	activated += st.advanceLocked(now)
	for i := 0; i < n; i++ {
		idx := sb.slots[i]
		s := st.slab.at(idx)
		s.bodyPos = recs[i].pos
		s.recSize = recs[i].size
		if sb.delay[i] > 0 {
			s.setState(stDelayed)
			st.nDelayed++
			// The handle of a delayed send (generation 0, handle.go): it
			// deletes or changes the message until it becomes visible.
			res[i].Handle = q.key.issue(st.idx, idx, s.seq, s.gen)
			activated += st.armLocked(idx, now)
		} else {
			activated += st.activateLocked(idx)
		}
	}
	st.scheduleLocked(now)
	st.flushLocked()
	st.mu.Unlock()
	clear(sb.recs[:n])

	q.sent.Add(int64(n))
	if activated > 0 {
		q.waiters.wake(activated)
	}
	return out, nil
}

// goneErr is the error for a stripe found dead: the queue was deleted, or
// the broker closed.
func (q *Queue) goneErr() error {
	if q.b.closed.Load() {
		return ErrClosed
	}
	return ErrQueueNotExist
}

// lookupLocked finds the message a handle names and checks that the handle
// is still the current one. The stripe must have been advanced to now.
func (st *stripe) lookupLocked(h ReceiptHandle, now int64) (uint32, error) {
	if !st.slab.valid(h.slot) {
		return 0, ErrMessageNotExist
	}
	s := st.slab.at(h.slot)
	if state := s.state(); s.seq != h.seq || (state != stInactive && state != stDelayed) || s.gen != h.gen || s.visibleMs() <= now {
		return 0, ErrMessageNotExist
	}
	return h.slot, nil
}

// uncountLocked takes a Delayed or Inactive slot out of its state's count.
func (st *stripe) uncountLocked(s *slot) {
	if s.state() == stDelayed {
		st.nDelayed--
	} else {
		st.nInactive--
	}
}

// checkHandle verifies a handle's keyed check and stripe.
func (q *Queue) checkHandle(h ReceiptHandle) error {
	if int(h.stripe) >= len(q.stripes) {
		return ErrReceiptHandleError
	}
	if q.key.verify(h) {
		return nil
	}
	for i := range q.keysToo {
		if q.keysToo[i].verify(h) {
			return nil
		}
	}
	return ErrReceiptHandleError
}

// Delete deletes the messages named by 1..16 receipt handles. errs (same
// length as handles) receives each handle's outcome: nil, ErrMessageNotExist
// (stale, used, expired) or ErrReceiptHandleError (not issued here). failed
// counts the non-nil ones; err reports a failure of the whole call.
func (q *Queue) Delete(handles []ReceiptHandle, errs []error) (failed int, err error) {
	return q.delete(handles, errs, true)
}

// delete is Delete; durable false returns without waiting for the records
// to be durable (the pusher's deletes: one lost in a crash means a push
// repeated, which at-least-once delivery allows).
func (q *Queue) delete(handles []ReceiptHandle, errs []error, durable bool) (failed int, err error) {
	if err := q.b.usable(); err != nil {
		return 0, err
	}
	if len(handles) < 1 || len(handles) > MaxBatch {
		return 0, argErr("ReceiptHandles", "must hold between 1 and %d receipt handles", MaxBatch)
	}
	if len(errs) < len(handles) {
		return 0, argErr("errs", "is shorter than handles")
	}
	if err := q.b.store.waitRoom(); err != nil {
		return 0, err
	}
	if err := q.b.store.stalled(); err != nil {
		return 0, err // refused before anything changes: its record could not be made durable now
	}
	if err := q.b.store.enter(); err != nil {
		return 0, err
	}
	now := q.b.nowMs()
	var st *stripe
	deleted := 0
	var last uint64 // the last record appended, to wait for (durable.go)
	logged := false
	var logErr error
	unlock := func() {
		if st != nil {
			st.scheduleLocked(now)
			if pos, ok, err := st.flushLocked(); ok {
				last, logged = max(last, pos), true
			} else if err != nil && logErr == nil {
				logErr = err
			}
			st.slab.giveBack() // a queue drained and left idle (slab.go)
			st.mu.Unlock()
			st = nil
		}
	}
	for i, h := range handles {
		if e := q.checkHandle(h); e != nil {
			errs[i] = e
			failed++
			continue
		}
		if s := &q.stripes[h.stripe]; s != st {
			unlock()
			st = s
			st.mu.Lock()
			if st.dead {
				st.mu.Unlock()
				q.b.store.leave()
				return failed, q.goneErr()
			}
			if n := st.advanceLocked(now); n > 0 {
				defer q.waiters.wake(n)
			}
		}
		idx, e := st.lookupLocked(h, now)
		if e != nil {
			errs[i] = e
			failed++
			continue
		}
		s := st.slab.at(idx)
		st.wheel.remove(&st.slab, idx)
		st.uncountLocked(s)
		q.b.store.changeRecord(st, recDelete, idx)
		q.b.store.addLive(s.bodyPos, -int64(s.recSize))
		st.slab.release(idx)
		errs[i] = nil
		deleted++
	}
	unlock()
	q.b.store.leave()
	q.deleted.Add(int64(deleted))
	// A delete is acknowledged as durable as a send (sync mode always:
	// after its fsync, riding the same group commit).
	if logErr == nil && logged && durable {
		logErr = q.b.store.waitDurable(last)
	}
	if logErr != nil {
		q.b.storageFailed(logErr)
		return failed, logErr
	}
	return failed, nil
}

// ChangeVisibility makes the message named by h visible again after timeout
// (1 s .. 12 h from now) and returns its new receipt handle and
// NextVisibleTime; h stops working. The handle of a delayed send moves the
// end of the message's delay (it stays Delayed until then).
func (q *Queue) ChangeVisibility(h ReceiptHandle, timeout time.Duration) (ReceiptHandle, time.Time, error) {
	return q.changeVisibility(h, timeout, true)
}

// changeVisibility is ChangeVisibility; with durable false it does not
// wait for its record to be durable (the pusher's lease renewals: one lost
// in a crash repeats a push, which at-least-once allows).
func (q *Queue) changeVisibility(h ReceiptHandle, timeout time.Duration, durable bool) (ReceiptHandle, time.Time, error) {
	if err := q.b.usable(); err != nil {
		return ReceiptHandle{}, time.Time{}, err
	}
	if err := checkDuration("VisibilityTimeout", timeout, MinVisibilityTimeout, MaxVisibilityTimeout); err != nil {
		return ReceiptHandle{}, time.Time{}, err
	}
	return q.revisit(h, timeout, durable, false)
}

// giveBack makes a message the pusher received but never tried (its
// worker stopped first: a shutdown, a lost lead) visible again at once,
// and takes its receive back from its DequeueCount, which is the attempt
// number of its retry schedule: every clean restart cost each such
// notification an attempt it never had (push audit, 2026-12-06: 66 of 100
// discarded after 3 real attempts of 4). Not waited for: one lost in a
// crash leaves the message as it was. It runs while the broker closes
// (the pusher stops first), so it does not ask usable.
func (q *Queue) giveBack(h ReceiptHandle) error {
	_, _, err := q.revisit(h, 0, false, true)
	return err
}

// revisit sets the message of h visible timeout from now (0: at once),
// with a record; back also takes its last receive off its DequeueCount.
func (q *Queue) revisit(h ReceiptHandle, timeout time.Duration, durable, back bool) (ReceiptHandle, time.Time, error) {
	if err := q.checkHandle(h); err != nil {
		return ReceiptHandle{}, time.Time{}, err
	}
	if err := q.b.store.waitRoom(); err != nil {
		return ReceiptHandle{}, time.Time{}, err
	}
	if err := q.b.store.stalled(); err != nil {
		return ReceiptHandle{}, time.Time{}, err // as delete: refused before anything changes
	}
	enter := q.b.store.enter
	if r, ok := q.b.store.(*replStore); ok && back {
		enter = r.enterGiveBack // a yielding leader's stopped push workers (Yield)
	}
	if err := enter(); err != nil {
		return ReceiptHandle{}, time.Time{}, err
	}
	now := q.b.nowMs()
	st := &q.stripes[h.stripe]
	st.mu.Lock()
	if st.dead {
		st.mu.Unlock()
		q.b.store.leave()
		return ReceiptHandle{}, time.Time{}, q.goneErr()
	}
	woken := st.advanceLocked(now)
	idx, err := st.lookupLocked(h, now)
	var nh ReceiptHandle
	var next int64
	if err == nil {
		s := st.slab.at(idx)
		st.wheel.remove(&st.slab, idx)
		s.gen++
		if back && s.dequeues > 0 {
			if s.dequeues--; s.dequeues == 0 {
				s.firstOff = 0
			}
		}
		// From the wheel's time at least (a clock stepped back would
		// arm a deadline already past: a push retry fired at once, all
		// its retries in a burst), and from the enqueue time at least:
		// the offset is unsigned, and a clock behind the one that
		// stamped the message (a new leader's, a step back) made it
		// wrap to 49.7 days (the message never came back).
		at := max(now, st.wheel.now, s.enqueueMs())
		s.visOff = uint32(at + timeout.Milliseconds() - s.enqueueMs())
		woken += st.armLocked(idx, now)
		q.b.store.changeRecord(st, recState, idx)
		nh = q.key.issue(st.idx, idx, s.seq, s.gen)
		next = s.visibleMs()
	}
	st.scheduleLocked(now)
	last, logged, logErr := st.flushLocked()
	st.mu.Unlock()
	q.b.store.leave()
	if woken > 0 {
		q.waiters.wake(woken)
	}
	if err != nil {
		return ReceiptHandle{}, time.Time{}, err
	}
	// Acknowledged as durable as a send (see Delete).
	if logErr == nil && logged && durable {
		logErr = q.b.store.waitDurable(last)
	}
	if logErr != nil {
		q.b.storageFailed(logErr)
		return ReceiptHandle{}, time.Time{}, logErr
	}
	return nh, time.UnixMilli(next), nil
}

// Attributes returns the queue's attributes and exact message counts.
func (q *Queue) Attributes() (QueueInfo, error) {
	if err := q.b.readable(); err != nil {
		return QueueInfo{}, err
	}
	now := q.b.nowMs()
	m := q.meta()
	info := QueueInfo{
		Name:           q.name,
		Config:         m.cfg,
		CreateTime:     time.Unix(m.createMs/1000, 0),
		LastModifyTime: time.Unix(m.modifyMs/1000, 0),
	}
	for i := range q.stripes {
		st := &q.stripes[i]
		st.catchUp(now)
		st.mu.Lock()
		if st.dead {
			st.mu.Unlock()
			return QueueInfo{}, q.goneErr()
		}
		info.Active += int64(st.nActive)
		info.Inactive += int64(st.nInactive)
		info.Delayed += int64(st.nDelayed)
		st.mu.Unlock()
	}
	return info, nil
}

// snapBytes returns n scratch bytes valid until flushLocked.
func (st *stripe) snapBytes(n int) []byte {
	if cap(st.snap)-len(st.snap) < n {
		// Earlier records keep pointing into the old array, which stays valid.
		st.snap = make([]byte, 0, max(4096, 2*cap(st.snap)))
	}
	l := len(st.snap)
	st.snap = st.snap[:l+n]
	return st.snap[l : l+n : l+n]
}

// counts returns the stripe totals without advancing (for stats).
func (q *Queue) counts() (active, inactive, delayed, oldestMs int64) {
	for i := range q.stripes {
		st := &q.stripes[i]
		st.mu.Lock()
		active += int64(st.nActive)
		inactive += int64(st.nInactive)
		delayed += int64(st.nDelayed)
		if t := st.oldestActiveLocked(); t != 0 && (oldestMs == 0 || t < oldestMs) {
			oldestMs = t
		}
		st.mu.Unlock()
	}
	return
}
