package engine

// A changed MessageRetentionPeriod applies to the messages a queue holds,
// not only to later sends: each disappears once the retention in force
// has passed since it was sent (spec mns-queue-api.md §7.1: "any
// non-deleted message disappears once MessageRetentionPeriod has passed
// since it was sent, whatever its state"; the service's FAQ on extending
// a message's retention answers "call SetQueueAttributes", and SQS does
// the same). Until 2026-12-06 the expiry was fixed at the send, and a
// user who raised the retention to keep a backlog while consumers were
// down lost it at the old expiry (semantics audit).
//
// Invariants:
//  1. Every message held when the change is made gets expiry = its
//     EnqueueTime + the new retention, logged as a state record (the
//     message's whole snapshot, as a visibility change is), so recovery,
//     checkpoints and a shard's followers need nothing new; one already
//     past its new expiry is expired at once, with an expiry record.
//     Messages moved to a dead-letter queue count from their original
//     EnqueueTime there too.
//  2. Durable as the change: SetQueueAttributes returns once the records
//     are durable under the log's sync mode. A crash in between keeps the
//     new retention in the queue's attributes and may leave some messages
//     with the old expiry; setting the retention again (the client's
//     retry) applies it to them, since every message whose expiry differs
//     is updated, whether or not the attribute changed.
//  3. No stripe is held for long: retentionChunk slots per hold of its
//     lock, as a purge (purge.go invariant 5); sends racing with the
//     change may keep the retention they read.

// retentionChunk is the most slots looked at under one hold of a
// stripe's lock (invariant 3).
const retentionChunk = 4096

// applyRetention gives every message of q the expiry of retainMs after its
// EnqueueTime (invariant 1). The caller holds an admission (store.enter).
func (q *Queue) applyRetention(retainMs int64) error {
	var last uint64
	logged := false
	for i := range q.stripes {
		st := &q.stripes[i]
		for from := uint32(0); ; {
			if err := q.b.store.waitRoom(); err != nil {
				return err
			}
			st.mu.Lock()
			if st.dead {
				st.mu.Unlock()
				return q.goneErr()
			}
			now := q.b.nowMs()
			woken := st.advanceLocked(now)
			end := min(st.slab.n, from+retentionChunk)
			for ; from < end; from++ {
				s := st.slab.at(from)
				if state := s.state(); s.seq == 0 || state == stFree || state == stPending || int64(s.expOff) == retainMs {
					continue
				}
				st.wheel.remove(&st.slab, from)
				s.expOff = uint32(retainMs)
				if s.expireMs() <= max(now, st.wheel.now) {
					st.expireLocked(from)
					continue
				}
				q.b.store.changeRecord(st, recState, from)
				woken += st.armLocked(from, now)
			}
			done := from >= st.slab.n
			st.scheduleLocked(now)
			pos, appended, err := st.flushLocked()
			st.mu.Unlock()
			if woken > 0 {
				q.waiters.wake(woken)
			}
			if appended {
				last, logged = max(last, pos), true
			}
			if err != nil {
				return err
			}
			if done {
				break
			}
		}
	}
	if logged {
		if err := q.b.store.waitDurable(last); err != nil {
			q.b.storageFailed(err)
			return err
		}
	}
	return nil
}
