package engine

// Compaction: disk (or memory) use tracks the live backlog, not the history.
//
// The log store counts, per segment, the bytes of records that hold a live
// message body. A background pass, rate-limited, does two things:
//  1. removes every inactive segment with no live bytes that replay no longer
//     needs (in durable mode: that lies before the checkpoint);
//  2. for inactive segments that are mostly dead (live bytes less than half
//     of what the segment holds: its file, or its buffer in memory, even
//     when cut short by a record that did not fit in it), rewrites each
//     live body at the head of the log (a
//     relocate record) and points its message there; the old segment then
//     has no live bytes and goes at a later pass.
// So one long-delayed or never-deleted message cannot pin a segment.
//
// Draining segments are left to drain. A segment that consumers are
// emptying (a backlog drained in order passes through every segment) falls
// below half live on its way to empty; relocating what is left would
// rewrite bodies that are received and deleted moments later. Measured on
// a 1,000,000-message drain before this rule: the log wrote 500-1,900
// bytes per message deleted, more than half the backlog relocated once
// (docs/benchmarks.md). So the background pass watches a candidate for
// compactSettle first, and relocates it only if, at the rate its live
// bytes fell while watched, it would not be empty within compactSettleMax
// (a minute) of first being seen: an in-order drain of 64 MiB segments at
// 0.55 MB/s or more (about 500 messages of 1 KiB a second) is never
// rewritten, while a segment pinned by messages nobody takes goes after
// compactSettle. The wait keeps a draining segment's dead bytes for up to
// a minute longer; relocating would first have written its live bytes
// again. An explicit pass (compactOnce with settle false:
// tests, tools) relocates every candidate at once.
//
// Invariants:
//  1. A body is relocated only while holding its stripe's lock, only if the
//     slot still holds a committed message whose body is at exactly that
//     position; the relocate record is appended under the same lock, so it
//     follows every earlier record of the message and precedes every later one.
//  2. The old record's live bytes are released only after the new record's are
//     counted, so the message's body is always counted in some segment.
//  3. A candidate waits at most compactSettleMax from its first sighting
//     by the background pass before it is relocated or empty, and while
//     any candidate waits the job stays armed (it runs again without a
//     kick), so an idle broker still compacts it.
//  4. A pass relocates at most its budget (CompactionBytesPerSec / 10),
//     plus the body that crosses it, however large the segment: a segment
//     left part-way is taken up at the record after the last one moved
//     (compactFrom), so the rate limit holds and nothing is read twice.
//  5. A segment is removed only once the log is synced past every record
//     that emptied it: its removal is durable at once, and those records
//     (relocates, deletes in --sync none or interval) maybe were not.
//
// The compactor is a job on the broker's clock (job.go): appends, bodies
// dying (in-memory mode) and checkpoints (durable mode: segments before the
// new position may go) kick it; it runs a pass compactInterval later and
// again as long as a pass did something or a candidate waits.
//
// Owner: compactMu serialises passes (the job's and explicit ones) and
// guards compactWatch and compactFrom; relocation touches messages only
// under their stripe locks. The counters in compactStats are atomics, read
// by Stats.

import (
	"errors"
	"sync/atomic"
	"time"
)

const (
	compactInterval     = 100 * time.Millisecond
	defaultCompactBytes = 64 << 20 // relocated bytes per second

	// compactSettle is how long the background pass watches a candidate
	// before it may relocate it; compactSettleMax bounds the whole wait
	// of one that keeps draining (invariant 3).
	compactSettle    = time.Second
	compactSettleMax = time.Minute
)

// compactWatch is what the background pass saw of a candidate segment.
type compactWatch struct {
	firstMs int64 // first sighting as a candidate
	sinceMs int64 // start of the current observation
	live    int64 // live bytes at sinceMs
	seen    bool  // marks entries still candidates in this pass
}

// compactStats counts what compaction did since the broker opened.
type compactStats struct {
	removed        atomic.Int64 // segments removed
	relocated      atomic.Int64 // bodies relocated
	relocatedBytes atomic.Int64 // their framed bytes at the old place
	waiting        atomic.Int64 // candidates left to drain at the last pass
}

