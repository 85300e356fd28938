package engine

// Benchmarks of HTTP push delivery, end to end in one process: a durable
// broker (sync always), one topic with one SIMPLIFIED HTTP subscription,
// and a net/http receiver on 127.0.0.1 that answers 204 (so no retries).
// Recorded in docs/benchmarks.md ("Topics: HTTP push").
//
//   - drain: b.N notifications are published while the pusher is off; the
//     broker is reopened with it on, and the time to push them all gives
//     pushes/s and the process's CPU per push (broker and receiver
//     together).
//   - rate: b.N publishes at a fixed rate (SMQD_PUSH_RATE, default 1,000/s,
//     open loop) with the pusher on; the delay from each publish call to
//     its push's arrival gives p50 and p99.
//
//	go test -run '^$' -bench BenchmarkPush -benchtime 20000x -count 3 ./engine/
//
// SMQD_PUSH_CONC sets PushOptions.Concurrency (default 16).

import (
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// pushSink is the benchmarks' receiver: it counts pushes and records, for
// bodies that start with a 19-digit timestamp (ns since start, plus 1e18),
// the delay since it.
type pushSink struct {
	start time.Time
	mu    sync.Mutex
	lat   []time.Duration
	got   atomic.Int64
	want  int64
	all   chan struct{}
	addr  string
	srv   *http.Server
}

func newPushSink(b *testing.B, want int) *pushSink {
	s := &pushSink{start: time.Now(), want: int64(want), all: make(chan struct{}), lat: make([]time.Duration, 0, want)}
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if sent, err := strconv.ParseInt(string(body[:min(19, len(body))]), 10, 64); err == nil {
			d := time.Since(s.start) - time.Duration(sent-1e18)
			s.mu.Lock()
			s.lat = append(s.lat, d)
			s.mu.Unlock()
		}
		w.WriteHeader(http.StatusNoContent)
		if s.got.Add(1) == s.want {
			close(s.all)
		}
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s.addr = ln.Addr().String()
	go s.srv.Serve(ln)
	b.Cleanup(func() { s.srv.Close() })
	return s
}

func (s *pushSink) wait(b *testing.B) {
	select {
	case <-s.all:
	case <-time.After(5 * time.Minute):
		b.Fatalf("only %d of %d pushes arrived", s.got.Load(), s.want)
	}
}

func pushBenchBroker(b *testing.B, dir string, disabled bool) *Broker {
	o := Options{Dir: dir}
	o.WAL.Sync = SyncAlways
	o.Push.Concurrency = 16
	if v, err := strconv.Atoi(os.Getenv("SMQD_PUSH_CONC")); err == nil {
		o.Push.Concurrency = v
	}
	o.Push.Disabled = disabled
	if os.Getenv("SMQD_PUSH_SIGN") != "" { // signed, as smqd signs every push
		o.Push.Signer, o.Push.CertURL = testPushKey(), testCertURL
	}
	br, err := Open(o)
	if err != nil {
		b.Fatal(err)
	}
	return br
}

func pushBenchTopic(b *testing.B, br *Broker, addr string) {
	if _, err := br.CreateTopic("t", DefaultTopicConfig()); err != nil {
		b.Fatal(err)
	}
	if _, err := br.Subscribe("t", "s", SubscriptionConfig{Endpoint: "http://" + addr + "/", Format: FormatSimplified}); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkPush(b *testing.B) {
	b.Run("drain", func(b *testing.B) {
		sink := newPushSink(b, b.N)
		dir := b.TempDir()
		br := pushBenchBroker(b, dir, true)
		pushBenchTopic(b, br, sink.addr)
		body := benchBody(256)
		var wg sync.WaitGroup
		var next atomic.Int64
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= int64(b.N) {
					if _, err := br.Publish("t", PublishInput{Body: body}); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if err := br.Close(); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		cpu0, t0 := cpuTime(), time.Now()
		br = pushBenchBroker(b, dir, false)
		defer br.Close()
		sink.wait(b)
		elapsed, cpu := time.Since(t0), cpuTime()-cpu0
		b.StopTimer()
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "pushes/s")
		b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/push")
	})
	b.Run("rate", func(b *testing.B) {
		rate := 1000
		if v, err := strconv.Atoi(os.Getenv("SMQD_PUSH_RATE")); err == nil && v > 0 {
			rate = v
		}
		sink := newPushSink(b, b.N)
		br := pushBenchBroker(b, b.TempDir(), false)
		defer br.Close()
		pushBenchTopic(b, br, sink.addr)
		pad := benchBody(256)
		b.ResetTimer()
		// Open loop: publish i is due at i/rate; 8 publishers share the
		// schedule, so a slow publish does not hold the next one back.
		t0 := time.Now()
		var wg sync.WaitGroup
		var next atomic.Int64
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				body := make([]byte, 0, 19+len(pad))
				for {
					i := next.Add(1) - 1
					if i >= int64(b.N) {
						return
					}
					if d := time.Until(t0.Add(time.Duration(i) * time.Second / time.Duration(rate))); d > 0 {
						time.Sleep(d)
					}
					body = strconv.AppendInt(body[:0], int64(time.Since(sink.start))+1e18, 10)
					body = append(body, pad...)
					if _, err := br.Publish("t", PublishInput{Body: body}); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		sink.wait(b)
		b.StopTimer()
		lat := sink.lat
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	})
}
