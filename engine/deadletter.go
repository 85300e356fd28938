package engine

// Dead-letter queues: a queue's dead-letter policy (QueueConfig
// DeadLetterQueue and MaxReceiveCount) moves a message that was received
// MaxReceiveCount times to the dead-letter queue, instead of handing it out
// once more.
//
// When: a receive that finds such a message at the head of a lane
// (takeLocked) hides it for one visibility timeout, as a receive would but
// without counting a dequeue or issuing a handle, and moves it after
// releasing the stripe lock (deadLetter). So a message is moved when it
// would be received for the (MaxReceiveCount+1)th time; one nobody asks for
// again stays where it is.
//
// How (moveOne), never holding two stripe locks:
//
//  1. read its body and properties (as a receive does);
//  2. reserve a slot in a stripe of the target queue (pending: invisible,
//     as for a send): a new MessageId, the source's EnqueueTime and expiry
//     (the retention is not reset), priority, DequeueCount 0, visible now;
//  3. under the source stripe's lock, check that the message is still the
//     one hidden in step 0 (seq, generation, Inactive), append one
//     dead-letter record (record.go type 23: the source's snapshot, then the
//     message as it enters the target, its body and properties plus the
//     three DLQ system properties) and free the source slot;
//  4. wait until the record is durable (as a send does; once for all the
//     moves of a receive, finishMoves), then make the new message Active
//     in the target.
//
// Invariants:
//  1. A move is one log record. Replay (fold.go, apply.go) applies both of
//     its effects or, if the record did not survive, neither: after a crash
//     the message is in exactly one of the two queues, never lost, never in
//     both.
//  2. No record about the source message follows its dead-letter record:
//     the record is appended under the source stripe's lock, after checking
//     that the slot still holds the hidden message, and the slot is freed in
//     the same critical section.
//  3. No record about the target message precedes its dead-letter record:
//     until step 4 its slot is pending, which nothing else touches.
//
// A policy whose target queue no longer exists (it was deleted after the
// policy was set) is inert: messages are received as if there were none,
// and the policy applies again once a queue of that name exists. A target
// held by another broker (a cluster's other shards) is reached through the
// broker's DeadLetterRouter, in two steps instead of one record
// (deadletter_elsewhere.go).
//
// Owner: the stripes' mutexes, as for every message change.

import (
	"crypto/md5"
	"errors"
	"time"
)

// moveLoc is a message hidden for a move.
type moveLoc struct {
	loc   bodyLoc
	gen   uint32 // the generation the hide gave it
	enqMs int64
	expMs int64
	prio  int
}

// moves collects the messages a receive hid for a move, to target, of
// messages received maxRecv times (tryReceive makes one only for a queue
// with a live policy).
type moves struct {
	target    *Queue
	elsewhere string // the target's name when a router holds it (deadletter_elsewhere.go); target is nil then
	maxRecv   uint32
	locs      [MaxBatch]moveLoc
	n         int
	held      bool // Options.MovesHeld: hide them briefly and move none (heldHide)
}

// deadLetterTarget returns the queue a policy of m moves messages to, or
// nil if m has no policy or its target does not exist.
func (q *Queue) deadLetterTarget(m *queueMeta) *Queue {
	if m.maxRecv == 0 {
		return nil
	}
	t, _ := q.b.Queue(m.cfg.DeadLetterQueue)
	if t == nil || t == q || t.dead.Load() {
		return nil
	}
	return t
}

// checkDeadLetterTarget checks cfg's dead-letter target for the queue
// named name: it must exist and be another queue (adminMu held).
func (b *Broker) checkDeadLetterTarget(name string, cfg QueueConfig) error {
	switch {
	case cfg.DeadLetterQueue == "":
		return nil
	case cfg.DeadLetterQueue == name:
		return argErr("DeadLetterTargetQueue", "must be another queue than %s itself", name)
	}
	if r := b.opts.DeadLetterRouter; r != nil && r.Elsewhere(cfg.DeadLetterQueue) {
		if !r.Exists(cfg.DeadLetterQueue) {
			return argErr("DeadLetterTargetQueue", "names queue %s, which does not exist", cfg.DeadLetterQueue)
		}
		return nil
	}
	if _, err := b.Queue(cfg.DeadLetterQueue); err != nil {
		if errors.Is(err, ErrQueueNotExist) {
			return argErr("DeadLetterTargetQueue", "names queue %s, which does not exist", cfg.DeadLetterQueue)
		}
		return err
	}
	return nil
}

