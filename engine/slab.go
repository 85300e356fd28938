package engine

// The message table of a stripe.
//
// A slab is a growable array of fixed-size, pointer-free slot structs,
// addressed by a uint32 slot number, in chunks of 2^8 slots (16 KiB) so that
// growth never copies and the GC has nothing to scan. A chunk is allocated
// when the first slot in it is. Chunks go back in two ways: a stripe that is
// empty at a send drops all but the first (shrink), and one whose chunks
// past the first are at least half empty ones (no slot in use) drops those
// at a send (trim), keeping every slot number: a queue drained from a
// large backlog but never emptied kept the chunks of its peak for good.
// Chunks of 2^12 slots (256 KiB) made a stripe that ever held one message
// cost 256 KiB, a queue of four stripes 1 MiB (the soak audit saw 200
// queues of one message each add 53 MB of heap). Lanes and timing-wheel
// buckets are intrusive linked lists of slot numbers. Free slots are bits
// (one a slot, and one a chunk that has a free slot), and alloc takes the
// lowest: a LIFO free list put each new message in the slot freed last,
// so a queue drained from a backlog while sends went on kept its few
// messages spread over every chunk of its peak, and none could go back.
//
// Invariants:
//  1. A slot is in exactly one of: the free set (state free), no list
//     (state pending: a send whose record is not yet durable), a lane and the
//     wheel (Active), or only the wheel (Delayed, Inactive).
//  2. seq is 0 exactly when the slot is free; a slot's seq never repeats
//     (seqs are unique within the queue), so a stale handle cannot match a
//     reused slot.
//  3. Every time field is stored relative to enqueueMs and fits 32 bits: a
//     message lives at most MaxRetention (7 days) and a visibility timeout
//     adds at most 12 hours, both far below 2^32 ms (49 days).
//  4. A nil chunk (given back by trim, or skipped by a claim past it) has
//     no slot in use and none of its slots is on any list or in the free
//     set; valid is false for them, and every walk of the slots skips it.
//     A chunk's live counts its slots in use.
//  5. The free set: slot i's bit in its chunk's free words is set exactly
//     when i is below n, in a non-nil chunk and free, except that a claim
//     (recovery, a follower) leaves the slots it skips out until
//     rebuildFree.
//  6. x is nil exactly when the slab has one chunk entry at most (most
//     queues: the stripe stays three cache lines, TestStripeSize). Else
//     bit c of x.avail is set exactly when chunk c has a slot in the free
//     set, no word of avail below x.low has a bit, x.empty counts the
//     non-nil chunks past the first with no slot in use and x.held the
//     non-nil chunks.
//
// Owner: the stripe's mutex guards the slab and every slot in it.

import "math/bits"

const (
	chunkBits = 8
	chunkSize = 1 << chunkBits
	chunkMask = chunkSize - 1
	nilSlot   = ^uint32(0) // end of a list
	maxSlots  = 1<<31 - 1  // slot numbers stay below the wheel's bucket marks
)

// slot states (internal; MessageState is the public view).
const (
	stFree     = 0
	stPending  = 1 // reserved by a send, record not yet durable, invisible
	stDelayed  = 2
	stActive   = 3
	stInactive = 4
)

// slot is one message's metadata: 64 bytes, no pointers.
type slot struct {
	seq      uint64 // message sequence number in its queue; 0 = free
	bodyPos  uint64 // log position of the record holding body and MD5
	meta     uint64 // enqueueMs (48 bits) | priority-1 (4 bits) | state (3 bits)
	visOff   uint32 // NextVisibleTime - enqueue (ms): delay end while Delayed, visibility end while Inactive
	firstOff uint32 // FirstDequeueTime - enqueue (ms); 0 before the first receive
	expOff   uint32 // expiry - enqueue (ms)
	dequeues uint32 // DequeueCount
	gen      uint32 // receipt-handle generation: bumps on every receive and visibility change
	recSize  uint32 // framed size of the body record: read hint and live-byte accounting
	next     uint32 // lane link (Active)
	prev     uint32 // lane link (Active)
	tnext    uint32 // timing-wheel links
	tprev    uint32
}

const (
	metaMsBits    = 48
	metaMsMask    = 1<<metaMsBits - 1
	metaPrioShift = 48
	metaStShift   = 52
)

