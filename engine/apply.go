package engine

// Applying a committed entry's records to a follower's live state
// (replica.go): what recovery does for a whole log, one record at a time,
// with the stripes live (lanes, wheel, counts, timers, waiters).
//
// Records carry full snapshots (record.go), so applying one is installing
// the message as it says, in its own stripe and slot; applying the same
// record twice, or records over a state that already has some of their
// effects (a snapshot being caught up), converges to the same state. A
// message's state is derived from its times at the follower's clock, as at
// start-up.
//
// Invariant: a follower's state changes only here, by its timers (delay and
// visibility ends, expiry, which need no record), and by compaction
// (relocations, local).

import (
	"encoding/binary"
	"fmt"
	"sort"
)

// ApplyCommitted applies committed entries in order. A leader's own
// proposals only settle (their effect is in the state already); entries
// this replica received are applied record by record.
//
// For engine/cluster, the consensus layer: it needs a broker opened with
// Options.Replica (others return an error).
func (b *Broker) ApplyCommitted(ents []ReplicaEntry) error {
	r, err := b.repl()
	if err != nil {
		return err
	}
	for _, e := range ents {
		r.mu.Lock()
		if e.Index <= r.applied {
			r.mu.Unlock()
			continue // in the state already (recovery applied it)
		}
		k := r.entAt(e.Index)
		if k < 0 {
			r.mu.Unlock()
			return fmt.Errorf("engine: committed entry %d was never persisted here", e.Index)
		}
		info := r.ents[k]
		own := false
		if info.kind == EntryRecords {
			if p := r.pendingByID(info.id); p != nil {
				r.resolveLocked(p, nil)
				own = true
			}
		}
		r.mu.Unlock()
		if info.kind == EntryRecords && !own {
			var aerr error
			err := r.readRange(info.first, info.recEnd, func(pos uint64, size uint32, typ uint8, payload []byte) {
				if aerr == nil {
					aerr = b.applyRecord(pos, size, typ, payload)
				}
			})
			if err == nil {
				err = aerr
			}
			if err != nil {
				return fmt.Errorf("engine: apply entry %d: %w", e.Index, err)
			}
		}
		r.unname(info.names) // its changes are in the state now (invariant 6)
		r.mu.Lock()
		r.forgetSendsLocked(info.sends) // its sends are in the state now (invariant 4)
		r.loggedLocked(info.names)      // replica_expiry.go, invariant 1
		// The checkpointer may have dropped older entries meanwhile: find it again.
		if k := r.entAt(e.Index); k >= 0 {
			r.ents[k].applied = true
		}
		r.applied, r.appTerm = e.Index, e.Term
		r.marks = append(r.marks, appliedMark{e.Index, e.Term, info.end})
		r.mu.Unlock()
	}
	return nil
}

// entAt is where r.ents holds the entry at index (ascending by index), or
// -1. The caller holds r.mu.
func (r *replStore) entAt(index uint64) int {
	k := sort.Search(len(r.ents), func(i int) bool { return r.ents[i].index >= index })
	if k == len(r.ents) || r.ents[k].index != index {
		return -1
	}
	return k
}

// applyRecord installs one record into the live state.
func (b *Broker) applyRecord(pos uint64, size uint32, typ uint8, payload []byte) error {
	switch typ {
	case recEntry, recHardState, recConfState, recRelocate, recRelocateProps:
		return nil // not state, or local to the replica that wrote it
	case recDeadLetter:
		// A move (record.go): the source leaves as by a delete, counted
		// as the leader counted it (a dead letter, not a delete), the
		// message enters its new queue as by a send of this record.
		if len(payload) < 2*snapLen {
			return fmt.Errorf("%w: dead-letter record of %d bytes at %d", errBadRecord, len(payload), pos)
		}
		if err := b.applyMsg(pos, size, recDeadLetter, payload[:snapLen]); err != nil {
			return err
		}
		return b.applyMsg(pos, size, recSendProps, payload[snapLen:])
	case recQueueCreate, recQueueConfig:
		v, err := decodeQueueVal(payload)
		if err != nil {
			return err
		}
		b.applyQueue(v)
		return nil
	case recQueueDelete:
		if len(payload) < 8 {
			return fmt.Errorf("%w: queue delete of %d bytes", errBadRecord, len(payload))
		}
		b.applyQueueDelete(binary.LittleEndian.Uint64(payload))
		return nil
	case recTopic, recTopicDelete, recSubscription, recUnsubscribe, recPublish, recTopicCount:
		return b.applyTopicRecord(typ, pos, payload)
	case recSend, recState, recDelete, recExpire, recSendProps:
	default:
		return fmt.Errorf("%w: unknown record type %d at %d", errBadRecord, typ, pos)
	}
	return b.applyMsg(pos, size, typ, payload)
}