// hideForMoveLocked takes Active slot idx (a lane head) out of its lane,
// Inactive until a visibility timeout from now without counting a dequeue,
// and adds it to mv.
func (st *stripe) hideForMoveLocked(idx uint32, now, visMs int64, mv *moves) {
	s := st.slab.at(idx) // now: takeLocked's, never behind the wheel
	st.laneRemoveLocked(idx)
	st.wheel.remove(&st.slab, idx)
	s.setState(stInactive)
	st.nActive--
	st.nInactive++
	s.gen++ // no handle names it now
	enq := s.enqueueMs()
	s.visOff = uint32(max(now, enq) + visMs - enq) // unsigned: as in takeLocked
	if !st.wheel.insert(&st.slab, idx, s.deadline()) {
		panic("engine: visibility deadline not in the future")
	}
	st.q.b.store.changeRecord(st, recState, idx)
	mv.locs[mv.n] = moveLoc{
		loc:   bodyLoc{pos: s.bodyPos, size: s.recSize, slot: idx, seq: s.seq, stripe: st.idx},
		gen:   s.gen,
		enqMs: enq,
		expMs: s.expireMs(),
		prio:  s.prio(),
	}
	mv.n++
}

// movesHeld says whether moves are held now (Options.MovesHeld).
func (b *Broker) movesHeld() bool { return b.opts.MovesHeld != nil && b.opts.MovesHeld() }

// beginMove registers a move between queues about to run, and reports
// whether it may: false while moves are held, and then nothing is
// registered. A move that may run calls endMove when it is done. The count
// goes up before the hold is looked at, so that MovesBusy seen at 0 after
// a hold began means no move that missed the hold still runs.
func (b *Broker) beginMove() bool {
	b.movesBusy.Add(1)
	if b.movesHeld() {
		b.movesBusy.Add(-1)
		return false
	}
	return true
}

func (b *Broker) endMove() { b.movesBusy.Add(-1) }

// MovesBusy is the number of moves between queues running now (a
// dead-letter move, a relay, an exhausted notification's move): once
// Options.MovesHeld holds them, engine/cluster waits for it to reach 0
// before a backup reads anything.
func (b *Broker) MovesBusy() int64 { return b.movesBusy.Load() }

// heldHide is how long a message due for its dead-letter queue is hidden
// while moves are held: it is looked at again that soon, not after its
// queue's whole visibility timeout (up to 12 h).
const heldHide = 5 * time.Second

// deadLetter moves the messages in mv. A message it cannot move (its
// body unreadable for now, the target gone) stays hidden in its queue and
// becomes visible again at the end of its visibility timeout. It fails
// only on a storage failure.
func (q *Queue) deadLetter(mv *moves) (int, error) {
	if mv.target == nil {
		return q.moveElsewhere(mv)
	}
	r := q.b.getReader()
	defer q.b.putReader(r)
	var msg Message
	var pend [MaxBatch]pendingMove
	n := 0
	var err error
	for i := 0; i < mv.n && err == nil; i++ {
		var moved bool
		if moved, err = q.moveOne(mv.target, &mv.locs[i], r, &msg, nil, &pend[n]); moved {
			n++
		}
	}
	mv.n = 0
	// The moves appended so far are finished (made durable and active)
	// even when a later one failed: their sources are gone.
	if _, ferr := q.finishMoves(pend[:n]); err == nil {
		err = ferr
	}
	return n, err
}

