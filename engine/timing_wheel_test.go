package engine

import (
	"math/rand/v2"
	"sort"
	"testing"
	"unsafe"
)

// wheelHarness drives a timing wheel over a slab whose slots are Active with
// the wanted deadline as their expiry.
type wheelHarness struct {
	sl   slab
	w    timingWheel
	base int64 // enqueue time of every entry
}

func newWheelHarness(now int64) *wheelHarness {
	return &wheelHarness{sl: newSlab(), w: newTimingWheel(now), base: now}
}

func (h *wheelHarness) add(t *testing.T, deadline int64) uint32 {
	i, _ := h.sl.alloc()
	s := h.sl.at(i)
	s.seq = uint64(i) + 1
	s.setMeta(h.base, 1, stActive)
	s.expOff = uint32(deadline - h.base) // expiry == deadline
	s.tnext, s.tprev = nilSlot, nilSlot
	if !h.w.insert(&h.sl, i, deadline) {
		t.Fatalf("insert %d at now %d refused", deadline, h.w.now)
	}
	return i
}

func TestTimingWheelFiresInOrderAtDeadline(t *testing.T) {
	h := newWheelHarness(1000)
	rnd := rand.New(rand.NewPCG(1, 2))
	want := map[uint32]int64{}
	for k := 0; k < 5000; k++ {
		d := 1001 + rnd.Int64N(int64(MaxRetention/1e6)+12*3600_000)
		want[h.add(t, d)] = d
	}
	var last int64
	fired := 0
	// Advance in random steps up to past the 7-day horizon; every entry must
	// fire exactly once, in deadline order, never before its deadline and
	// never after the advance that passes it.
	for h.w.now < 1000+int64(MaxRetention/1e6)+13*3600_000 {
		to := h.w.now + 1 + rnd.Int64N(3*3600_000)
		h.w.advance(&h.sl, to, func(i uint32) {
			d := want[i]
			if d > to || d < last {
				t.Fatalf("fired %d (deadline %d) advancing to %d after %d", i, d, to, last)
			}
			if h.w.now != d {
				t.Fatalf("fired %d with wheel at %d, deadline %d", i, h.w.now, d)
			}
			last = d
			delete(want, i)
			fired++
		})
		if h.w.now != to {
			t.Fatalf("now %d after advance to %d", h.w.now, to)
		}
		if next, ok := h.w.next(); ok && next <= to {
			t.Fatalf("next event %d not after %d", next, to)
		}
	}
	if len(want) != 0 || fired != 5000 || h.w.n != 0 {
		t.Fatalf("%d not fired, %d fired, %d linked", len(want), fired, h.w.n)
	}
}

func TestTimingWheelSevenDayHorizonAndCancel(t *testing.T) {
	now := t0.UnixMilli()
	h := newWheelHarness(now)
	far := h.add(t, now+int64(MaxDelay/1e6)) // 7 days
	farther := h.add(t, now+int64(MaxDelay/1e6)+int64(MaxVisibilityTimeout/1e6))
	near := h.add(t, now+1)
	cancel := h.add(t, now+int64(MaxDelay/1e6)-1)
	h.w.remove(&h.sl, cancel)
	h.w.remove(&h.sl, cancel) // idempotent
	if h.w.linked(&h.sl, cancel) || h.w.n != 3 {
		t.Fatalf("cancel: linked=%v n=%d", h.w.linked(&h.sl, cancel), h.w.n)
	}
	var order []uint32
	steps := 0
	for h.w.n > 0 {
		next, ok := h.w.next()
		if !ok {
			t.Fatal("entries but no next event")
		}
		h.w.advance(&h.sl, next, func(i uint32) { order = append(order, i) })
		steps++
	}
	if len(order) != 3 || order[0] != near || order[1] != far || order[2] != farther {
		t.Fatalf("order %v want %v", order, []uint32{near, far, farther})
	}
	// Jumping straight to each event costs a handful of cascades, never a
	// walk over milliseconds.
	if steps > 3*wheelLevels {
		t.Fatalf("%d steps to drain 3 entries", steps)
	}
}

func TestTimingWheelRemoveMiddleAndHead(t *testing.T) {
	h := newWheelHarness(0)
	var ids []uint32
	for k := 0; k < 10; k++ {
		ids = append(ids, h.add(t, 500)) // one bucket
	}
	h.w.remove(&h.sl, ids[9]) // head (inserted last)
	h.w.remove(&h.sl, ids[4]) // middle
	h.w.remove(&h.sl, ids[0]) // tail
	var got []uint32
	h.w.advance(&h.sl, 500, func(i uint32) { got = append(got, i) })
	sort.Slice(got, func(a, b int) bool { return got[a] < got[b] })
	want := []uint32{ids[1], ids[2], ids[3], ids[5], ids[6], ids[7], ids[8]}
	if len(got) != len(want) {
		t.Fatalf("got %v want %v", got, want)
	}
	for k := range got {
		if got[k] != want[k] {
			t.Fatalf("got %v want %v", got, want)
		}
	}
}

func TestTimingWheelRefusesPastDeadline(t *testing.T) {
	h := newWheelHarness(100)
	i, _ := h.sl.alloc()
	h.sl.at(i).tprev = nilSlot
	if h.w.insert(&h.sl, i, 100) || h.w.insert(&h.sl, i, 5) {
		t.Fatal("insert at or before now accepted")
	}
}

func BenchmarkTimingWheelInsertRemove(b *testing.B) {
	h := newWheelHarness(0)
	ids := make([]uint32, 1024)
	for k := range ids {
		i, _ := h.sl.alloc()
		s := h.sl.at(i)
		s.setMeta(0, 1, stActive)
		s.tprev = nilSlot
		ids[k] = i
	}
	b.ReportAllocs()
	for n := 0; n < b.N; n++ {
		i := ids[n&1023]
		s := h.sl.at(i)
		s.expOff = uint32(1 + n%(7*86400_000))
		h.w.insert(&h.sl, i, int64(s.expOff))
		h.w.remove(&h.sl, i)
	}
}

// TestStripeSize: a stripe is a whole number of cache lines (see the
// stripe type), and an empty queue's stripes stay small (the many-queues
// target: about 2 KB per empty queue in all).
func TestStripeSize(t *testing.T) {
	size := unsafe.Sizeof(stripe{})
	if size%64 != 0 {
		t.Fatalf("stripe is %d bytes, not a multiple of 64: neighbouring stripes would share a cache line; pad it", size)
	}
	if size > 384 {
		t.Fatalf("stripe is %d bytes; 4 of them per empty queue were meant to fit in 1.5 KiB", size)
	}
}

// TestWheelBucketsLazy: a wheel that never held an entry has no buckets;
// one that emptied keeps them (no allocation per message cycle).
func TestWheelBucketsLazy(t *testing.T) {
	sl := newSlab()
	w := newTimingWheel(1000)
	if w.b != nil {
		t.Fatal("a new wheel has buckets")
	}
	if _, ok := w.next(); ok {
		t.Fatal("an empty wheel has a next event")
	}
	w.advance(&sl, 5000, func(uint32) { t.Fatal("fired from an empty wheel") })
	i, _ := sl.alloc()
	sl.at(i).tprev = nilSlot
	if !w.insert(&sl, i, 6000) || w.b == nil {
		t.Fatal("insert did not make the buckets")
	}
	w.remove(&sl, i)
	if w.b == nil {
		t.Fatal("the buckets went with the last entry")
	}
	allocs := testing.AllocsPerRun(100, func() {
		w.insert(&sl, i, 7000)
		w.remove(&sl, i)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per insert/remove once the buckets exist", allocs)
	}
}
