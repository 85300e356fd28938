package engine

import "fmt"

// checkLocked verifies stripe.go invariants 1-3 and the wheel's invariants.
// It walks every slot, so it is for tests only.
func (st *stripe) checkLocked() error {
	inLane := map[uint32]bool{}
	lanes := st.lanes
	if lanes == nil {
		lanes = newLanes() // none yet: all empty
	}
	for p := range lanes {
		ln := lanes[p]
		bit := st.laneBits.Load()&(1<<uint(p)) != 0
		if (ln.head != nilSlot) != bit {
			return fmt.Errorf("lane %d: head %d but bit %v (inv 1)", p, ln.head, bit)
		}
		prev := nilSlot
		for i := ln.head; i != nilSlot; i = st.slab.at(i).next {
			s := st.slab.at(i)
			if s.prev != prev {
				return fmt.Errorf("lane %d: slot %d prev %d want %d", p, i, s.prev, prev)
			}
			if s.state() != stActive || s.prio()-1 != p {
				return fmt.Errorf("lane %d: slot %d state %d prio %d (inv 2)", p, i, s.state(), s.prio())
			}
			if inLane[i] {
				return fmt.Errorf("lane %d: slot %d twice", p, i)
			}
			inLane[i] = true
			prev = i
		}
		if ln.tail != prev {
			return fmt.Errorf("lane %d: tail %d want %d", p, ln.tail, prev)
		}
	}
	inWheel := map[uint32]bool{}
	n := 0
	for l := 0; l < wheelLevels && st.wheel.b != nil; l++ {
		for b := 0; b < wheelSlots; b++ {
			if st.wheel.b.occupied[l]&(1<<uint(b)) == 0 {
				continue // its head is stale by design
			}
			h := st.wheel.b.heads[l][b]
			if h == nilSlot {
				return fmt.Errorf("wheel bucket %d/%d: occupied but empty", l, b)
			}
			if want := bucketMark | uint32(l*wheelSlots+b); st.slab.at(h).tprev != want {
				return fmt.Errorf("wheel bucket %d/%d: head %d has tprev %x, want %x", l, b, h, st.slab.at(h).tprev, want)
			}
			for i := h; i != nilSlot; i = st.slab.at(i).tnext {
				d := st.slab.at(i).deadline()
				if d <= st.wheel.now {
					return fmt.Errorf("wheel: slot %d deadline %d <= now %d", i, d, st.wheel.now)
				}
				if gl, gb := st.wheel.place(d); gl != l || gb != b {
					return fmt.Errorf("wheel: slot %d at %d/%d, belongs at %d/%d", i, l, b, gl, gb)
				}
				inWheel[i] = true
				n++
			}
		}
	}
	if n != st.wheel.n {
		return fmt.Errorf("wheel: %d linked, count says %d", n, st.wheel.n)
	}
	if err := st.slab.check(false); err != nil {
		return err
	}
	var act, inact, del int64
	for i := uint32(0); i < st.slab.n; i++ {
		if !st.slab.valid(i) {
			continue
		}
		s := st.slab.at(i)
		switch s.state() {
		case stActive:
			act++
			if !inLane[i] || !inWheel[i] {
				return fmt.Errorf("active slot %d: lane %v wheel %v (inv 2)", i, inLane[i], inWheel[i])
			}
		case stInactive, stDelayed:
			if s.state() == stInactive {
				inact++
			} else {
				del++
			}
			if inLane[i] || !inWheel[i] {
				return fmt.Errorf("slot %d state %d: lane %v wheel %v (inv 2)", i, s.state(), inLane[i], inWheel[i])
			}
		default:
			if inLane[i] || inWheel[i] {
				return fmt.Errorf("slot %d state %d linked (inv 2)", i, s.state())
			}
		}
	}
	if act != int64(st.nActive) || inact != int64(st.nInactive) || del != int64(st.nDelayed) {
		return fmt.Errorf("counts %d/%d/%d, slots say %d/%d/%d (inv 3)", st.nActive, st.nInactive, st.nDelayed, act, inact, del)
	}
	return nil
}

// check verifies slab.go invariants 4 to 6: strict, the free set holds
// every free slot (not so for the slots a claim skipped, before
// rebuildFree).
func (sl *slab) check(strict bool) error {
	x := sl.x
	if (x == nil) != (len(sl.chunks) <= 1) || sl.n > uint32(len(sl.chunks))<<chunkBits {
		return fmt.Errorf("slab: %d chunks, index %v, n %d (inv 6)", len(sl.chunks), x != nil, sl.n)
	}
	if x != nil && len(x.avail) != (len(sl.chunks)+63)/64 {
		return fmt.Errorf("slab: %d chunks, %d avail words (inv 6)", len(sl.chunks), len(x.avail))
	}
	used, empty, held := uint32(0), uint32(0), uint32(0)
	for c := range sl.chunks {
		ch := &sl.chunks[c]
		has := ch.hasFree()
		if x != nil {
			if bit := x.avail[c/64]&(1<<(c%64)) != 0; bit != has {
				return fmt.Errorf("slab: chunk %d has a free slot %v, avail says %v (inv 6)", c, has, bit)
			}
			if has && uint32(c/64) < x.low {
				return fmt.Errorf("slab: chunk %d has a free slot below low %d (inv 6)", c, x.low)
			}
		}
		if ch.slots == nil {
			if ch.live != 0 || has {
				return fmt.Errorf("slab: nil chunk %d counts %d in use, free slots %v (inv 4)", c, ch.live, has)
			}
			continue
		}
		held++
		live := uint32(0)
		for j := range ch.slots {
			i := uint32(c)<<chunkBits | uint32(j)
			inUse := i < sl.n && ch.slots[j].seq != 0
			if inUse {
				live++
			}
			in := sl.isFree(i)
			if in && (i >= sl.n || inUse) {
				return fmt.Errorf("slab: free set holds slot %d (n %d, in use %v) (inv 5)", i, sl.n, inUse)
			}
			if strict && !in && i < sl.n && !inUse {
				return fmt.Errorf("slab: free slot %d is not in the free set (inv 5)", i)
			}
		}
		if live != ch.live {
			return fmt.Errorf("slab: chunk %d has %d slots in use, counts %d (inv 4)", c, live, ch.live)
		}
		if live == 0 && c > 0 {
			empty++
		}
		used += live
	}
	if used != sl.used || held != uint32(sl.heldChunks()) || (x != nil && empty != x.empty) {
		return fmt.Errorf("slab: %d slots in use, %d chunks held, %d empty; counts %d, %d, %+v (inv 6)", used, held, empty, sl.used, sl.heldChunks(), x)
	}
	return nil
}
