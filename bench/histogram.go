package bench

// Latency histograms.
//
// Histogram is a log-linear (HDR-style) histogram of non-negative int64
// values (nanoseconds here). Values below 2*subBuckets are counted exactly;
// above, every power-of-two range [2^k, 2^(k+1)) is split into subBuckets
// equal buckets, so a reported value is within 1/subBuckets (0.8 %) of the
// recorded one. The bucket array is fixed (no allocation on Record) and
// covers all of int64.
//
// Ownership: one worker records into its own Histogram (a relaxed atomic
// add per sample, no lock), a reporter may Snapshot it concurrently, and
// histograms of all workers are merged with Merge at the end.
//
// Invariants:
//  1. bucketOf is monotonic: a <= b implies bucketOf(a) <= bucketOf(b).
//  2. lowOf(bucketOf(v)) <= v <= highOf(bucketOf(v)).

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

const (
	subBits    = 7
	subBuckets = 1 << subBits // buckets per power of two
	// numBuckets covers values up to math.MaxInt64: shift up to 63-subBits.
	numBuckets = (64 - subBits) * subBuckets
)

// bucketOf returns the bucket index of v (v >= 0).
func bucketOf(v int64) int {
	if v < 0 {
		v = 0
	}
	u := uint64(v)
	if u < 2*subBuckets {
		return int(u)
	}
	shift := bits.Len64(u) - subBits - 1 // u>>shift is in [subBuckets, 2*subBuckets)
	return (shift+1)*subBuckets + int(u>>shift) - subBuckets
}

// lowOf returns the smallest value of bucket i.
func lowOf(i int) int64 {
	if i < 2*subBuckets {
		return int64(i)
	}
	shift := i/subBuckets - 1
	m := uint64(i%subBuckets + subBuckets)
	return int64(m << shift)
}

// highOf returns the largest value of bucket i.
func highOf(i int) int64 {
	if i < 2*subBuckets {
		return int64(i)
	}
	shift := i/subBuckets - 1
	h := lowOf(i) + int64(uint64(1)<<shift) - 1
	if h < 0 { // the last bucket ends at MaxInt64
		return math.MaxInt64
	}
	return h
}

// Histogram counts values in log-linear buckets. The zero value is empty
// and ready to use.
type Histogram struct {
	counts [numBuckets]atomic.Uint64
	n      atomic.Uint64
	sum    atomic.Int64 // sum of values, for the mean (wraps past ~292 years)
	max    atomic.Int64
	min    atomic.Int64 // valid when n > 0; stored as value+1 so zero means unset
}

// Record adds one value. Safe to call from one writer concurrently with
// Snapshot from others.
func (h *Histogram) Record(v int64) {
	if v < 0 {
		v = 0
	}
	h.counts[bucketOf(v)].Add(1)
	h.n.Add(1)
	h.sum.Add(v)
	if v > h.max.Load() {
		h.max.Store(v)
	}
	if m := h.min.Load(); m == 0 || v+1 < m {
		h.min.Store(v + 1)
	}
}

// RecordDuration adds a duration.
func (h *Histogram) RecordDuration(d time.Duration) { h.Record(int64(d)) }

// Count returns the number of recorded values.
func (h *Histogram) Count() uint64 { return h.n.Load() }

// Merge adds o's counts into h. h must not be recorded into concurrently by
// another goroutine (o may be).
func (h *Histogram) Merge(o *Histogram) {
	if o.n.Load() == 0 {
		return
	}
	for i := range o.counts {
		if c := o.counts[i].Load(); c != 0 {
			h.counts[i].Add(c)
		}
	}
	h.n.Add(o.n.Load())
	h.sum.Add(o.sum.Load())
	if m := o.max.Load(); m > h.max.Load() {
		h.max.Store(m)
	}
	if m := o.min.Load(); m != 0 && (h.min.Load() == 0 || m < h.min.Load()) {
		h.min.Store(m)
	}
}

// Reset empties h. Not safe with concurrent Record.
func (h *Histogram) Reset() {
	for i := range h.counts {
		h.counts[i].Store(0)
	}
	h.n.Store(0)
	h.sum.Store(0)
	h.max.Store(0)
	h.min.Store(0)
}

// Max returns the largest recorded value (exact), 0 when empty.
func (h *Histogram) Max() int64 { return h.max.Load() }

// Min returns the smallest recorded value (exact), 0 when empty.
func (h *Histogram) Min() int64 {
	if m := h.min.Load(); m > 0 {
		return m - 1
	}
	return 0
}

// Mean returns the mean of the recorded values, 0 when empty.
func (h *Histogram) Mean() float64 {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	return float64(h.sum.Load()) / float64(n)
}

// Quantile returns the value at quantile q (0..1): the upper end of the
// bucket holding the ceil(q*n)-th smallest value, clamped to the exact
// maximum and minimum. It returns 0 when empty.
func (h *Histogram) Quantile(q float64) int64 {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	if rank < 1 {
		rank = 1
	}
	if rank > n {
		rank = n
	}
	var seen uint64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			v := highOf(i)
			if mx := h.Max(); v > mx {
				v = mx
			}
			if mn := h.Min(); v < mn {
				v = mn
			}
			return v
		}
	}
	return h.Max()
}

// Summary is a histogram reduced to the figures a report shows, in
// microseconds.
type Summary struct {
	Count  uint64  `json:"count"`
	MeanUs float64 `json:"mean_us"`
	P50Us  float64 `json:"p50_us"`
	P90Us  float64 `json:"p90_us"`
	P99Us  float64 `json:"p99_us"`
	P999Us float64 `json:"p999_us"`
	MaxUs  float64 `json:"max_us"`
}

func us(ns int64) float64 { return math.Round(float64(ns)/10) / 100 }

// Summary returns h's count, mean, p50, p90, p99, p99.9 and max.
func (h *Histogram) Summary() Summary {
	return Summary{
		Count:  h.Count(),
		MeanUs: math.Round(h.Mean()/10) / 100,
		P50Us:  us(h.Quantile(0.50)),
		P90Us:  us(h.Quantile(0.90)),
		P99Us:  us(h.Quantile(0.99)),
		P999Us: us(h.Quantile(0.999)),
		MaxUs:  us(h.Max()),
	}
}
