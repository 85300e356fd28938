package engine

// Unreadable bodies: a message whose body is damaged on disk is handled once.
//
// A body read back for a receive or a peek, or by compaction, can fail its
// checksum (bit rot, a repaired log that skipped it, an index entry that
// points into a cut tail). Such a message can never be delivered, so the
// first reader to meet the damage drops it: the message leaves every lane
// and the wheel, a delete record makes that durable, its live bytes are
// released (so compaction can reclaim its segment), it is counted
// (Stats.Storage.Unreadable, QueueStats.Unreadable) and logged once at Error
// level with its id. Receives then go on with other messages: one message's
// damage never fails another's receive.
//
// Only damage (errDamaged) drops a message; an I/O error that may pass (EIO
// from a failing disk) leaves it where it is, and the receive that met it
// fails only if it could read nothing else.
//
// Invariant: a message is dropped only while its stripe's lock is held and
// its slot still holds the very message (seq) that was found unreadable.
//
// A replicated broker (a cluster shard) drops nothing: the damage is its
// own disk's, and the other members hold the body intact, so a delete
// (replicated by a leader) would lose the message on every member (docs
// audit, 2026-12-06: a bad sector under one body on a leader's disk lost
// an acknowledged message on all three nodes). It fails instead, saying
// so (Broker.Damaged), and engine/cluster keeps that node's copy of the
// shard out of its group until the operator empties the node's directory
// (engine/cluster/damaged.go).

import (
	"errors"
	"fmt"
)

// errDamaged wraps a storage error that means the record is damaged for
// good (a checksum failure, a record skipped by repair, a record that does
// not parse). The backends wrap their corruption errors with it.
var errDamaged = errors.New("engine: record damaged")

// dropUnreadable drops the message at loc, whose body could not be read
// because of err, if the slot still holds it. It reports whether it did.
func (q *Queue) dropUnreadable(loc *bodyLoc, err error) bool {
	if q.b.isReplica() {
		q.b.replicaDamaged(fmt.Errorf("queue %s, message %s, body at %d: %w", q.name, q.messageID(loc.seq), loc.pos, err))
		return false
	}
	st := &q.stripes[loc.stripe]
	st.mu.Lock()
	if st.dead || !st.slab.valid(loc.slot) {
		st.mu.Unlock()
		return false
	}
	s := st.slab.at(loc.slot)
	state := s.state()
	if s.seq != loc.seq || state == stFree || state == stPending {
		st.mu.Unlock()
		return false
	}
	st.dropLocked(loc.slot, recDelete)
	st.scheduleLocked(q.b.nowMs())
	st.flushLocked()
	st.mu.Unlock()
	q.unreadable.Add(1)
	q.b.unreadable.Add(1)
	q.b.log.Error("message body unreadable (damaged on disk); the message is dropped", "queue", q.name,
		"message_id", q.messageID(loc.seq).String(), "pos", loc.pos, "err", err)
	return true
}

// replicaDamaged fails a replicated broker whose log holds a damaged
// record (see the file comment).
func (b *Broker) replicaDamaged(err error) {
	if b.damage.CompareAndSwap(nil, &err) {
		b.log.Error("a message body is damaged in this replica's log; nothing is dropped: this copy of the shard stops and takes no part until the operator acts (docs/operations.md, \"What survives what\")", "err", err)
	}
	b.storageFailed(err)
}

// Damaged returns the damage a replicated broker met in its own log (a
// message body that failed its checksum), nil if none. Such a broker has
// failed (NeedsReopen), and its directory must not be opened again as it
// is: engine/cluster keeps that copy of the shard out of its group.
func (b *Broker) Damaged() error {
	if p := b.damage.Load(); p != nil {
		return *p
	}
	return nil
}

// isReplica reports whether the broker is a cluster shard's replica.
func (b *Broker) isReplica() bool { _, ok := b.store.(*replStore); return ok }