// readForMove reads a message hidden for a move into msg. false: it is
// not moved (gone meanwhile; damaged, and dropped; unreadable for now, and
// logged).
func (q *Queue) readForMove(r *bodyReader, msg *Message, loc *bodyLoc) bool {
	ok, err := q.readBody(r, msg, loc)
	switch {
	case errors.Is(err, errDamaged):
		q.dropUnreadable(loc, err)
		return false
	case err != nil:
		q.b.log.Error("message body could not be read; the message is not moved to its dead-letter queue", "queue", q.name,
			"message_id", q.messageID(loc.seq).String(), "err", err)
		return false
	}
	return ok
}

// pendingMove is a move whose record is appended (moveOne) but not yet
// known durable: its target slot is still pending (finishMoves).
type pendingMove struct {
	t       *Queue
	tst     *stripe
	tidx    uint32
	rec     logRec
	delayed bool // a topic's delivery to a queue with DelaySeconds (AcceptMoved)
}

// finishMoves waits until the last of ps's records is durable, then makes
// each moved message Active in its target (step 4); gone counts those
// whose target was deleted meanwhile (the message went with it). On a
// storage failure the target slots are freed: the broker has failed.
func (q *Queue) finishMoves(ps []pendingMove) (gone int, err error) {
	if len(ps) == 0 {
		return 0, nil
	}
	last := uint64(0)
	for i := range ps {
		last = max(last, ps[i].rec.pos)
	}
	if err := q.b.store.waitDurable(last); err != nil {
		q.b.storageFailed(err)
		for i := range ps {
			q.b.store.addLive(ps[i].rec.pos, -int64(ps[i].rec.size))
			ps[i].release()
		}
		return 0, err
	}
	now := q.b.nowMs()
	for i := range ps {
		p := &ps[i]
		p.tst.mu.Lock()
		if p.tst.dead {
			p.tst.mu.Unlock()
			q.b.store.addLive(p.rec.pos, -int64(p.rec.size))
			gone++
			continue // the target was deleted meanwhile, and the message with it
		}
		ts := p.tst.slab.at(p.tidx)
		ts.bodyPos, ts.recSize = p.rec.pos, p.rec.size
		woken := p.tst.advanceLocked(now) // as Send: never ahead of a message visible before now
		if p.delayed {
			ts.setState(stDelayed)
			p.tst.nDelayed++
			woken += p.tst.armLocked(p.tidx, now)
		} else {
			woken += p.tst.activateLocked(p.tidx)
		}
		p.tst.scheduleLocked(now)
		p.tst.flushLocked()
		p.tst.mu.Unlock()
		p.t.sent.Add(1)
		if woken > 0 {
			p.t.waiters.wake(woken)
		}
	}
	return gone, nil
}

// release frees p's pending target slot.
func (p *pendingMove) release() {
	p.tst.mu.Lock()
	if !p.tst.dead {
		p.tst.slab.release(p.tidx)
	}
	p.tst.mu.Unlock()
}