func (s *slot) enqueueMs() int64 { return int64(s.meta & metaMsMask) }
func (s *slot) prio() int        { return int(s.meta>>metaPrioShift&15) + 1 }
func (s *slot) state() uint8     { return uint8(s.meta >> metaStShift & 7) }

func (s *slot) setMeta(enqueueMs int64, prio int, st uint8) {
	s.meta = uint64(enqueueMs)&metaMsMask | uint64(prio-1)<<metaPrioShift | uint64(st)<<metaStShift
}

func (s *slot) setState(st uint8) {
	s.meta = s.meta&^(7<<metaStShift) | uint64(st)<<metaStShift
}

func (s *slot) visibleMs() int64 { return s.enqueueMs() + int64(s.visOff) }
func (s *slot) expireMs() int64  { return s.enqueueMs() + int64(s.expOff) }

// firstDequeueMs is FirstDequeueTime: EnqueueTime before the first receive.
func (s *slot) firstDequeueMs() int64 { return s.enqueueMs() + int64(s.firstOff) }

// deadline is when the wheel must next look at the slot: the end of its delay
// or visibility timeout, or its expiry, whichever comes first.
func (s *slot) deadline() int64 {
	exp := s.expireMs()
	if st := s.state(); st == stDelayed || st == stInactive {
		if v := s.visibleMs(); v < exp {
			return v
		}
	}
	return exp
}

type slab struct {
	chunks []chunk    // nil slots: given back, or never used (invariant 4)
	n      uint32     // slots ever handed out (high-water mark)
	used   uint32     // slots not free
	x      *slabIndex // the index of a slab of several chunks (invariant 6)
}

// chunk is 2^8 slots and what the slab knows of them.
type chunk struct {
	slots *[chunkSize]slot
	free  [chunkSize / 64]uint64 // the free set (invariant 5): a bit a slot
	live  uint32                 // slots in use
}

// slabIndex finds the lowest free slot of a slab of several chunks, and
// counts its chunks for trim (invariant 6).
type slabIndex struct {
	avail []uint64 // a bit a chunk: it has a slot in the free set
	low   uint32   // no word of avail below it has a bit
	empty uint32   // non-nil chunks past the first with no slot in use
	held  uint32   // non-nil chunks
}

// trimMinChunks: trim gives chunks back once this many are empty (and
// they are half of those held), so that a queue that fills and drains a
// little around a chunk's edge does not allocate and drop one each time.
const trimMinChunks = 8

func newSlab() slab { return slab{} }

func (sl *slab) at(i uint32) *slot { return &sl.chunks[i>>chunkBits].slots[i&chunkMask] }

// valid reports whether i names a slot that exists.
func (sl *slab) valid(i uint32) bool { return i < sl.n && sl.chunks[i>>chunkBits].slots != nil }

// nextChunk returns the first slot number of the chunk after i's: a walk
// of the slots goes on there when i's chunk is nil (invariant 4).
func nextChunk(i uint32) uint32 { return (i | chunkMask) + 1 }

// isFree reports whether slot i is in the free set.
func (sl *slab) isFree(i uint32) bool {
	return sl.chunks[i>>chunkBits].free[i>>6&(chunkSize/64-1)]&(1<<(i&63)) != 0
}

// hasFree reports whether chunk c has a slot in the free set.
func (c *chunk) hasFree() bool {
	for _, w := range c.free {
		if w != 0 {
			return true
		}
	}
	return false
}

// heldChunks returns how many chunks the slab holds.
func (sl *slab) heldChunks() int {
	if sl.x != nil {
		return int(sl.x.held)
	}
	if len(sl.chunks) == 1 && sl.chunks[0].slots != nil {
		return 1
	}
	return 0
}

// hold counts slot i in use in its chunk.
func (sl *slab) hold(i uint32) {
	c := &sl.chunks[i>>chunkBits]
	if c.live == 0 && i>>chunkBits > 0 {
		sl.x.empty--
	}
	c.live++
	sl.used++
}

