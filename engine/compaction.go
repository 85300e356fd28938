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
	"errors"
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
// the head of the log. Where the segment is damaged (its scan stops at a
// record it cannot read), the messages whose bodies lie from there to the
// segment's end are salvaged one by one instead (salvage).
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
		sum, props, body, err := bodyOf(typ, payload)
		if err != nil {
			return // cannot parse: its message is salvaged below, or never read
		}
		q := b.queueByID(qid)
		if q == nil || int(stripeIdx) >= len(q.stripes) {
			return
		}
		st := &q.stripes[stripeIdx]
		st.mu.Lock()
		defer st.mu.Unlock()
		ok, err = b.relocateLocked(q, st, slotIdx, pos, &sum, props, body, &head)
		if err != nil {
			firstErr = err
		} else if ok {
			moved++
		}
	})
	var dr *damagedRange
	if errors.As(err, &dr) {
		n, derr := b.salvage(dr.from, dr.to)
		moved += n
		err = derr
	}
	if firstErr != nil {
		b.storageFailed(firstErr)
		return moved, firstErr
	}
	return moved, err
}

// relocateLocked appends slot idx's body (found at pos) at the head of the
// log and points the message there, if the slot still holds a committed
// message whose body is at exactly pos (invariant 1). st.mu is held.
func (b *Broker) relocateLocked(q *Queue, st *stripe, idx uint32, pos uint64, sum *[16]byte, props, body []byte, head *[bodyHeadLen]byte) (bool, error) {
	if st.dead || !st.slab.valid(idx) {
		return false, nil
	}
	s := st.slab.at(idx)
	if s.seq == 0 || s.state() == stPending || s.bodyPos != pos {
		return false, nil // deleted, expired, replaced, or not yet committed
	}
	if r, ok := b.store.(*replStore); ok && r.isNamed(q.id, s.seq) {
		return false, nil // a replica's log changes it further (replica.go invariant 6)
	}
	var recs [1]logRec
	b.store.bodyRecord(&recs[0], head, q.id, st.idx, idx, s, sum, props, body, true)
	if err := b.store.append(recs[:]); err != nil {
		return false, err
	}
	b.store.addLive(pos, -int64(s.recSize))
	s.bodyPos, s.recSize = recs[0].pos, recs[0].size
	return true, nil
}

// salvage handles every message whose body lies in [from, to) of the log,
// a range compaction cannot scan (damage): a body that reads fine is
// relocated, a damaged one is dropped (poison.go). It looks at every message
// of every queue, which is fine for a path only damage takes. It returns the
// bodies relocated.
func (b *Broker) salvage(from, to uint64) (int, error) {
	b.mu.RLock()
	qs := make([]*Queue, 0, len(b.byID))
	for _, q := range b.byID {
		qs = append(qs, q)
	}
	b.mu.RUnlock()
	r := b.getReader()
	defer b.putReader(r)
	var head [bodyHeadLen]byte
	var locs []bodyLoc
	moved := 0
	for _, q := range qs {
		for si := range q.stripes {
			st := &q.stripes[si]
			locs = locs[:0]
			st.mu.Lock()
			for i := uint32(0); !st.dead && i < st.slab.n; i++ {
				if s := st.slab.at(i); s.seq != 0 && s.state() != stPending && s.bodyPos >= from && s.bodyPos < to {
					locs = append(locs, bodyLoc{pos: s.bodyPos, size: s.recSize, slot: i, seq: s.seq, stripe: st.idx})
				}
			}
			st.mu.Unlock()
			for i := range locs {
				loc := &locs[i]
				var m Message
				ok, err := q.readBody(r, &m, loc)
				switch {
				case errors.Is(err, errDamaged):
					q.dropUnreadable(loc, err)
				case err != nil:
					return moved, err
				case ok:
					st.mu.Lock()
					s := st.slab.at(loc.slot)
					moveOK := s.seq == loc.seq
					var rerr error
					if moveOK {
						moveOK, rerr = b.relocateLocked(q, st, loc.slot, loc.pos, &m.MD5, m.props, m.Body, &head)
					}
					st.mu.Unlock()
					if rerr != nil {
						b.storageFailed(rerr)
						return moved, rerr
					}
					if moveOK {
						moved++
					}
				}
			}
		}
	}
	return moved, nil
}