// moveOne moves one hidden message to t, steps 1 to 3: its record is
// appended and the source freed, and pend describes the target slot that
// finishMoves makes Active once the record is durable. moved is false when
// it stays where it is (gone, unreadable, expiring, no room in t). sub is
// the subscription of a push queue (push.go), whose notifications enter t
// as their rendering with the topic's DLQ properties; nil for a queue's
// own policy.
func (q *Queue) moveOne(t *Queue, ml *moveLoc, r *bodyReader, msg *Message, sub *subscription, pend *pendingMove) (moved bool, err error) {
	loc := ml.loc
	if !q.readForMove(r, msg, &loc) {
		return false, nil
	}
	body, sum, props, expMs := msg.Body, &msg.MD5, []byte(nil), ml.expMs
	if sub != nil {
		env, err := decodePushEnvelope(msg.Body)
		if err != nil {
			return false, nil // the pusher discards it
		}
		s := md5.Sum(env.body)
		body, sum = env.body, &s
		props = q.b.topicDeadLetterProps(msg, sub.topic, sub.name, env.id)
		expMs = q.b.nowMs() + t.meta().retainMs // a new message for the target's readers
	} else {
		props = q.deadLetterProps(msg, loc.seq)
	}

	// 2. A pending slot in the target.
	now := q.b.nowMs()
	if expMs <= now {
		return false, nil // it expires where it is
	}
	tst := &t.stripes[int(t.sendRR.Add(1))%len(t.stripes)]
	tst.mu.Lock()
	if tst.dead {
		tst.mu.Unlock()
		return false, nil
	}
	tidx, ok := tst.slab.alloc()
	if !ok {
		tst.mu.Unlock()
		return false, nil
	}
	ts := tst.slab.at(tidx)
	ts.seq = t.seq.Add(1)
	ts.setMeta(ml.enqMs, ml.prio, stPending)
	ts.visOff = 0 // visible at once, on every replica whatever its clock (apply.go)
	ts.expOff = uint32(expMs - ml.enqMs)
	ts.tnext, ts.tprev, ts.next, ts.prev = nilSlot, nilSlot, nilSlot, nilSlot
	tslot := *ts
	tst.mu.Unlock()
	*pend = pendingMove{t: t, tst: tst, tidx: tidx}
	release := pend.release

	// 3. The move record, under the source's lock (invariants 1, 2).
	st := &q.stripes[loc.stripe]
	var rec [1]logRec
	st.mu.Lock()
	var s *slot
	if !st.dead && st.slab.valid(loc.slot) {
		s = st.slab.at(loc.slot)
	}
	if s == nil || s.seq != loc.seq || s.gen != ml.gen || s.state() != stInactive {
		st.mu.Unlock()
		release()
		return false, nil // deleted, expired or changed meanwhile
	}
	if q.b.opts.testSplitMove {
		if err := q.splitMoveLocked(st, t, tst, tidx, &tslot, sum, props, body, &rec[0]); err != nil {
			st.mu.Unlock()
			release()
			return false, err
		}
	} else {
		var src [snapLen]byte
		putSnap(src[:], q.id, st.idx, loc.slot, s)
		q.b.store.moveRecord(&rec[0], src[:], t.id, tst.idx, tidx, &tslot, sum, props, body)
		if err := q.b.store.append(rec[:]); err != nil {
			st.mu.Unlock()
			q.b.storageFailed(err)
			release()
			return false, err
		}
	}
	st.wheel.remove(&st.slab, loc.slot)
	st.nInactive--
	q.b.store.addLive(s.bodyPos, -int64(s.recSize))
	if q.b.opts.testSplitMove {
		q.b.store.changeRecord(st, recDelete, loc.slot)
	}
	st.slab.release(loc.slot)
	st.scheduleLocked(now)
	st.flushLocked()
	st.slab.giveBack() // a source drained by its moves (slab.go)
	st.mu.Unlock()
	q.deadLettered.Add(1)
	pend.rec = rec[0]
	return true, nil // step 4: finishMoves
}

// splitMoveLocked is the move done wrong, for the crash test to catch
// (Options.testSplitMove): a send record into the target, made durable on
// its own, then the source's delete record (the caller appends it when it
// frees the slot). A crash between the two leaves the message in both
// queues, which is what invariant 1 rules out. st.mu is held.
func (q *Queue) splitMoveLocked(st *stripe, t *Queue, tst *stripe, tidx uint32, tslot *slot, sum *[16]byte, props, body []byte, rec *logRec) error {
	var head [bodyHeadLen]byte
	q.b.store.bodyRecord(rec, &head, t.id, tst.idx, tidx, tslot, sum, props, body, false)
	recs := [1]logRec{*rec}
	err := q.b.store.append(recs[:])
	if err == nil {
		err = q.b.store.waitDurable(recs[0].pos)
	}
	if err != nil {
		q.b.storageFailed(err)
		return err
	}
	*rec = recs[0]
	return nil
}

// Values of the DLQ system properties (topic spec §3.8) for a message
// dead-lettered from a queue.
const dlqTypeQueue = "QUEUE"

// maxMoveHead bounds what a dead-letter move's record (moveRecord) holds
// beyond the message's body and its own properties: two snapshots, the
// MD5, the properties' length, and the three DLQ properties, whose
// DLQSourceArn also holds Options.ARNPrefix (taken off Broker.maxRecord
// in Open). TestMaxMoveHead checks it against the longest queue name.
const maxMoveHead = 2*snapLen + 16 + 4 + 1024