// grow makes chunk c exist, and the index once there are two chunks.
func (sl *slab) grow(c uint32) {
	for c >= uint32(len(sl.chunks)) {
		sl.chunks = append(sl.chunks, chunk{})
		if sl.x == nil && len(sl.chunks) == 2 {
			x := &slabIndex{avail: []uint64{0}}
			if first := &sl.chunks[0]; first.slots != nil {
				x.held = 1
				if first.hasFree() {
					x.avail[0] = 1
				}
			}
			sl.x = x
		}
		if sl.x != nil && len(sl.chunks) > len(sl.x.avail)*64 {
			sl.x.avail = append(sl.x.avail, 0)
		}
	}
	if sl.chunks[c].slots == nil {
		sl.chunks[c].slots = new([chunkSize]slot)
		if sl.x != nil {
			sl.x.held++
			if c > 0 {
				sl.x.empty++
			}
		}
	}
}

// setFree puts slot i in the free set.
func (sl *slab) setFree(i uint32) {
	c := i >> chunkBits
	sl.chunks[c].free[i>>6&(chunkSize/64-1)] |= 1 << (i & 63)
	if x := sl.x; x != nil {
		x.avail[c>>6] |= 1 << (c & 63)
		x.low = min(x.low, c>>6)
	}
}

// takeFree takes slot i out of the free set.
func (sl *slab) takeFree(i uint32) {
	c := i >> chunkBits
	ch := &sl.chunks[c]
	ch.free[i>>6&(chunkSize/64-1)] &^= 1 << (i & 63)
	if x := sl.x; x != nil && !ch.hasFree() {
		x.avail[c>>6] &^= 1 << (c & 63)
	}
}

// lowestFree returns the lowest slot of the free set, or nilSlot.
func (sl *slab) lowestFree() uint32 {
	x := sl.x
	if x == nil {
		if len(sl.chunks) == 0 {
			return nilSlot
		}
		return sl.chunks[0].lowestFree(0)
	}
	for ; x.low < uint32(len(x.avail)); x.low++ {
		if a := x.avail[x.low]; a != 0 {
			c := x.low<<6 | uint32(bits.TrailingZeros64(a))
			if i := sl.chunks[c].lowestFree(c); i != nilSlot {
				return i
			}
			panic("slab: a chunk marked with a free slot has none") // invariant 6
		}
	}
	return nilSlot
}

// lowestFree returns the lowest slot of chunk number c in the free set,
// or nilSlot.
func (ch *chunk) lowestFree(c uint32) uint32 {
	for k, w := range ch.free {
		if w != 0 {
			return c<<chunkBits | uint32(k)<<6 | uint32(bits.TrailingZeros64(w))
		}
	}
	return nilSlot
}

// wantsTrim reports whether the empty chunks are enough to give back.
func (sl *slab) wantsTrim() bool {
	x := sl.x
	return x != nil && x.empty >= trimMinChunks && 2*x.empty >= x.held
}

// giveBack shrinks an empty slab, or trims one whose empty chunks are
// enough (wantsTrim). Its callers hold the stripe lock and no slot pointer
// they use afterwards: a send before it allocates, and the operations that
// free slots (deletes, expiries, purges, a follower's applies) when they
// are done with the stripe, so that a queue drained and then left idle
// gives its chunks back too (it kept them until its next send).
func (sl *slab) giveBack() {
	if sl.used == 0 && len(sl.chunks) > 1 {
		sl.shrink()
	} else if sl.wantsTrim() {
		sl.trim()
	}
}

// alloc takes the lowest free slot (growing the slab if none) and returns
// it zeroed.
func (sl *slab) alloc() (uint32, bool) {
	sl.giveBack()
	i := sl.lowestFree()
	if i == nilSlot {
		i = sl.refillHole()
	}
	if i != nilSlot {
		sl.takeFree(i)
	} else {
		if sl.n >= maxSlots {
			return 0, false
		}
		i = sl.n
		sl.grow(i >> chunkBits)
		sl.n++
	}
	*sl.at(i) = slot{}
	sl.hold(i)
	return i, true
}

