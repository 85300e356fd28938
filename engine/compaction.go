package engine

// Compaction: disk (or memory) use tracks the live backlog, not the history.
//
// The log store counts, per segment, the bytes of records that hold a live
// message body. A background pass, rate-limited, does two things:
//  1. removes every inactive segment with no live bytes that replay no longer
//     needs (in durable mode: that lies before the checkpoint);
//  2. for inactive segments that are mostly dead (live bytes less than half
//     the segment), rewrites each live body at the head of the log (a
//     relocate record) and points its message there; the old segment then
//     has no live bytes and goes at a later pass.
// So one long-delayed or never-deleted message cannot pin a segment.
//
// Invariants:
//  1. A body is relocated only while holding its stripe's lock, only if the
//     slot still holds a committed message whose body is at exactly that
//     position; the relocate record is appended under the same lock, so it
//     follows every earlier record of the message and precedes every later one.
//  2. The old record's live bytes are released only after the new record's are
//     counted, so the message's body is always counted in some segment.
//
// The compactor is a job on the broker's clock (job.go): appends, bodies
// dying (in-memory mode) and checkpoints (durable mode: segments before the
// new position may go) kick it; it runs a pass compactInterval later and
// again as long as a pass did something.
//
// Owner: compactMu serialises passes (the job's and explicit ones);
// relocation touches messages only under their stripe locks.

import (
	"time"
)

const (
	compactInterval     = 100 * time.Millisecond
	defaultCompactBytes = 64 << 20 // relocated bytes per second
)

// compactJob is the compactor's run: one rate-limited pass. It asks to run
// again while passes make progress.
func (b *Broker) compactJob() bool {
	budget := b.opts.CompactionBytesPerSec / int64(time.Second/compactInterval)
	removed, relocated, err := b.compactOnce(budget)
	if err != nil {
		if b.usable() == nil {
			b.log.Error("compaction pass failed", "err", err)
		}
		return false
	}
	return removed+relocated > 0
}

// compactOnce runs one pass, relocating at most budget bytes (0: unlimited).
// It returns the segments removed and the bodies relocated.
func (b *Broker) compactOnce(budget int64) (removed, relocated int, err error) {
	b.compactMu.Lock()
	defer b.compactMu.Unlock()
	segs := b.store.segments(nil)
	limit := b.store.replayStart()
	for _, s := range segs {
		if s.active || s.live != 0 || s.end > limit {
			continue
		}
		ok, err := b.store.removeSegment(s.start)
		if err != nil {
			return removed, relocated, err
		}
		if ok {
			removed++
		}
	}
	spent := int64(0)
	for _, s := range segs {
		if s.active || s.live == 0 || s.live*2 >= int64(s.end-s.start) {
			continue
		}
		if budget > 0 && spent+s.live > budget && spent > 0 {
			break
		}
		// Relocations are log records too: keep the replay bound.
		if err := b.store.waitRoom(); err != nil {
			return removed, relocated, err
		}
		n, err := b.relocateSegment(s.start)
		relocated += n
		if err != nil {
			return removed, relocated, err
		}
		spent += s.live
	}
	return removed, relocated, nil
}

// relocateSegment moves every live body of the segment starting at start to
// the head of the log.
func (b *Broker) relocateSegment(start uint64) (int, error) {
	moved := 0
	var firstErr error
	var head [bodyHeadLen]byte
	_, err := b.store.scan(start, func(pos uint64, size uint32, typ uint8, payload []byte) {
		if firstErr != nil {
			return
		}
		qid, stripeIdx, slotIdx, ok := ownerOf(typ, payload)
		if !ok {
			return
		}
		sum, body, err := bodyOf(typ, payload)
		if err != nil {
			return
		}
		q := b.queueByID(qid)
		if q == nil || int(stripeIdx) >= len(q.stripes) {
			return
		}
		st := &q.stripes[stripeIdx]
		st.mu.Lock()
		defer st.mu.Unlock()
		if st.dead || !st.slab.valid(slotIdx) {
			return
		}
		s := st.slab.at(slotIdx)
		if s.seq == 0 || s.state() == stPending || s.bodyPos != pos {
			return // deleted, expired, replaced, or not yet committed
		}
		var recs [1]logRec
		b.store.bodyRecord(&recs[0], &head, q.id, st.idx, slotIdx, s, &sum, body, true)
		if err := b.store.append(recs[:]); err != nil {
			firstErr = err
			return
		}
		b.store.addLive(pos, -int64(s.recSize))
		s.bodyPos, s.recSize = recs[0].pos, recs[0].size
		moved++
	})
	if firstErr != nil {
		b.storageFailed(firstErr)
		return moved, firstErr
	}
	return moved, err
}
