package engine

// Folding a window of the log into its net effect.
//
// The checkpointer folds the records between the index's checkpoint position
// and the durable end of the log, then writes the result to the index in one
// batch; recovery folds the log tail the same way and merges it with what it
// loads from the index. Because records about a message carry its full
// snapshot and reach the log in the order the changes were applied
// (record.go), the net effect of a window is "the last record of each message
// wins", and a message that is both sent and deleted (or expired) inside the
// window leaves nothing at all: it never touches the index.
//
// Publish groups (publish.go): a publish header opens a group; its members
// are the send records right after it, in the order it lists them. Any
// other record before the last member aborts the group, and its members
// already folded are dropped (dead, no tombstone: the index never holds a
// member of an unfinished group, publish.go invariant 2); a relocation
// does not (a local record: on a replica it may lie between the records
// of a received entry, which a follower appends one by one). A group still
// open at the end of the window is the caller's to handle (openGroupAt).
// Topic and subscription records fold into ft (topic_record.go).

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
)

type msgKey struct{ qid, seq uint64 }

func (a msgKey) compare(b msgKey) int {
	if c := cmp.Compare(a.qid, b.qid); c != 0 {
		return c
	}
	return cmp.Compare(a.seq, b.seq)
}

// foldMsg is the net effect of the window on one message. Entries live in
// fixed-size chunks in order of first appearance, so that a record updates
// its message in place (one map lookup, no copy of the snapshot in and out of
// a map), growth never copies, and the checkpoint writes them in roughly key
// order.
type foldMsg struct {
	k    msgKey
	snap [snapLen]byte // latest snapshot, body location filled in
	born bool          // sent inside the window
	gone bool          // deleted or expired: a tombstone for the index
	dead bool          // sent and deleted inside the window, or its queue deleted: nothing to write
}

const foldChunkBits = 12

type foldChunk [1 << foldChunkBits]foldMsg

// foldRef names an entry of fold.ents by key, for sorting.
type foldRef struct {
	k msgKey
	i uint32
}

type foldQueue struct {
	val     []byte // latest value (create or config record); nil if unchanged
	deleted bool
	// reborn: deleted, then created again in the window. Only a replica
	// hands an id out twice (one that caught up from a snapshot, which
	// carries no queue high-water mark, and then led: review O): the
	// messages of the id's earlier incarnation are dead, the index's too.
	reborn bool
}

type fold struct {
	queues   map[uint64]*foldQueue
	at       map[msgKey]uint32 // index (ent) of each message not dead
	chunks   []*foldChunk
	nents    int    // entries in use
	bornFrom uint64 // sends at or after this position are surely not in the index
	// bornSeq: per queue, sends of a seq up to this may be in the index
	// wherever they lie (a replica's replay after a snapshot: durable.go)
	bornSeq  map[uint64]uint64
	maxQueue uint64 // highest queue id created in the window
	n        int    // records applied
	ft       foldTopics
	grp      pubGroup // the publish group being folded
	aborted  int      // publish groups aborted
}

// newFold returns an empty fold. A message sent at a position >= bornFrom
// and deleted in the same window is dropped without a tombstone; below it a
// send may already be in the index (a checkpoint that died between its data
// and its position leaves puts beyond the stored position), so its delete
// must reach the index. Recovery passes ^uint64(0).
func newFold(bornFrom uint64) *fold {
	return &fold{queues: map[uint64]*foldQueue{}, at: map[msgKey]uint32{}, bornFrom: bornFrom}
}

// reset empties the fold for reuse, keeping the maps' memory.
func (f *fold) reset(bornFrom uint64) {
	clear(f.queues)
	clear(f.at)
	f.nents = 0
	f.bornFrom, f.n, f.maxQueue = bornFrom, 0, 0
	f.ft.reset()
	f.grp = pubGroup{keys: f.grp.keys[:0], ents: f.grp.ents[:0]}
	f.aborted = 0
}

func (f *fold) queue(id uint64) *foldQueue {
	fq := f.queues[id]
	if fq == nil {
		fq = &foldQueue{}
		f.queues[id] = fq
	}
	return fq
}

// apply folds one record read at pos with framed size size.
func (f *fold) apply(pos uint64, size uint32, typ uint8, payload []byte) error {
	f.n++
	inGroup := false
	if f.grp.open {
		// A relocation is a local record: on a replica it may lie between
		// a received group's records (a follower persists an entry one
		// record at a time, and compaction appends without the replica's
		// lock), and it never names a member (one is relocated only once
		// applied). It neither continues nor cuts the group.
		if inGroup = f.grp.member(typ, payload); !inGroup && !isRelocateRec(typ) {
			f.abortGroup() // cut short: publish.go invariant 1
		}
	}
	switch typ {
	case recPublish:
		return f.openGroup(pos, payload)
	case recTopic, recTopicDelete, recSubscription, recUnsubscribe:
		return f.ft.apply(typ, payload)
	case recTopicCount:
		return f.ft.setCount(pos, payload)
	case recQueueCreate, recQueueConfig:
		v, err := decodeQueueVal(payload)
		if err != nil {
			return err
		}
		fq := f.queue(v.id)
		if typ == recQueueCreate && fq.deleted {
			fq.deleted, fq.reborn = false, true
		}
		fq.val = append(fq.val[:0], payload...)
		f.maxQueue = max(f.maxQueue, v.id)
		return nil
	case recQueueDelete:
		if len(payload) < 8 {
			return fmt.Errorf("%w: queue delete of %d bytes", errBadRecord, len(payload))
		}
		id := binary.LittleEndian.Uint64(payload)
		fq := f.queue(id)
		fq.deleted, fq.val = true, nil
		for i := range f.nents {
			if m := f.ent(i); m.k.qid == id && !m.dead {
				m.dead = true
				delete(f.at, m.k)
			}
		}
		return nil
	case recSend, recRelocate, recState, recDelete, recExpire, recSendProps, recRelocateProps:
	case recDeadLetter:
		// One record, two effects: the source message leaves its queue (as
		// a delete) and the message enters the dead-letter queue (as a
		// send whose body is this record).
		if len(payload) < 2*snapLen {
			return fmt.Errorf("%w: dead-letter record of %d bytes at %d", errBadRecord, len(payload), pos)
		}
		if err := f.applyMsg(pos, size, recDelete, payload[:snapLen], false); err != nil {
			return err
		}
		return f.applyMsg(pos, size, recSendProps, payload[snapLen:], false)
	case recEntry, recHardState, recConfState:
		return nil // a replicated log's bookkeeping (replica.go), not state
	default:
		return fmt.Errorf("%w: unknown record type %d at %d", errBadRecord, typ, pos)
	}
	return f.applyMsg(pos, size, typ, payload, inGroup)
}

