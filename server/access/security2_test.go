package access

import "testing"

// A very small rate is a very small rate: RequestsPerSecond 1e-10 (one
// request in 317 years) made the interval between requests overflow
// int64, and max(1, MinInt64) let one request through every nanosecond
// (security2 audit). Parse accepts any rate above 0.
func TestLimiterTinyRate(t *testing.T) {
	for _, rate := range []float64{1e-10, 1e-12, 5e-324} {
		l := newLimiter(Limit{RequestsPerSecond: rate, Burst: 1})
		const now = int64(1_000_000_000_000)
		if !l.Allow(now) {
			t.Fatalf("rate %g: the first request was refused", rate)
		}
		for _, later := range []int64{1, 1_000_000_000, 3_600_000_000_000} {
			if l.Allow(now + later) {
				t.Fatalf("rate %g, burst 1: a second request %d ns after the first was allowed", rate, later)
			}
		}
	}
}

// A large burst of a small rate allows its burst (the tolerance
// overflowed int64 and refused every request).
func TestLimiterLargeBurstOfASmallRate(t *testing.T) {
	l := newLimiter(Limit{RequestsPerSecond: 0.01, Burst: 100_000_000})
	const now = int64(1_000_000_000_000)
	for i := range 1000 {
		if !l.Allow(now) {
			t.Fatalf("request %d of a burst of 1e8 refused", i+1)
		}
	}
}