// CompactionStats is what compaction did since the broker opened
// (StorageStats.Compaction).
type CompactionStats struct {
	SegmentsRemoved int64 // log segments removed (no live bytes left)
	Relocated       int64 // message bodies rewritten at the head of the log
	RelocatedBytes  int64 // their bytes
	// Waiting is the mostly-dead segments the last background pass left
	// alone because their live bytes were falling fast enough to reach
	// zero by themselves (a backlog being drained).
	Waiting int64
}

func (c *compactStats) snapshot() CompactionStats {
	return CompactionStats{
		SegmentsRemoved: c.removed.Load(),
		Relocated:       c.relocated.Load(),
		RelocatedBytes:  c.relocatedBytes.Load(),
		Waiting:         c.waiting.Load(),
	}
}

// compactJob is the compactor's run: one rate-limited pass that leaves
// draining segments alone. It asks to run again while passes make progress
// or a candidate waits.
func (b *Broker) compactJob() bool {
	budget := b.opts.CompactionBytesPerSec / int64(time.Second/compactInterval)
	removed, relocated, err := b.compactPass(budget, true)
	if err != nil {
		if b.usable() == nil {
			b.log.Error("compaction pass failed", "err", err)
		}
		return false
	}
	return removed+relocated > 0 || b.compacted.waiting.Load() > 0
}

// compactOnce runs one explicit pass, relocating every candidate and at
// most budget bytes (0: unlimited). It returns the segments removed and the
// bodies relocated.
func (b *Broker) compactOnce(budget int64) (removed, relocated int, err error) {
	return b.compactPass(budget, false)
}

// compactPass runs one pass; with settle, candidates that are draining by
// themselves wait (see the file comment).
func (b *Broker) compactPass(budget int64, settle bool) (removed, relocated int, err error) {
	b.compactMu.Lock()
	defer b.compactMu.Unlock()
	segs := b.store.segments(nil)
	limit := b.store.replayStart()
	synced := false
	for _, s := range segs {
		if s.active || s.live != 0 || s.end > limit || b.backups.Load() > 0 {
			continue // a backup copies every segment (backup.go invariant 1)
		}
		if !synced {
			// What emptied the segment (a relocate record of an earlier
			// pass, a delete of --sync none or interval) is counted at
			// once but was maybe only written; the removal is durable at
			// once. Made durable first: after a power loss, a message
			// checkpointed into this segment and relocated since was gone,
			// its relocation never on disk (recovery audit, 2026-12-06).
			if err := b.store.sync(); err != nil {
				if b.store.stalled() != nil {
					// The log waits for a segment file it cannot make:
					// nothing past the stall is durable, so nothing is
					// removed until it ends (a removal here was what could
					// free the space; the operator must now). The
					// relocations below still run. Returning the error
					// logged it at Error on every pass (review,
					// 2026-12-06).
					break
				}
				return removed, relocated, err
			}
			synced = true
		}
		ok, err := b.store.removeSegment(s.start)
		if err != nil {
			return removed, relocated, err
		}
		if ok {
			removed++
			b.compacted.removed.Add(1)
		}
	}
	now := b.nowMs()
	waiting := int64(0)
	defer func() {
		b.forgetWatches(segs)
		b.compacted.waiting.Store(waiting)
	}()
	spent := int64(0)
	for _, s := range segs {
		if budget > 0 && spent >= budget {
			break
		}
		// Half of what the segment holds: a segment cut short (the record
		// after its last did not fit) holds a whole file for its few bytes.
		if s.active || s.live == 0 || s.live*2 >= max(int64(s.end-s.start), s.held) {
			continue
		}
		if settle && b.draining(s, now) {
			waiting++
			continue
		}
		// Relocations are log records too: keep the replay bound.
		if err := b.store.waitRoom(); err != nil {
			return removed, relocated, err
		}
		left := int64(0)
		if budget > 0 {
			left = budget - spent
		}
		n, bytes, next, err := b.relocateSegment(s.start, b.compactFrom[s.start], left)
		relocated += n
		spent += bytes
		if err != nil {
			return removed, relocated, err
		}
		if next != 0 {
			b.compactFrom[s.start] = next // the budget ran out in it: go on from there
		} else {
			delete(b.compactFrom, s.start)
			delete(b.compactWatch, s.start)
		}
	}
	return removed, relocated, nil
}

