package engine

import (
	"context"
	"testing"
)

// TestTrimmedChunksAreReused: a stripe that fills a backlog, drains it to
// the one message it sent last (so trim gives back the chunks below it),
// then fills again, must put the new backlog in the chunks trim gave back,
// not above its highest slot. Alloc takes the lowest slot of the free set,
// and a nil chunk has none in it: each cycle numbered its slots above the
// last, so the chunk table (48 B an entry, nil or not), the work of every
// trim and rebuildFree, and the slot numbers grew without bound until
// alloc refused at maxSlots ("stripe is full") with the stripe near empty.
func TestTrimmedChunksAreReused(t *testing.T) {
	sl := newSlab()
	seq := uint64(0)
	const backlog = 12 * chunkSize
	kept := nilSlot
	const cycles = 200
	for cycle := range cycles {
		var got []uint32
		for range backlog {
			i, ok := sl.alloc()
			if !ok {
				t.Fatalf("cycle %d: alloc refused", cycle)
			}
			seq++
			sl.at(i).seq = seq
			got = append(got, i)
		}
		// Drain all but the highest slot of this cycle.
		hi := got[0]
		for _, i := range got {
			hi = max(hi, i)
		}
		for _, i := range got {
			if i != hi {
				sl.release(i)
			}
		}
		if kept != nilSlot {
			sl.release(kept) // the one left from the cycle before
		}
		kept = hi
		if err := sl.check(true); err != nil {
			t.Fatalf("cycle %d: %v", cycle, err)
		}
	}
	// One message left between backlogs of 12 chunks: a stripe that
	// reuses what it gave back numbers its slots within some 14 chunks.
	t.Logf("n %d, %d chunk entries, %d held, %d in use", sl.n, len(sl.chunks), sl.heldChunks(), sl.used)
	if limit := uint32(backlog + 2*chunkSize); sl.n > limit {
		t.Fatalf("after %d cycles of a 12-chunk backlog, one message left between them, slot numbers reach %d (%d chunk entries), want at most %d", cycles, sl.n, len(sl.chunks), limit)
	}
}

// TestQueueReusesTrimmedChunks is TestTrimmedChunksAreReused through a
// queue: backlogs of 12 chunks, each received and deleted but for the
// message received last (in flight: a consumer still working on it),
// which is deleted after the next backlog. The stripe's slot numbers (and
// its chunk table) grew by a backlog a cycle.
func TestQueueReusesTrimmedChunks(t *testing.T) {
	b, _ := openTest(t, Options{Stripes: 1})
	q := mustQueue(t, b, "q", DefaultQueueConfig())
	es := make([]SendEntry, 16)
	for i := range es {
		es[i].Body = []byte("x")
	}
	var out []SendResult
	var ms []Message
	var kept ReceiptHandle
	const backlog = 12 * chunkSize
	for cycle := range 30 {
		for range backlog / 16 {
			var err error
			if out, err = q.Send(es, out[:0]); err != nil {
				t.Fatal(err)
			}
		}
		var hs []ReceiptHandle
		for len(hs) < backlog {
			var err error
			ms, err = q.Receive(context.Background(), ReceiveOptions{Max: 16, HasWait: true}, ms[:0])
			if err != nil {
				t.Fatal(err)
			}
			for i := range ms {
				hs = append(hs, ms[i].Handle)
			}
		}
		hi := 0
		for i := range hs {
			if hs[i].slot > hs[hi].slot {
				hi = i
			}
		}
		del := append(hs[:hi:hi], hs[hi+1:]...)
		if !kept.IsZero() {
			del = append(del, kept)
		}
		kept = hs[hi]
		for len(del) > 0 {
			k := min(16, len(del))
			if _, err := q.Delete(del[:k], make([]error, k)); err != nil {
				t.Fatalf("cycle %d: %v", cycle, err)
			}
			del = del[k:]
		}
	}
	st := &q.stripes[0]
	st.mu.Lock()
	n, entries, held, used := st.slab.n, len(st.slab.chunks), st.slab.heldChunks(), st.slab.used
	st.mu.Unlock()
	t.Logf("n %d, %d chunk entries, %d held, %d in use", n, entries, held, used)
	if limit := uint32(backlog + 2*chunkSize); n > limit {
		t.Fatalf("after 30 backlogs of %d, one message in flight between them, slot numbers reach %d (%d chunk entries), want at most %d", backlog, n, entries, limit)
	}
	checkInvariants(t, q)
}
