package engine

// The message table of a stripe.
//
// A slab is a growable array of fixed-size, pointer-free slot structs,
// addressed by a uint32 slot number, in chunks of 2^8 slots (16 KiB) so that
// growth never copies and the GC has nothing to scan. A chunk is allocated
// when the first slot in it is, and kept until the queue is deleted or the
// stripe is empty at a send (shrink: all but the first go): chunks
// of 2^12 slots (256 KiB) made a stripe that ever held one message cost
// 256 KiB, a queue of four stripes 1 MiB (the soak audit saw 200 queues of
// one message each add 53 MB of heap). Lanes, timing-wheel
// buckets and the free list are intrusive linked lists of slot numbers.
//
// Invariants:
//  1. A slot is in exactly one of: the free list (state free), no list
//     (state pending: a send whose record is not yet durable), a lane and the
//     wheel (Active), or only the wheel (Delayed, Inactive).
//  2. seq is 0 exactly when the slot is free; a slot's seq never repeats
//     (seqs are unique within the queue), so a stale handle cannot match a
//     reused slot.
//  3. Every time field is stored relative to enqueueMs and fits 32 bits: a
//     message lives at most MaxRetention (7 days) and a visibility timeout
//     adds at most 12 hours, both far below 2^32 ms (49 days).
//
// Owner: the stripe's mutex guards the slab and every slot in it.

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
	next     uint32 // lane link (Active) or free-list link (free)
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
	chunks []*[chunkSize]slot
	free   uint32 // head of the free list
	n      uint32 // slots ever handed out (high-water mark)
	used   int    // slots not free
}

func newSlab() slab { return slab{free: nilSlot} }

func (sl *slab) at(i uint32) *slot { return &sl.chunks[i>>chunkBits][i&chunkMask] }

// valid reports whether i names a slot that exists.
func (sl *slab) valid(i uint32) bool { return i < sl.n }

// alloc takes a free slot (growing the slab if needed) and returns it zeroed.
func (sl *slab) alloc() (uint32, bool) {
	if sl.used == 0 && len(sl.chunks) > 1 {
		sl.shrink()
	}
	if i := sl.free; i != nilSlot {
		s := sl.at(i)
		sl.free = s.next
		*s = slot{}
		sl.used++
		return i, true
	}
	if sl.n >= maxSlots {
		return 0, false
	}
	i := sl.n
	if i>>chunkBits >= uint32(len(sl.chunks)) {
		sl.chunks = append(sl.chunks, new([chunkSize]slot))
	}
	sl.n++
	sl.used++
	*sl.at(i) = slot{}
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
	sl.chunks = append([]*[chunkSize]slot(nil), sl.chunks[0])
	sl.free = nilSlot
	sl.n = 0
}

// release returns slot i to the free list.
func (sl *slab) release(i uint32) {
	s := sl.at(i)
	*s = slot{next: sl.free}
	sl.free = i
	sl.used--
}

// claim takes the specific slot i during recovery (before rebuildFree). It
// grows the slab as needed; the slot must be free.
func (sl *slab) claim(i uint32) bool {
	if i >= maxSlots {
		return false
	}
	for i>>chunkBits >= uint32(len(sl.chunks)) {
		sl.chunks = append(sl.chunks, new([chunkSize]slot))
	}
	if i >= sl.n {
		sl.n = i + 1
	}
	if sl.at(i).seq != 0 {
		return false
	}
	sl.used++
	return true
}

// rebuildFree links every free slot below the high-water mark into the free
// list, lowest first. Used once at the end of recovery.
func (sl *slab) rebuildFree() {
	sl.free = nilSlot
	for i := int64(sl.n) - 1; i >= 0; i-- {
		if s := sl.at(uint32(i)); s.seq == 0 {
			s.next = sl.free
			sl.free = uint32(i)
		}
	}
}
