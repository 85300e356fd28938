package engine

import "unsafe"

// Software prefetch for draining a cold backlog.
//
// A FIFO lane over a large backlog hands out its oldest message, whose slot,
// lane neighbour, wheel neighbours and body were last touched long ago and
// come from DRAM. takeLocked therefore hints the next lane head's lines to the
// CPU one receive ahead (prefetchSlot, storage.prefetch), so that the misses
// overlap with the current receive instead of stalling the next one. A hint
// never faults and never changes program state: on platforms without an
// implementation (prefetch_other.go) it does nothing.

// prefetchMinActive: below this many Active messages in a stripe the lane
// heads are most likely still in cache, and the hints would only cost (about
// 3 % of an in-memory cycle, measured).
const prefetchMinActive = 1024

// prefetchSlot hints slot i of sl into cache, if i names a slot.
func (sl *slab) prefetchSlot(i uint32) {
	if sl.valid(i) {
		prefetchLines(unsafe.Pointer(sl.at(i)), 1)
	}
}

// prefetchNextLocked hints everything the next take from lane p will touch:
// the head's body, its successor in the lane and its wheel neighbours. The
// head itself was hinted by the take before (as its predecessor's successor).
// (Hinting two takes ahead instead measured no better.)
func (st *stripe) prefetchNextLocked(p int) {
	if st.nActive < prefetchMinActive {
		return
	}
	h := st.lanes[p].head
	if h == nilSlot {
		return
	}
	s := st.slab.at(h)
	st.slab.prefetchSlot(s.next)
	st.slab.prefetchSlot(s.tnext)
	if s.tprev&bucketMark == 0 {
		st.slab.prefetchSlot(s.tprev)
	}
	st.q.b.store.prefetch(s.bodyPos, s.recSize)
}
