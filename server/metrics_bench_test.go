package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
	"github.com/valyala/fasthttp"
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

// BenchmarkExposition is one scrape of /metrics with 10,000 queues, each
// with a message, under each --metrics-per-queue choice: the time to
// gather and write it, and its size (bytes/scrape), for docs/operations.md
// ("Per-queue series").
func BenchmarkExposition(b *testing.B) {
	br, err := engine.Open(engine.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { br.Close() })
	for i := range 10000 {
		name := fmt.Sprintf("queue-%05d", i)
		if _, err := br.CreateQueue(name, engine.DefaultQueueConfig()); err != nil {
			b.Fatal(err)
		}
		q, err := br.Queue(name)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := q.Send([]engine.SendEntry{{Body: []byte("x")}}, nil); err != nil {
			b.Fatal(err)
		}
	}
	for _, per := range []string{"all", "top:100", "off"} {
		b.Run(per, func(b *testing.B) {
			s, err := New(br, Options{Credentials: map[string]string{testKeyID: testSecret}, MetricsPerQueue: per})
			if err != nil {
				b.Fatal(err)
			}
			st := s.states.Get().(*reqState)
			defer s.states.Put(st)
			var ctx fasthttp.RequestCtx
			size := 0
			for b.Loop() {
				ctx.Response.Reset()
				s.serveMetrics(&ctx, st)
				size = len(ctx.Response.Body())
			}
			b.ReportMetric(float64(size), "bytes/scrape")
		})
	}
}
