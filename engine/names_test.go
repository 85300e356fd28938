package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// TestNameIndexAgainstSortedSlice drives the chunked name index and a plain
// sorted slice with the same seeded inserts, removes and range reads (names
// in order, in reverse, and at random, so chunks split, empty and vanish)
// and compares them after every step.
func TestNameIndexAgainstSortedSlice(t *testing.T) {
	for _, seed := range seedsFromEnv(t, []uint64{1, 2, 3}) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(seed, 0))
			var x nameIndex
			var ref []string
			name := func() string { return fmt.Sprintf("q%05d", rnd.IntN(3000)) }
			check := func(step int, what string) {
				if x.n != len(ref) {
					t.Fatalf("step %d (%s): n %d, want %d", step, what, x.n, len(ref))
				}
				for k, ch := range x.chunks {
					if len(ch) == 0 || len(ch) > nameChunkMax || !sort.StringsAreSorted(ch) {
						t.Fatalf("step %d (%s): chunk %d of %d names breaks invariant 1", step, what, k, len(ch))
					}
				}
				start := name()
				got := slices.Collect(x.from(start))
				want := ref[sort.SearchStrings(ref, start):]
				if !slices.Equal(got, want) {
					t.Fatalf("step %d (%s): from(%q) gives %d names, want %d", step, what, start, len(got), len(want))
				}
			}
			for step := range 20000 {
				// Phases: growing in order, growing in reverse, mixed, shrinking.
				var n string
				switch phase := step / 5000; phase {
				case 0:
					n = fmt.Sprintf("q%05d", step)
				case 1:
					n = fmt.Sprintf("p%05d", 5000-step%5000)
				default:
					n = name()
				}
				i := sort.SearchStrings(ref, n)
				present := i < len(ref) && ref[i] == n
				if step/5000 == 3 || (step/5000 == 2 && rnd.IntN(2) == 0) {
					if got := x.remove(n); got != present {
						t.Fatalf("step %d: remove(%q) = %v, present %v", step, n, got, present)
					}
					if present {
						ref = slices.Delete(ref, i, i+1)
					}
					if step%17 == 0 {
						check(step, "remove "+n)
					}
					continue
				}
				if !present {
					x.insert(n)
					ref = slices.Insert(ref, i, n)
				}
				if step%97 == 0 {
					check(step, "insert "+n)
				}
			}
			check(-1, "end")
			if got := slices.Collect(x.all()); !slices.Equal(got, ref) {
				t.Fatalf("all() differs from the reference")
			}
		})
	}
}
