package engine

// A stripe: the unit of locking of a queue.
//
// A stripe owns its slab of message slots, 16 priority lanes (FIFO lists of
// Active slots, lane p holding priority p+1), a bitmap of non-empty lanes, a
// timing wheel driving delay ends, visibility ends and expiry, the exact
// counts of its Delayed, Active and Inactive messages, and one clock timer set
// to the wheel's next event.
//
// Invariants (checked by checkLocked in tests):
//  1. laneBits bit p is set exactly when lane p is non-empty (lanes is nil,
//     every lane empty, until the first push).
//  2. Every Active slot is in the lane of its priority and in the wheel (at
//     its expiry); every Delayed or Inactive slot is in the wheel only (at
//     min(visible, expiry)); pending and free slots are in neither.
//  3. nActive, nInactive, nDelayed equal the number of slots in each state.
//  4. After advanceLocked(now), no linked slot has a deadline <= now.
//  5. due is a lower bound of the wheel's next event (MaxInt64 when empty);
//     a receive that finds due <= now advances the stripe first, so a short
//     poll never misses a message whose delay or visibility timeout has ended.
//
// Owner: mu guards everything except laneBits and due, which are written
// under mu and read without it.

import (
	"cmp"
	"errors"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

const numLanes = MaxPriority

type lane struct{ head, tail uint32 }

// stripe's size is a multiple of 64 bytes (TestStripeSize): a queue's
// stripes are one allocation, which Go's size classes start on a 64-byte
// boundary, so no cache line holds two stripes' fields. An empty queue's
// stripes cost 4 x 192 bytes (the wheel's buckets come with the first
// timed entry). Add fields in whole cache lines, or pad.
type stripe struct {
	mu    sync.Mutex
	q     *Queue
	slab  slab
	wheel timingWheel
	lanes *[numLanes]lane // allocated at the first push (newLanes): an empty queue's stripes hold none

	laneBits   atomic.Uint32 // bit p: lane p non-empty
	idx        uint8
	timerArmed bool
	dead       bool         // the queue was deleted or the broker closed
	due        atomic.Int64 // lower bound of the next wheel event, ms

	nActive, nInactive, nDelayed int32 // a stripe holds fewer than 2^32 slots

	timer   Timer // fires at timerAt to advance the wheel
	timerAt int64

	recs []logRec // records of changes made under mu, appended by flushLocked (storage.changeRecord)
	snap []byte   // scratch bytes for the records' heads
}

func (st *stripe) init(q *Queue, idx int, now int64) {
	st.q = q
	st.idx = uint8(idx)
	st.slab = newSlab()
	st.wheel = newTimingWheel(now)
	st.due.Store(math.MaxInt64)
}

// newLanes returns 16 empty lanes.
func newLanes() *[numLanes]lane {
	l := new([numLanes]lane)
	for p := range l {
		l[p] = lane{nilSlot, nilSlot}
	}
	return l
}

// lanePushLocked appends slot i to the tail of its priority's lane.
func (st *stripe) lanePushLocked(i uint32) {
	s := st.slab.at(i)
	p := s.prio() - 1
	if st.lanes == nil {
		st.lanes = newLanes()
	}
	ln := &st.lanes[p]
	s.next, s.prev = nilSlot, ln.tail
	if ln.tail != nilSlot {
		st.slab.at(ln.tail).next = i
	} else {
		ln.head = i
		st.laneBits.Store(st.laneBits.Load() | 1<<uint(p))
	}
	ln.tail = i
}

// oldestActiveLocked returns the earliest EnqueueTime (Unix ms) of the
// messages at the heads of st's lanes, 0 when none is Active. A lane is in
// the order its messages became Active, so a message made visible again
// after a receive counts once it reaches its lane's head.
func (st *stripe) oldestActiveLocked() int64 {
	var oldest int64
	for lb := st.laneBits.Load(); lb != 0; lb &= lb - 1 {
		e := st.slab.at(st.lanes[bits.TrailingZeros32(lb)].head).enqueueMs()
		if oldest == 0 || e < oldest {
			oldest = e
		}
	}
	return oldest
}

// laneRemoveLocked unlinks slot i from its lane.
func (st *stripe) laneRemoveLocked(i uint32) {
	s := st.slab.at(i)
	p := s.prio() - 1
	ln := &st.lanes[p]
	if s.prev != nilSlot {
		st.slab.at(s.prev).next = s.next
	} else {
		ln.head = s.next
	}
	if s.next != nilSlot {
		st.slab.at(s.next).prev = s.prev
	} else {
		ln.tail = s.prev
	}
	s.next, s.prev = nilSlot, nilSlot
	if ln.head == nilSlot {
		st.laneBits.Store(st.laneBits.Load() &^ (1 << uint(p)))
	}
}

// bestLane returns the index of the best non-empty lane, or numLanes.
func bestLane(laneBits uint32) int {
	if laneBits == 0 {
		return numLanes
	}
	return bits.TrailingZeros32(laneBits)
}

// armLocked puts slot i into the wheel at its deadline, or handles it at once
// if that deadline has already passed. It returns the number of messages that
// became Active.
func (st *stripe) armLocked(i uint32, now int64) int {
	if now < st.wheel.now {
		now = st.wheel.now // a caller's time read before the lock may lag the wheel
	}
	s := st.slab.at(i)
	if s.deadline() <= now || !st.wheel.insert(&st.slab, i, s.deadline()) {
		return st.fireLocked(i, now)
	}
	return 0
}

// insertFutureLocked puts Delayed or Inactive slot i into the wheel at its
// deadline, which its caller (a rebuild, a replica's apply) has checked is
// after the wheel's time. A refusal would leave the slot in no lane and no
// bucket, a message never seen again: it is a bug, and stops the process.
func (st *stripe) insertFutureLocked(i uint32) {
	if !st.wheel.insert(&st.slab, i, st.slab.at(i).deadline()) {
		panic("engine: stripe wheel refused a deadline its caller found in the future")
	}
}

// activateLocked makes a Delayed, Inactive or pending slot Active.
func (st *stripe) activateLocked(i uint32) int {
	s := st.slab.at(i)
	s.setState(stActive)
	st.nActive++
	st.lanePushLocked(i)
	if !st.wheel.insert(&st.slab, i, s.expireMs()) {
		st.expireLocked(i)
		return 0
	}
	return 1
}

// fireLocked handles slot i whose wheel deadline has passed (it is not in the
// wheel). It returns the number of messages that became Active.
func (st *stripe) fireLocked(i uint32, now int64) int {
	if now < st.wheel.now {
		now = st.wheel.now
	}
	s := st.slab.at(i)
	if s.expireMs() <= now {
		st.expireLocked(i)
		return 0
	}
	switch s.state() {
	case stDelayed:
		if s.visibleMs() <= now {
			st.nDelayed--
			return st.activateLocked(i)
		}
	case stInactive:
		if s.visibleMs() <= now {
			st.nInactive--
			return st.activateLocked(i)
		}
	}
	// Not due after all (fired early by a caller whose clock went
	// backwards): put it back; the deadline is after now >= the wheel's time.
	if !st.wheel.insert(&st.slab, i, s.deadline()) {
		panic("engine: stripe wheel refused a future deadline")
	}
	return 0
}

// expireLocked removes an expired message (any state).
func (st *stripe) expireLocked(i uint32) {
	st.dropLocked(i, recExpire)
	st.q.expired.Add(1)
}

// dropLocked removes slot i's message (Active, Inactive or Delayed) with a
// record of type typ (a delete or an expiry) and frees the slot.
func (st *stripe) dropLocked(i uint32, typ uint8) {
	s := st.slab.at(i)
	st.unlinkLocked(i)
	st.q.b.store.changeRecord(st, typ, i)
	st.q.b.store.addLive(s.bodyPos, -int64(s.recSize))
	st.slab.release(i)
}

// advanceLocked brings the wheel to now and returns how many messages became
// Active.
func (st *stripe) advanceLocked(now int64) int {
	activated := 0
	st.wheel.advance(&st.slab, now, func(i uint32) {
		activated += st.fireLocked(i, now)
	})
	return activated
}

// scheduleLocked publishes the wheel's next event in due and makes sure the
// timer fires no later than it.
func (st *stripe) scheduleLocked(now int64) {
	t, ok := st.wheel.next()
	if !ok {
		st.due.Store(math.MaxInt64)
		return
	}
	st.due.Store(t)
	if st.dead || (st.timerArmed && st.timerAt <= t) {
		return
	}
	d := time.Duration(t-now) * time.Millisecond
	if d < 0 {
		d = 0
	}
	if st.timer == nil {
		st.timer = st.q.b.clock.AfterFunc(d, st.onTimer)
	} else {
		st.timer.Reset(d)
	}
	st.timerArmed, st.timerAt = true, t
}

// onTimer runs when the wheel's next event is due.
func (st *stripe) onTimer() {
	q := st.q
	st.mu.Lock()
	st.timerArmed = false
	if st.dead {
		st.mu.Unlock()
		return
	}
	now := q.b.nowMs()
	n := st.advanceLocked(now)
	st.scheduleLocked(now)
	st.flushLocked()
	st.slab.giveBack() // expiries may have drained it
	st.mu.Unlock()
	if n > 0 {
		q.waiters.wake(n)
	}
}

// catchUp advances the stripe if its next event is due; used by receive,
// peek and attribute reads so that they see the state at now exactly.
func (st *stripe) catchUp(now int64) {
	if st.due.Load() > now {
		return
	}
	st.mu.Lock()
	n := 0
	if !st.dead {
		n = st.advanceLocked(now)
		st.scheduleLocked(now)
		st.flushLocked()
		st.slab.giveBack()
	}
	st.mu.Unlock()
	if n > 0 {
		st.q.waiters.wake(n)
	}
}

// killLocked drops every message of the stripe (queue deleted or broker
// closed): it stops the timer and returns the live bytes to the store.
func (st *stripe) killLocked() {
	st.dead = true
	if st.timer != nil {
		st.timer.Stop()
		st.timerArmed = false
	}
	for i := uint32(0); i < st.slab.n; i++ {
		if !st.slab.valid(i) {
			i = nextChunk(i) - 1
			continue
		}
		s := st.slab.at(i)
		if s.seq != 0 && s.state() != stPending {
			st.q.b.store.addLive(s.bodyPos, -int64(s.recSize))
		}
	}
	st.slab = newSlab()
	st.wheel = newTimingWheel(st.wheel.now)
	st.lanes = nil
	st.laneBits.Store(0)
	st.due.Store(math.MaxInt64)
	st.nActive, st.nInactive, st.nDelayed = 0, 0, 0
}

// flushChunk bounds the records of one append of flushLocked: 512
// expiries frame to about 39 KB, within the smallest ring the log takes
// (64 KiB).
const flushChunk = 512

// flushLocked appends the records gathered under mu (storage.changeRecord)
// in one call, keeping the log order equal to the order of the changes. It
// returns the position of the last record appended and whether there was
// one (ok is false also when the append failed: err says why).
//
// More than flushChunk records go in appends of flushChunk: an advance of
// the wheel after a pause (a process stopped, a VM resumed, a clock step)
// gathers that many, each an expiry of its own that needs no other, and so
// does a purge's chunk (purge.go), deletes that need no other either. In
// one append, 55,000 expiries of a stripe outgrew the log's 4 MiB ring, the
// append failed, and the broker refused every change until it reopened
// (recovery audit, 2026-12-06).
func (st *stripe) flushLocked() (last uint64, ok bool, err error) {
	if len(st.recs) == 0 {
		return 0, false, nil
	}
	ok = true
	for recs := st.recs; len(recs) > 0; recs = recs[min(len(recs), flushChunk):] {
		n := min(len(recs), flushChunk)
		e := st.q.b.store.append(recs[:n])
		if e == nil {
			last = recs[n-1].pos
			continue
		}
		st.q.b.storageFailed(e)
		ok, err = false, cmp.Or(err, e)
		if !errors.Is(e, ErrNotLeader) {
			break
		}
		// A replica refuses records it may not log, and remembers the
		// expiries among them (replica_expiry.go invariant 1): every chunk
		// must reach it, or the expiries of the chunks after the first
		// were forgotten, and a later chunk's own records did not mark
		// the broker diverged (review, 2026-12-06).
	}
	for i := range st.recs {
		st.recs[i] = logRec{}
	}
	st.recs = st.recs[:0]
	st.snap = st.snap[:0]
	return last, ok, err
}