// shrink drops every chunk but the first of a slab with no slot in use,
// and starts numbering slots again from 0. Only alloc calls it, and a
// follower's installLocked before it claims a slot (apply.go: followers
// never alloc), so never while a caller walks the slab's slots (purge,
// compaction and snapshot loops bound themselves by n under the stripe's
// lock). A handle or a record naming a slot past n is gone, and one
// naming a reused slot is told apart by its seq (invariant 2); a slot
// number held outside the lock is checked with valid before at (a body
// read again after compaction: review E found it was not, a panic). A
// drained backlog kept all its chunks until its queue was deleted:
// 100,000 messages sent and deleted left 8 MB of heap in a live queue
// for good (leak audit, 2026-12-06).
func (sl *slab) shrink() {
	*sl = slab{chunks: []chunk{{slots: sl.chunks[0].slots}}} // nil if a claim started past it
}

// trim gives back every chunk past the first with no slot in use, keeping
// every slot number (invariant 4), and rebuilds the free set. Its callers
// are shrink's. It costs a walk of the chunks and of the free set, a word
// for 64 slots, once the empty chunks are half of those held. A queue
// drained from a backlog to a few messages that it never let go kept
// every chunk of its peak for good (TestNeverEmptyQueueGivesItsSlabBack).
func (sl *slab) trim() {
	x := sl.x
	last := 0
	for c := 1; c < len(sl.chunks); c++ {
		ch := &sl.chunks[c]
		if ch.slots != nil && ch.live == 0 {
			*ch = chunk{}
			x.held--
		}
		if ch.slots != nil {
			last = c
		}
	}
	clear(sl.chunks[last+1:])
	sl.chunks = sl.chunks[:last+1]
	x.avail = x.avail[:(last+64)/64]
	x.empty = 0
	if last == 0 {
		sl.x = nil
	}
	if end := uint32(last+1) << chunkBits; sl.n > end {
		sl.n = end
	}
	sl.rebuildFree()
}

// refillHole makes the lowest nil chunk below the last one exist again,
// all its slots in the free set, and returns its first slot; or nilSlot
// if there is none. Alloc calls it when the free set is empty: a chunk
// that trim gave back is in no free set, and numbering the next slots
// from n instead left every hole behind for good, the chunk table and
// the slot numbers growing with each backlog until maxSlots
// (TestTrimmedChunksAreReused). Every slot of such a chunk is below n.
func (sl *slab) refillHole() uint32 {
	x := sl.x
	if x == nil || x.held >= uint32(len(sl.chunks)) {
		return nilSlot
	}
	for c := uint32(0); c+1 < uint32(len(sl.chunks)); c++ {
		if sl.chunks[c].slots != nil {
			continue
		}
		sl.grow(c)
		ch := &sl.chunks[c]
		for k := range ch.free {
			ch.free[k] = ^uint64(0)
		}
		x.avail[c>>6] |= 1 << (c & 63)
		x.low = min(x.low, c>>6)
		return c << chunkBits
	}
	return nilSlot
}

// release returns slot i to the free set.
func (sl *slab) release(i uint32) {
	*sl.at(i) = slot{}
	sl.setFree(i)
	sl.used--
	ch := &sl.chunks[i>>chunkBits]
	ch.live--
	if ch.live == 0 && i>>chunkBits > 0 {
		sl.x.empty++
	}
}

// claim takes the specific slot i during recovery (before rebuildFree), or
// on a follower (apply.go). It makes i's chunk exist, not those before it
// (a follower of a leader that trimmed); the slot must be free.
func (sl *slab) claim(i uint32) bool {
	if i >= maxSlots {
		return false
	}
	sl.grow(i >> chunkBits)
	if i >= sl.n {
		sl.n = i + 1
	}
	if sl.at(i).seq != 0 {
		return false
	}
	if sl.isFree(i) {
		sl.takeFree(i)
	}
	sl.hold(i)
	return true
}

// rebuildFree makes the free set every free slot below the high-water
// mark (invariant 5): at the end of recovery, when a follower leads, and
// in trim.
func (sl *slab) rebuildFree() {
	if x := sl.x; x != nil {
		clear(x.avail)
		x.low = 0
	}
	for c := range sl.chunks {
		ch := &sl.chunks[c]
		ch.free = [chunkSize / 64]uint64{}
		if ch.slots == nil {
			continue
		}
		lo := uint32(c) << chunkBits
		for i := lo; i < min(lo+chunkSize, sl.n); i++ {
			if ch.slots[i&chunkMask].seq == 0 {
				sl.setFree(i)
			}
		}
	}
	if x := sl.x; x != nil {
		x.low = 0
	}
}