// applyMsg installs one record about a message (a send, state, delete or
// expire type, or recDeadLetter for a move's source; payload starts with
// its snapshot).
func (b *Broker) applyMsg(pos uint64, size uint32, typ uint8, payload []byte) error {
	s, err := decodeSnap(payload)
	if err != nil {
		return err
	}
	q := b.queueByID(s.qid)
	if q == nil || int(s.stripe) >= len(q.stripes) {
		return nil // its queue is gone (deleted later in the log, or never created here)
	}
	st := &q.stripes[s.stripe]
	now := b.nowMs()
	st.mu.Lock()
	if st.dead {
		st.mu.Unlock()
		return nil
	}
	woken := 0
	switch typ {
	case recDelete, recExpire, recDeadLetter: // recDeadLetter: its source's snapshot (applyRecord)
		if st.slab.valid(s.slot) {
			if sl := st.slab.at(s.slot); sl.seq == s.seq && sl.state() != stPending {
				st.unlinkLocked(s.slot)
				b.store.addLive(sl.bodyPos, -int64(sl.recSize))
				st.slab.release(s.slot)
				switch typ {
				case recDelete:
					q.deleted.Add(1)
				case recExpire:
					q.expired.Add(1)
				default:
					q.deadLettered.Add(1)
				}
			}
		}
	default:
		bodyPos, recSize := s.bodyPos, s.recSize
		if isSendRec(typ) {
			bodyPos, recSize = pos, size
		}
		if typ == recState && st.slab.valid(s.slot) {
			// A receive raised the message's dequeue count (a visibility
			// change leaves it): counted as the leader counted it, so that
			// the queue's receives go on from there on a new leader.
			if sl := st.slab.at(s.slot); sl.seq == s.seq && s.dequeues > sl.dequeues {
				q.received.Add(int64(s.dequeues - sl.dequeues))
			}
		}
		woken = st.installLocked(s, bodyPos, recSize, now)
		if isSendRec(typ) {
			q.sent.Add(1)
		}
	}
	st.scheduleLocked(now)
	st.flushLocked() // an expiry found on the way: a follower drops its record
	st.slab.giveBack()
	st.mu.Unlock()
	if woken > 0 {
		q.waiters.wake(woken)
	}
	return nil
}

// unlinkLocked takes slot i out of its lane, the wheel and the counts.
func (st *stripe) unlinkLocked(i uint32) {
	s := st.slab.at(i)
	switch s.state() {
	case stActive:
		st.laneRemoveLocked(i)
		st.nActive--
	case stInactive:
		st.nInactive--
	case stDelayed:
		st.nDelayed--
	}
	st.wheel.remove(&st.slab, i)
}

