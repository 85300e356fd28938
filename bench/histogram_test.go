package bench

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// TestBucketInvariants checks invariants 1 and 2 of histogram.go on the
// bucket edges and on random values.
func TestBucketInvariants(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	vals := []int64{0, 1, 2, 127, 128, 255, 256, 257, 511, 512, 1 << 20, math.MaxInt64, math.MaxInt64 - 1}
	for i := 0; i < 100000; i++ {
		vals = append(vals, r.Int64N(1<<uint(r.IntN(62)+1)))
	}
	for _, v := range vals {
		i := bucketOf(v)
		if i < 0 || i >= numBuckets {
			t.Fatalf("bucketOf(%d) = %d out of range", v, i)
		}
		if lo, hi := lowOf(i), highOf(i); v < lo || v > hi {
			t.Fatalf("value %d in bucket %d [%d, %d]", v, i, lo, hi)
		}
	}
	sort.Slice(vals, func(a, b int) bool { return vals[a] < vals[b] })
	for k := 1; k < len(vals); k++ {
		if bucketOf(vals[k-1]) > bucketOf(vals[k]) {
			t.Fatalf("bucketOf not monotonic at %d, %d", vals[k-1], vals[k])
		}
	}
	for i := 1; i < numBuckets; i++ {
		if lowOf(i) != highOf(i-1)+1 {
			t.Fatalf("bucket %d starts at %d, bucket %d ends at %d", i, lowOf(i), i-1, highOf(i-1))
		}
	}
}

// TestQuantilesAgainstSorted compares quantiles with a sorted reference on
// random data of several shapes: each must be within the bucket resolution
// (1/128 relative) of the exact order statistic.
func TestQuantilesAgainstSorted(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	shapes := map[string]func() int64{
		"uniform":   func() int64 { return r.Int64N(10_000_000) },
		"lognormal": func() int64 { return int64(math.Exp(r.NormFloat64()*1.5 + 12)) },
		"small":     func() int64 { return r.Int64N(300) },
		"bimodal": func() int64 {
			if r.IntN(100) < 2 {
				return 50_000_000 + r.Int64N(1_000_000)
			}
			return 100_000 + r.Int64N(20_000)
		},
	}
	for name, gen := range shapes {
		t.Run(name, func(t *testing.T) {
			// Four workers' histograms merged, as the runner does.
			var parts [4]Histogram
			var ref []int64
			for i := 0; i < 200_000; i++ {
				v := gen()
				parts[i%4].Record(v)
				ref = append(ref, v)
			}
			var h Histogram
			for i := range parts {
				h.Merge(&parts[i])
			}
			sort.Slice(ref, func(a, b int) bool { return ref[a] < ref[b] })
			if h.Count() != uint64(len(ref)) {
				t.Fatalf("count %d, want %d", h.Count(), len(ref))
			}
			for _, q := range []float64{0, 0.5, 0.9, 0.99, 0.999, 1} {
				rank := int(math.Ceil(q * float64(len(ref))))
				if rank < 1 {
					rank = 1
				}
				want := ref[rank-1]
				got := h.Quantile(q)
				tol := float64(want)/subBuckets + 1
				if math.Abs(float64(got-want)) > tol {
					t.Errorf("q%.3f = %d, want %d ± %.0f", q, got, want, tol)
				}
			}
			if h.Max() != ref[len(ref)-1] || h.Min() != ref[0] {
				t.Errorf("min/max %d/%d, want %d/%d", h.Min(), h.Max(), ref[0], ref[len(ref)-1])
			}
			var sum float64
			for _, v := range ref {
				sum += float64(v)
			}
			if mean := sum / float64(len(ref)); math.Abs(h.Mean()-mean) > 1e-6*mean+1 {
				t.Errorf("mean %f, want %f", h.Mean(), mean)
			}
		})
	}
}

func TestHistogramEmptyAndReset(t *testing.T) {
	var h Histogram
	if h.Quantile(0.99) != 0 || h.Max() != 0 || h.Mean() != 0 {
		t.Fatal("empty histogram not zero")
	}
	h.Record(-5) // clamps to 0
	h.Record(1000)
	if h.Quantile(0) != 0 || h.Quantile(1) != 1000 {
		t.Fatalf("q0 %d q1 %d", h.Quantile(0), h.Quantile(1))
	}
	h.Reset()
	if h.Count() != 0 || h.Quantile(0.5) != 0 {
		t.Fatal("reset histogram not empty")
	}
}

func TestHistogramRecordAllocs(t *testing.T) {
	var h Histogram
	if n := testing.AllocsPerRun(1000, func() { h.Record(123456) }); n != 0 {
		t.Fatalf("Record allocates %v", n)
	}
}

func BenchmarkHistogramRecord(b *testing.B) {
	var h Histogram
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		h.Record(int64(i) * 997)
	}
}
