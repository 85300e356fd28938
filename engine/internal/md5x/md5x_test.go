package md5x

import (
	"crypto/md5"
	"math/rand/v2"
	"testing"
)

// edges are the lengths where MD5's padding changes shape.
var edges = []int{0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 121, 127, 128, 1024, 1031, 65536}

func checkSums(t testing.TB, bodies *[Lanes][]byte, n int, sums *[Lanes][md5.Size]byte, how string) {
	t.Helper()
	for i := 0; i < n; i++ {
		if want := md5.Sum(bodies[i]); sums[i] != want {
			t.Fatalf("%s: lane %d of %d (%d bytes): %x, want %x", how, i, n, len(bodies[i]), sums[i], want)
		}
	}
}

// Every lane's digest is crypto/md5's, through the eight-lane path itself
// (sum8) and through Sum8's choice, for random counts and lengths around
// the padding edges (invariant 1).
func TestSum8MatchesCryptoMD5(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for round := range 3000 {
		n := 1 + rnd.IntN(Lanes)
		var bodies [Lanes][]byte
		most := 0
		for i := 0; i < n; i++ {
			l := edges[rnd.IntN(len(edges))]
			if round%2 == 1 {
				l = rnd.IntN(300)
			}
			b := make([]byte, l)
			for k := range b {
				b[k] = byte(rnd.Uint32())
			}
			bodies[i] = b
			most = max(most, blocks(l))
		}
		var sums [Lanes][md5.Size]byte
		Sum8(&bodies, n, &sums)
		checkSums(t, &bodies, n, &sums, "Sum8")
		if haveBlock8 {
			var lanes [Lanes][md5.Size]byte
			sum8(&bodies, n, most, &lanes)
			checkSums(t, &bodies, n, &lanes, "sum8")
		}
	}
	if !haveBlock8 {
		t.Log("no AVX2 here: only the one-by-one path was checked")
	}
}

func TestSum8Allocates(t *testing.T) {
	var bodies [Lanes][]byte
	for i := range bodies {
		bodies[i] = make([]byte, 1024)
	}
	var sums [Lanes][md5.Size]byte
	if a := testing.AllocsPerRun(100, func() { Sum8(&bodies, Lanes, &sums) }); a != 0 {
		t.Fatalf("%v allocations per Sum8, want 0 (invariant 2)", a)
	}
}

func FuzzSum8(f *testing.F) {
	f.Add([]byte("abc"), uint8(3), uint16(60))
	f.Fuzz(func(t *testing.T, data []byte, n uint8, step uint16) {
		k := 1 + int(n)%Lanes
		var bodies [Lanes][]byte
		for i := 0; i < k; i++ {
			lo := min(len(data), i*int(step%200))
			bodies[i] = data[lo:]
		}
		var sums [Lanes][md5.Size]byte
		Sum8(&bodies, k, &sums)
		checkSums(t, &bodies, k, &sums, "Sum8")
	})
}

// BenchmarkSum16 is a batch send's 16 bodies of 1 KiB: two calls of
// eight, against crypto/md5 one by one.
func BenchmarkSum16(b *testing.B) {
	var bodies [2][Lanes][]byte
	for g := range bodies {
		for i := range bodies[g] {
			bodies[g][i] = make([]byte, 1024)
		}
	}
	var sums [Lanes][md5.Size]byte
	b.Run("md5x", func(b *testing.B) {
		b.SetBytes(16 * 1024)
		for b.Loop() {
			Sum8(&bodies[0], Lanes, &sums)
			Sum8(&bodies[1], Lanes, &sums)
		}
	})
	b.Run("crypto-md5", func(b *testing.B) {
		b.SetBytes(16 * 1024)
		for b.Loop() {
			for g := range bodies {
				for i := range bodies[g] {
					sums[i] = md5.Sum(bodies[g][i])
				}
			}
		}
	})
}