// deadLetterProps returns the properties block of msg (seq in q) as it
// enters the dead-letter queue: its own properties, without DLQ ones of an
// earlier move, then DLQMessageType, DLQSourceArn (this queue) and
// DLQOriginMessageId (the id it had where it was first dead-lettered from).
func (q *Queue) deadLetterProps(msg *Message, seq uint64) []byte {
	origin := q.messageID(seq).AppendText(nil)
	ps := make([]Property, 0, len(msg.Properties)+3)
	for _, p := range msg.Properties {
		if p.System {
			switch string(p.Name) {
			case SysDLQOriginMessageID:
				origin = p.Value
				continue
			case SysDLQMessageType, SysDLQSourceArn:
				continue
			}
		}
		ps = append(ps, p)
	}
	ps = append(ps,
		Property{Name: []byte(SysDLQMessageType), Value: []byte(dlqTypeQueue), Type: PropString, System: true},
		Property{Name: []byte(SysDLQSourceArn), Value: []byte(q.b.DeadLetterSourceArn(q.name)), Type: PropString, System: true},
		Property{Name: []byte(SysDLQOriginMessageID), Value: origin, Type: PropString, System: true},
	)
	return appendProps(nil, ps)
}

// DeadLetterSourceArn is the DLQSourceArn of messages dead-lettered from
// the queue named queue of broker b.
func (b *Broker) DeadLetterSourceArn(queue string) string {
	return b.opts.ARNPrefix + ":/queues/" + queue
}

// deadLetterHandle moves the message a receipt handle names, received and
// still invisible, to t now (the pusher's exhausted notifications; sub is
// their subscription). The handle is used up. moved is false if the
// message is gone or stays (moveOne); it then becomes visible again after
// a lease.
func (q *Queue) deadLetterHandle(h ReceiptHandle, t *Queue, sub *subscription) (moved bool, err error) {
	if err := q.checkHandle(h); err != nil {
		return false, err
	}
	now := q.b.nowMs()
	st := &q.stripes[h.stripe]
	var ml moveLoc
	st.mu.Lock()
	if st.dead {
		st.mu.Unlock()
		return false, q.goneErr()
	}
	woken := st.advanceLocked(now)
	if now < st.wheel.now {
		now = st.wheel.now // as in takeLocked
	}
	idx, err := st.lookupLocked(h, now)
	if err == nil && st.slab.at(idx).state() != stInactive {
		err = ErrMessageNotExist // delayed: never received
	}
	if err == nil {
		s := st.slab.at(idx)
		st.wheel.remove(&st.slab, idx)
		s.gen++ // the handle is used up
		enq := s.enqueueMs()
		s.visOff = uint32(max(now, enq) + q.b.pusher.opts.Lease.Milliseconds() - enq) // unsigned: as in takeLocked
		if !st.wheel.insert(&st.slab, idx, s.deadline()) {
			panic("engine: visibility deadline not in the future")
		}
		q.b.store.changeRecord(st, recState, idx)
		ml = moveLoc{
			loc:   bodyLoc{pos: s.bodyPos, size: s.recSize, slot: idx, seq: s.seq, stripe: st.idx},
			gen:   s.gen,
			enqMs: enq,
			expMs: s.expireMs(),
			prio:  s.prio(),
		}
	}
	st.scheduleLocked(now)
	st.flushLocked()
	st.mu.Unlock()
	if woken > 0 {
		q.waiters.wake(woken)
	}
	if err != nil {
		return false, err
	}
	r := q.b.getReader()
	defer q.b.putReader(r)
	var msg Message
	var pend [1]pendingMove
	if moved, err = q.moveOne(t, &ml, r, &msg, sub, &pend[0]); !moved || err != nil {
		return moved, err
	}
	if _, err := q.finishMoves(pend[:]); err != nil {
		return false, err
	}
	return true, nil
}