// applyMsg folds one record about a message: typ is a send, relocate,
// state, delete or expire type, payload starts with the message's snapshot.
// inGroup: the record is a member of the open publish group (publish.go).
func (f *fold) applyMsg(pos uint64, size uint32, typ uint8, payload []byte, inGroup bool) error {
	s, err := decodeSnap(payload)
	if err != nil {
		return fmt.Errorf("record type %d at %d: %w", typ, pos, err)
	}
	if fq := f.queues[s.qid]; fq != nil && fq.deleted {
		if inGroup {
			f.memberFolded(noEnt) // nothing folded, but the group goes on
		}
		return nil // a send that raced with the queue's deletion
	}
	k := msgKey{s.qid, s.seq}
	i, seen := f.at[k]
	if !seen {
		i = uint32(f.nents)
		f.at[k] = i
		if f.nents>>foldChunkBits == len(f.chunks) {
			f.chunks = append(f.chunks, new(foldChunk))
		}
		f.nents++
		*f.ent(int(i)) = foldMsg{k: k, born: isSendRec(typ) && pos >= f.bornFrom && s.seq > f.bornSeq[s.qid]}
	}
	m := f.ent(int(i))
	if inGroup {
		f.memberFolded(i)
	}
	switch typ {
	case recDelete, recExpire:
		if m.born {
			m.dead = true
			delete(f.at, k)
			return nil
		}
		m.gone = true
		return nil
	}
	m.gone = false
	var keep [12]byte // the body location folded before
	copy(keep[:], m.snap[52:64])
	copy(m.snap[:], payload[:snapLen])
	switch {
	case isSendRec(typ) || isRelocateRec(typ):
		setSnapBody(m.snap[:], pos, size)
	case seen && binary.LittleEndian.Uint32(m.snap[60:64]) == 0:
		// A record naming no body (a replica that had not applied the
		// send yet): the message keeps the body it has, as in live apply
		// (apply.go installLocked).
		copy(m.snap[52:64], keep[:])
	}
	return nil
}

// openGroupAt reports the header position of a publish group still open at
// the end of the window, and aborts it: its members are dropped.
func (f *fold) openGroupAt() (pos uint64, open bool) {
	if !f.grp.open {
		return 0, false
	}
	pos = f.grp.pos
	f.abortGroup()
	return pos, true
}

// dropDeletedQueues marks dead the entries of queues that the window
// neither creates, changes nor deletes and that exists says are gone: a
// send (publish delivery, dead-letter move) that reserved its slot before
// DeleteQueue fenced the queue's stripes logs its record after the
// deletion, since it appends outside the stripe lock. A window holding
// that record but not the deletion would put the message in the index,
// where nothing removes it (recovery audit, 2026-12-06). exists is asked
// once per such queue.
func (f *fold) dropDeletedQueues(exists func(qid uint64) (bool, error)) error {
	var lastQ uint64
	lastGone := false
	seen := map[uint64]bool{} // queue id -> gone
	for i := range f.nents {
		m := f.ent(i)
		if m.dead {
			continue
		}
		qid := m.k.qid
		if qid != lastQ {
			if _, inWindow := f.queues[qid]; inWindow {
				lastQ, lastGone = qid, false
				continue
			}
			gone, ok := seen[qid]
			if !ok {
				live, err := exists(qid)
				if err != nil {
					return err
				}
				gone = !live
				seen[qid] = gone
			}
			lastQ, lastGone = qid, gone
		}
		if lastGone {
			m.dead = true
			delete(f.at, m.k)
		}
	}
	return nil
}

// ent returns entry i (< nents).
func (f *fold) ent(i int) *foldMsg { return &f.chunks[i>>foldChunkBits][i&(1<<foldChunkBits-1)] }

// maxBoot returns the highest boot (seq>>bootShift) of the messages folded,
// dead ones too.
func (f *fold) maxBoot() uint64 {
	var mb uint64
	for i := range f.nents {
		mb = max(mb, f.ent(i).k.seq>>bootShift)
	}
	return mb
}

// sorted returns references to the entries not dead, in (queue, seq) order.
func (f *fold) sorted() []foldRef {
	refs := make([]foldRef, 0, len(f.at))
	for i := range f.nents {
		if m := f.ent(i); !m.dead {
			refs = append(refs, foldRef{m.k, uint32(i)})
		}
	}
	slices.SortFunc(refs, func(a, b foldRef) int { return a.k.compare(b.k) })
	return refs
}
