package engine

// Purging a queue: every message it holds, Active, Inactive and Delayed,
// deleted in one call, as SQS's PurgeQueue and RabbitMQ's queue.purge do.
// The queue, its attributes and its name stay.
//
// Invariants:
//  1. A purge is that many deletes: each message leaves with an ordinary
//     delete record (type 6), appended under its stripe's lock like any
//     delete's (record.go invariant), so recovery, checkpoints, compaction
//     and a shard's followers need nothing new, and an old replica applies
//     a new leader's purge.
//  2. Durable as a delete: Purge returns once its records are durable
//     under the log's sync mode (with --sync always, after their fsync; in
//     a cluster, once a majority has them). A crash before that may keep
//     some of the messages, never lose one the purge did not take.
//  3. Bounded: only messages sent before the call (sequence numbers up to
//     the queue's counter when it starts) are deleted; a send racing with
//     the purge may stay. Sends still in flight (pending slots) are not
//     touched.
//  4. The handles of purged messages stop working (MessageNotExist), as
//     after a delete.
//  5. No stripe is held for long: a stripe is purged purgeChunk slots at a
//     time, its lock released between chunks, so sends and receives on it
//     go on during a purge of a large backlog.

// purgeChunk is the most slots a purge looks at under one hold of a
// stripe's lock (invariant 5).
const purgeChunk = 4096

// Purge deletes every message the queue holds now (Active, Inactive and
// Delayed) and returns how many it deleted, once their deletes are
// durable. Only messages sent before the call are deleted: a send racing
// with it may stay. The handles of purged messages stop working
// (ErrMessageNotExist). See the invariants at the top of purge.go.
func (q *Queue) Purge() (int, error) {
	if err := q.b.usable(); err != nil {
		return 0, err
	}
	if err := q.b.store.stalled(); err != nil {
		return 0, err // as delete: refused before anything changes (review)
	}
	bound := q.seq.Load()
	purged := 0
	var last uint64 // the last record appended, to wait for
	logged := false
	for i := range q.stripes {
		n, pos, ok, err := q.purgeStripe(&q.stripes[i], bound)
		purged += n
		if ok {
			last, logged = max(last, pos), true
		}
		if err != nil {
			q.deleted.Add(int64(purged))
			return purged, err
		}
	}
	q.deleted.Add(int64(purged))
	if logged {
		if err := q.b.store.waitDurable(last); err != nil {
			q.b.storageFailed(err)
			return purged, err
		}
	}
	return purged, nil
}

// purgeStripe purges st's messages with sequence numbers up to bound, a
// chunk at a time, and returns how many it deleted and the position of
// the last record it appended (ok: there is one).
func (q *Queue) purgeStripe(st *stripe, bound uint64) (purged int, last uint64, ok bool, err error) {
	for from := uint32(0); ; {
		if err := q.b.store.waitRoom(); err != nil {
			return purged, last, ok, err
		}
		if err := q.b.store.enter(); err != nil {
			return purged, last, ok, err
		}
		st.mu.Lock()
		if st.dead {
			st.mu.Unlock()
			q.b.store.leave()
			return purged, last, ok, q.goneErr()
		}
		now := q.b.nowMs()
		woken := st.advanceLocked(now) // expiries due now are expiries, not purges
		end := min(st.slab.n, from+purgeChunk)
		for ; from < end; from++ {
			if !st.slab.valid(from) {
				from = min(nextChunk(from), end) - 1
				continue
			}
			s := st.slab.at(from)
			if s.seq == 0 || s.seq > bound {
				continue
			}
			if state := s.state(); state == stFree || state == stPending {
				continue
			}
			st.dropLocked(from, recDelete)
			purged++
		}
		done := from >= st.slab.n
		st.scheduleLocked(now)
		pos, appended, ferr := st.flushLocked()
		st.slab.giveBack()
		st.mu.Unlock()
		q.b.store.leave()
		if woken > 0 {
			q.waiters.wake(woken)
		}
		if appended {
			last, ok = max(last, pos), true
		}
		if ferr != nil {
			return purged, last, ok, ferr
		}
		if done {
			return purged, last, ok, nil
		}
	}
}