// installLocked makes slot s.slot hold the message snap describes, with
// its body at bodyPos, in the state its times give at now (as recovery does).
// A message already there is updated; an older one there (the log says the
// slot was freed and reused) is replaced; a newer one stays. It returns the
// messages made Active.
func (st *stripe) installLocked(s msgSnap, bodyPos uint64, recSize uint32, now int64) int {
	b := st.q.b
	fresh := false
	if !st.slab.valid(s.slot) || st.slab.at(s.slot).seq == 0 {
		// A follower never allocates: its free set is rebuilt when it
		// becomes the leader (SetLeader), so claiming out of order is fine.
		// Emptied, it gives its chunks back as the leader's alloc does
		// (slab.go): it never allocates, so it kept them while it followed.
		st.slab.giveBack()
		if !st.slab.claim(s.slot) {
			return 0
		}
		fresh = true
	}
	sl := st.slab.at(s.slot)
	if !fresh && sl.seq > s.seq {
		// A slot's messages come in seq order (a leader's seqs grow, its
		// term in their top bits), so the record is about a message gone
		// before this one came: a replay over a newer, fuzzy snapshot.
		return 0
	}
	if !fresh {
		if bodyPos == 0 && sl.seq == s.seq {
			bodyPos, recSize = sl.bodyPos, sl.recSize // the change of a message we hold
		}
		st.unlinkLocked(s.slot)
		if sl.bodyPos != bodyPos || sl.seq != s.seq {
			b.store.addLive(sl.bodyPos, -int64(sl.recSize))
			b.store.addLive(bodyPos, int64(recSize))
		}
	} else {
		b.store.addLive(bodyPos, int64(recSize))
	}
	if bodyPos == 0 {
		// A change of a message this replica never got the body of (it
		// arrives before a snapshot has caught up): nothing to serve.
		st.slab.release(s.slot)
		return 0
	}
	sl.seq = s.seq
	sl.bodyPos, sl.recSize = bodyPos, recSize
	sl.visOff, sl.firstOff, sl.expOff = s.visOff, s.firstOff, s.expOff
	sl.dequeues, sl.gen = s.dequeues, s.gen
	sl.next, sl.prev, sl.tnext, sl.tprev = nilSlot, nilSlot, nilSlot, nilSlot
	// A deadline (expiry, end of a delay or of a visibility timeout) the
	// stripe's wheel has already passed is due: the wheel would refuse it,
	// leaving the slot in no lane and no bucket.
	now = max(now, st.wheel.now)
	enq := s.enqMs
	if enq+int64(s.expOff) <= now {
		sl.setMeta(enq, int(s.prio), stDelayed)
		st.nDelayed++ // expireLocked takes it out again
		st.expireLocked(s.slot)
		return 0
	}
	// A message sent with no delay (visOff 0) is visible whatever this
	// node's clock says: one behind the clock that stamped it (a new
	// leader's, a replica's) counted it Delayed, and a new leader could
	// not receive it until its clock caught up.
	switch visible := s.visOff == 0 || enq+int64(s.visOff) <= now; {
	case !visible && s.dequeues == 0:
		sl.setMeta(enq, int(s.prio), stDelayed)
		st.nDelayed++
		st.insertFutureLocked(s.slot)
	case !visible:
		sl.setMeta(enq, int(s.prio), stInactive)
		st.nInactive++
		st.insertFutureLocked(s.slot)
	default:
		sl.setMeta(enq, int(s.prio), stActive)
		return st.activateLocked(s.slot)
	}
	return 0
}

// applyQueue creates or updates a queue as a queue record says.
func (b *Broker) applyQueue(v queueVal) {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	if v.id >= b.nextQueueID {
		b.nextQueueID = v.id + 1
	}
	meta := newQueueMeta(v.cfg, v.createMs, v.modifyMs)
	if q := b.queueByID(v.id); q != nil {
		q.cfg.Store(meta)
		return
	}
	b.mu.RLock()
	live := b.queues[v.name]
	b.mu.RUnlock()
	if live != nil && live.id > v.id {
		// A replayed create of an older incarnation of the name
		// over a snapshot that already holds a later one: stale.
		return
	}
	b.addQueueLocked(newQueue(b, v.name, v.id, v.stripes, meta))
}

// applyQueueDelete deletes a queue as a queue-delete record says.
func (b *Broker) applyQueueDelete(id uint64) {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	q := b.queueByID(id)
	if q == nil {
		return
	}
	b.removeQueueLocked(q)
}
