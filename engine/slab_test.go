package engine

import (
	"testing"
	"unsafe"
)

// The slab addresses every slot it handed out at one place, which growth
// never moves, in chunks of 16 KiB: a stripe that held one message took
// 256 KiB, a queue of four stripes 1 MiB, kept until it was deleted.
func TestSlabAddressesEverySlotOnce(t *testing.T) {
	sl := newSlab()
	first, ok := sl.alloc()
	if !ok || first != 0 {
		t.Fatalf("first slot %d %v", first, ok)
	}
	p0 := sl.at(0)
	if len(sl.chunks) != 1 || chunkSize*unsafe.Sizeof(slot{}) > 16<<10 {
		t.Fatalf("a slab of one slot holds %d chunks of %d bytes, want one of 16 KiB at most", len(sl.chunks), chunkSize*unsafe.Sizeof(slot{}))
	}
	const n = 3*chunkSize + 100
	seen := map[uintptr]uint32{}
	for i := uint32(1); i < n; i++ {
		j, ok := sl.alloc()
		if !ok || j != i {
			t.Fatalf("alloc %d: %d %v", i, j, ok)
		}
	}
	for i := uint32(0); i < n; i++ {
		s := sl.at(i)
		a := uintptr(unsafe.Pointer(s))
		if j, dup := seen[a]; dup {
			t.Fatalf("slots %d and %d at one address", j, i)
		}
		seen[a] = i
		s.seq = uint64(i) + 1
	}
	if sl.at(0) != p0 {
		t.Fatal("slot 0 moved as the slab grew")
	}
	for i := uint32(0); i < n; i++ {
		if got := sl.at(i).seq; got != uint64(i)+1 {
			t.Fatalf("slot %d holds %d", i, got)
		}
	}
	// Recovery claims slots out of order: each claimed slot's chunk exists,
	// and no other (invariant 4); the free set then holds the free slots
	// of those chunks, lowest first.
	r := newSlab()
	for _, i := range []uint32{5000, 3, 70, chunkSize - 1, chunkSize} {
		if !r.claim(i) {
			t.Fatalf("claim %d", i)
		}
		r.at(i).seq = uint64(i) + 1
	}
	r.rebuildFree()
	if err := r.check(true); err != nil {
		t.Fatal(err)
	}
	if r.heldChunks() != 3 || r.valid(3*chunkSize) || !r.valid(5000) {
		t.Fatalf("claims in chunks 0, 1 and 19 hold %d chunks (valid 768 %v, 5000 %v)", r.heldChunks(), r.valid(3*chunkSize), r.valid(5000))
	}
	if i, _ := r.alloc(); i != 0 {
		t.Fatalf("alloc after recovery gave slot %d, want the lowest free, 0", i)
	}
}
