package engine

// A hierarchical timing wheel over the slots of one stripe.
//
// Time is in milliseconds (Unix). Level l has 64 buckets, each 64^l ms wide;
// 8 levels cover 2^48 ms, so every deadline a message can have fits.
// An entry with deadline d is kept at the level of the highest 6-bit group in
// which d differs from the wheel's current time w.now, in the bucket given by
// d's digit at that level. Advancing to a bucket of level 0 fires its entries
// (their deadline is exactly that millisecond); reaching the start of a bucket
// of a higher level cascades its entries to lower levels.
//
// Invariants:
//  1. Every entry's deadline d > w.now; an entry at level l, bucket b has
//     (d >> 6(l+1)) == (w.now >> 6(l+1)) and b == (d >> 6l) & 63 > (w.now >> 6l) & 63.
//     So a level's occupied buckets all lie after its current digit, and the
//     lowest level with an occupied bucket holds the earliest event.
//  2. occupied[l] bit b is set exactly when bucket (l, b) is non-empty; the
//     head of a bucket whose bit is clear is never read (it may be stale).
//  5. The buckets (b) are nil until the first insert: a stripe that never
//     held a timed entry (an empty queue's) costs 24 bytes of wheel, not
//     2 KiB; once allocated they are kept, so a stripe cycling between
//     empty and not allocates once.
//  3. An entry's deadline does not change while it is linked (callers remove,
//     change, re-insert).
//  4. The head of a bucket has tprev = bucketMark|bucket; every other linked
//     entry has tprev = the previous slot; unlinked slots have tprev = nilSlot.
//
// insert and remove are O(1); finding the next event looks at one 64-bit word
// per level; advancing costs O(levels) per occupied bucket passed plus O(1)
// per entry fired or cascaded. Nothing ever scans all entries.
//
// Owner: the stripe's mutex (the wheel is not goroutine-safe).

import "math/bits"

const (
	wheelBits   = 6
	wheelSlots  = 1 << wheelBits
	wheelMask   = wheelSlots - 1
	wheelLevels = 8
	bucketMark  = uint32(1) << 31 // tprev of a bucket head: bucketMark | level*64+bucket
)

type timingWheel struct {
	now int64         // ms; every entry is due strictly after now
	b   *wheelBuckets // nil until the first insert (invariant 5)
	n   int           // entries linked
}

// wheelBuckets is the bucket state of a wheel that has held an entry.
type wheelBuckets struct {
	occupied [wheelLevels]uint64
	heads    [wheelLevels][wheelSlots]uint32
}

func newTimingWheel(now int64) timingWheel {
	return timingWheel{now: now}
}

// place returns the level and bucket of deadline d relative to w.now (d > w.now).
func (w *timingWheel) place(d int64) (int, int) {
	l := (bits.Len64(uint64(d^w.now)) - 1) / wheelBits
	if l >= wheelLevels { // beyond 2^48 ms (year 10889); clamp to the top level's last bucket
		return wheelLevels - 1, wheelMask
	}
	return l, int(d>>(wheelBits*l)) & wheelMask
}

// insert links slot i with deadline d. It returns false, linking nothing,
// when d <= w.now: the entry is already due and the caller handles it.
func (w *timingWheel) insert(sl *slab, i uint32, d int64) bool {
	if d <= w.now {
		return false
	}
	l, b := w.place(d)
	s := sl.at(i)
	if w.b == nil {
		w.b = new(wheelBuckets)
	}
	wb := w.b
	head := nilSlot
	if wb.occupied[l]&(1<<uint(b)) != 0 {
		head = wb.heads[l][b]
	}
	s.tnext = head
	s.tprev = bucketMark | uint32(l*wheelSlots+b)
	if head != nilSlot {
		sl.at(head).tprev = i
	}
	wb.heads[l][b] = i
	wb.occupied[l] |= 1 << uint(b)
	w.n++
	return true
}

// remove unlinks slot i if it is linked.
func (w *timingWheel) remove(sl *slab, i uint32) {
	s := sl.at(i)
	if s.tprev == nilSlot {
		return
	}
	if s.tnext != nilSlot {
		sl.at(s.tnext).tprev = s.tprev
	}
	if s.tprev&bucketMark != 0 {
		bk := s.tprev &^ bucketMark
		l, b := bk/wheelSlots, bk%wheelSlots
		w.b.heads[l][b] = s.tnext // linked: the buckets exist
		if s.tnext == nilSlot {
			w.b.occupied[l] &^= 1 << b
		}
	} else {
		sl.at(s.tprev).tnext = s.tnext
	}
	s.tnext, s.tprev = nilSlot, nilSlot
	w.n--
}

// linked reports whether slot i is in the wheel.
func (w *timingWheel) linked(sl *slab, i uint32) bool { return sl.at(i).tprev != nilSlot }

// next returns the earliest time at which advance has work to do: the exact
// deadline for level 0, the start of the bucket to cascade for higher levels
// (a lower bound of the deadlines in it). ok is false when the wheel is empty.
func (w *timingWheel) next() (t int64, ok bool) {
	l, b, found := w.nextBucket()
	if !found {
		return 0, false
	}
	return w.bucketStart(l, b), true
}

func (w *timingWheel) nextBucket() (level, bucket int, ok bool) {
	if w.n == 0 {
		return 0, 0, false // also when the buckets were never made
	}
	for l := 0; l < wheelLevels; l++ {
		occ := w.b.occupied[l]
		if occ == 0 {
			continue
		}
		cur := uint(w.now>>(wheelBits*l)) & wheelMask
		m := occ &^ (uint64(2)<<cur - 1) // buckets after the current digit
		if m == 0 {
			continue
		}
		return l, bits.TrailingZeros64(m), true
	}
	return 0, 0, false
}

func (w *timingWheel) bucketStart(l, b int) int64 {
	up := uint(wheelBits * (l + 1))
	return w.now>>up<<up | int64(b)<<(wheelBits*l)
}

// advance moves the wheel to time to, calling fire for every entry whose
// deadline is <= to, in deadline order (entries due in the same millisecond in
// no particular order). fire is called with the entry already unlinked; it
// may insert entries (with deadlines > w.now, which is the fired entry's
// bucket time while fire runs) but must not remove other entries.
func (w *timingWheel) advance(sl *slab, to int64, fire func(i uint32)) {
	for w.now < to {
		l, b, ok := w.nextBucket()
		if !ok {
			w.now = to
			return
		}
		t := w.bucketStart(l, b)
		if t > to {
			w.now = to
			return
		}
		w.now = t
		// Detach the whole bucket, then fire or cascade each entry.
		i := w.b.heads[l][b]
		w.b.occupied[l] &^= 1 << uint(b)
		for i != nilSlot {
			s := sl.at(i)
			nxt := s.tnext
			s.tnext, s.tprev = nilSlot, nilSlot
			w.n--
			if d := s.deadline(); d > t {
				w.insert(sl, i, d)
			} else {
				fire(i)
			}
			i = nxt
		}
	}
}
