package engine

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
)

// TestSlabModel drives slabs with seeded random operations against a
// model (the slots in use and their seqs): a leader's allocs and
// releases, and a follower's claims and releases (with the shrink and
// trim installLocked makes) until it leads (rebuildFree). After every
// step the slab's invariants hold (slab.go 4 and 5: strict once the free
// set is rebuilt), every slot in use holds its seq, and the chunks held
// stay within what trim allows.
func TestSlabModel(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		sl := newSlab()
		model := map[uint32]uint64{}
		var inUse []uint32
		seq := uint64(0)
		drop := func(k int) {
			i := inUse[k]
			inUse[k] = inUse[len(inUse)-1]
			inUse = inUse[:len(inUse)-1]
			delete(model, i)
			sl.release(i)
		}
		follower := seed%3 == 0
		steps := 4000 + rng.IntN(4000)
		for step := range steps {
			if follower && step == steps/2 {
				sl.rebuildFree() // it leads (SetLeader)
				follower = false
			}
			// Phases: grow a backlog, drain it to a few, then churn.
			phase := step * 3 / steps
			grow := rng.IntN(100) < []int{80, 20, 50}[phase]
			switch {
			case grow && follower:
				if sl.used == 0 && len(sl.chunks) > 1 {
					sl.shrink()
				} else if sl.wantsTrim() {
					sl.trim()
				}
				i := uint32(rng.IntN(40 * chunkSize))
				if _, taken := model[i]; taken {
					continue
				}
				if !sl.claim(i) {
					t.Fatalf("seed %d step %d: claim of free slot %d refused", seed, step, i)
				}
				seq++
				sl.at(i).seq = seq
				model[i] = seq
				inUse = append(inUse, i)
			case grow:
				i, ok := sl.alloc()
				if !ok {
					t.Fatalf("seed %d step %d: alloc refused", seed, step)
				}
				if _, taken := model[i]; taken {
					t.Fatalf("seed %d step %d: alloc gave slot %d, in use", seed, step, i)
				}
				seq++
				sl.at(i).seq = seq
				model[i] = seq
				inUse = append(inUse, i)
				if sl.wantsTrim() {
					t.Fatalf("seed %d step %d: after an alloc %d of %d chunks held are empty", seed, step, sl.x.empty, sl.x.held)
				}
			case len(inUse) > 0:
				// Mostly FIFO-ish (the oldest), sometimes any.
				k := 0
				if rng.IntN(4) == 0 {
					k = rng.IntN(len(inUse))
				}
				drop(k)
			}
			if err := sl.check(!follower); err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			for i, s := range model {
				if !sl.valid(i) || sl.at(i).seq != s {
					t.Fatalf("seed %d step %d: slot %d lost its message (valid %v)", seed, step, i, sl.valid(i))
				}
			}
		}
	}
}

// TestNeverEmptyQueueGivesItsSlabBack: a queue drained from a backlog
// while sends go on, and never empty, gives back the chunks of its peak.
// A LIFO free list put each new message in the slot freed last, spread
// over every chunk of the backlog, and kept them there: no chunk emptied,
// and the 64 B a message of the peak stayed for good.
func TestNeverEmptyQueueGivesItsSlabBack(t *testing.T) {
	b, _ := openTest(t, Options{Stripes: 1})
	q := mustQueue(t, b, "q", DefaultQueueConfig())
	chunks := func() (held, inUse int) {
		st := &q.stripes[0]
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.slab.heldChunks(), int(st.slab.used)
	}
	es := make([]SendEntry, 16)
	for i := range es {
		es[i].Body = []byte("x")
	}
	var out []SendResult
	send := func(n int) {
		var err error
		if out, err = q.Send(es[:n], out[:0]); err != nil {
			t.Fatal(err)
		}
	}
	var ms []Message
	take := func() int {
		var err error
		ms, err = q.Receive(context.Background(), ReceiveOptions{Max: 16, HasWait: true}, ms[:0])
		if err != nil && !errors.Is(err, ErrMessageNotExist) {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			return 0
		}
		hs := make([]ReceiptHandle, len(ms))
		for i := range ms {
			hs[i] = ms[i].Handle
		}
		if _, err = q.Delete(hs, make([]error, len(hs))); err != nil {
			t.Fatal(err)
		}
		return len(ms)
	}
	for range 20000 / 16 {
		send(16)
	}
	peak, _ := chunks()
	// The backlog drains to a few hundred while a message is sent for
	// every 16 taken.
	for _, n := chunks(); n > 300; _, n = chunks() {
		take()
		send(1)
	}
	// Then it runs steady around them, never empty.
	for range 400 {
		send(take())
	}
	held, inUse := chunks()
	t.Logf("peak %d chunks; %d messages after the drain in %d chunks", peak, inUse, held)
	if want := inUse/chunkSize + 2 + trimMinChunks; held > want {
		t.Fatalf("a queue of %d messages holds %d chunks of 16 KiB (its peak %d), want at most %d", inUse, held, peak, want)
	}
	checkInvariants(t, q)
}
