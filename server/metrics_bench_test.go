package server

import (
	"testing"
	"time"
)

// BenchmarkObserve is the request metrics' cost per request: one latency
// observation and one response count. The same file runs against the
// hand-written atomics this package had before client_golang (35d8f28) for
// the comparison in docs/operations.md ("Metrics").
func BenchmarkObserve(b *testing.B) {
	br := benchBroker(b)
	s := benchServer(b, br)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			s.metrics.observe(opSendMessage, 201, time.Duration(i&1023)*time.Microsecond)
			i++
		}
	})
}