// draining reports whether the background pass should leave candidate s
// alone for now: it was first seen less than compactSettle ago, or its
// live bytes fell while watched fast enough to reach zero within
// compactSettleMax of its first sighting. compactMu is held.
func (b *Broker) draining(s segInfo, now int64) bool {
	w := b.compactWatch[s.start]
	if w == nil {
		b.compactWatch[s.start] = &compactWatch{firstMs: now, sinceMs: now, live: s.live, seen: true}
		return true
	}
	w.seen = true
	watched := now - w.sinceMs
	if watched < compactSettle.Milliseconds() {
		return true
	}
	fell := w.live - s.live
	left := compactSettleMax.Milliseconds() - (now - w.firstMs)
	if fell <= 0 || left <= 0 || s.live*watched > fell*left {
		return false // not draining, or not soon enough: relocate
	}
	w.sinceMs, w.live = now, s.live
	return true
}

// forgetWatches drops the watches of segments that were not candidates in
// this pass (emptied, removed, relocated) and clears the marks of the
// rest, and drops the resume positions of segments that are gone.
// compactMu is held.
func (b *Broker) forgetWatches(segs []segInfo) {
	for start, w := range b.compactWatch {
		if !w.seen {
			delete(b.compactWatch, start)
		}
		w.seen = false
	}
	for start := range b.compactFrom {
		if !hasSegment(segs, start) {
			delete(b.compactFrom, start)
		}
	}
}

func hasSegment(segs []segInfo, start uint64) bool {
	for _, s := range segs {
		if s.start == start {
			return true
		}
	}
	return false
}

// relocateSegment moves the live bodies of the segment starting at start,
// from position from on (0: the segment's start), to the head of the log,
// until it has moved budget bytes (0: no limit). It returns the bodies and
// bytes moved, and where to go on if it stopped on the budget (0: the
// segment is done). Where the segment is damaged (its scan stops at a
// record it cannot read), the messages whose bodies lie from there to the
// segment's end are salvaged one by one instead (salvage).
func (b *Broker) relocateSegment(start, from uint64, budget int64) (moved int, spent int64, next uint64, err error) {
	var firstErr error
	var head [bodyHeadLen]byte
	_, err = b.store.scan(start, max(from, start), func(pos uint64, size uint32, typ uint8, payload []byte) bool {
		qid, stripeIdx, slotIdx, ok := ownerOf(typ, payload)
		if !ok {
			return true
		}
		sum, props, body, err := bodyOf(typ, payload)
		if err != nil {
			return true // cannot parse: its message is salvaged below, or never read
		}
		q := b.queueByID(qid)
		if q == nil || int(stripeIdx) >= len(q.stripes) {
			return true
		}
		st := &q.stripes[stripeIdx]
		st.mu.Lock()
		ok, err = b.relocateLocked(q, st, slotIdx, pos, &sum, props, body, &head)
		st.mu.Unlock()
		if err != nil {
			firstErr = err
			return false
		}
		if ok {
			moved++
			spent += int64(size)
			if budget > 0 && spent >= budget {
				next = pos + uint64(size)
				return false
			}
		}
		return true
	})
	var dr *damagedRange
	if errors.As(err, &dr) {
		n, derr := b.salvage(dr.from, dr.to)
		moved += n
		err, next = derr, 0
	}
	if firstErr != nil {
		b.storageFailed(firstErr)
		return moved, spent, 0, firstErr
	}
	return moved, spent, next, err
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
	b.compacted.relocated.Add(1)
	b.compacted.relocatedBytes.Add(int64(s.recSize))
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
				if !st.slab.valid(i) {
					i = nextChunk(i) - 1
					continue
				}
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
					// valid first: the stripe may have died or shrunk (slab.go) meanwhile.
					moveOK := !st.dead && st.slab.valid(loc.slot) && st.slab.at(loc.slot).seq == loc.seq
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
