package engine

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/smqd/smqd/wal"
)

// cpuTime returns the CPU time (user + system) the process has used. On a
// shared, noisy machine CPU time per operation is steadier than wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchBody(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + i%26)
	}
	return b
}

// BenchmarkCycle is the in-process full cycle: send a batch, receive a
// batch, delete it; 1 KiB bodies; GOMAXPROCS goroutines on one queue.
// msgs/s counts messages fully processed (deleted).
func BenchmarkCycle(b *testing.B) {
	for _, batch := range []int{1, 16} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			benchCycle(b, Options{}, batch, 1)
		})
	}
}

// BenchmarkCycleDurable is BenchmarkCycle on a durable broker in sync mode
// "always" (every send acknowledged after its fsync) on the test's temporary
// directory; 32 x GOMAXPROCS goroutines so that group commit has company
// (each goroutine waits for an fsync per cycle).
func BenchmarkCycleDurable(b *testing.B) {
	for _, mode := range []wal.SyncMode{wal.SyncAlways, wal.SyncInterval} {
		for _, batch := range []int{1, 16} {
			b.Run(fmt.Sprintf("sync=%s/batch=%d", mode, batch), func(b *testing.B) {
				o := Options{Dir: b.TempDir()}
				o.WAL.Sync = mode
				benchCycle(b, o, batch, parallelismFromEnv(64))
			})
		}
	}
}

func benchCycle(b *testing.B, o Options, batch, parallelism int) {
	{
		{
			br, err := Open(o)
			if err != nil {
				b.Fatal(err)
			}
			defer br.Close()
			q := mustQueue(b, br, "bench", DefaultQueueConfig())
			body := benchBody(1024)
			b.SetBytes(int64(batch * len(body)))
			b.ReportAllocs()
			b.SetParallelism(parallelism)
			b.ResetTimer()
			cpu0 := cpuTime()
			b.RunParallel(func(pb *testing.PB) {
				entries := make([]SendEntry, batch)
				for i := range entries {
					entries[i] = SendEntry{Body: body}
				}
				var out []SendResult
				var msgs []Message
				hs := make([]ReceiptHandle, batch)
				errs := make([]error, batch)
				ctx := context.Background()
				for pb.Next() {
					var err error
					if out, err = q.Send(entries, out[:0]); err != nil {
						b.Error(err)
						return
					}
					got := 0
					for got < batch {
						msgs, err = q.Receive(ctx, ReceiveOptions{Max: batch - got, HasWait: true}, msgs[:0])
						if err == ErrMessageNotExist {
							continue // another goroutine took ours; it leaves us one of its own
						}
						if err != nil {
							b.Error(err)
							return
						}
						for i := range msgs {
							hs[i] = msgs[i].Handle
						}
						if _, err := q.Delete(hs[:len(msgs)], errs); err != nil {
							b.Error(err)
							return
						}
						got += len(msgs)
					}
				}
			})
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "msgs/s")
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N*batch), "cpu-ns/msg")
		}
	}
}

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkBacklogMemory measures heap bytes per backlogged message beyond
// its body, with 1,000,000 messages of 1 KiB (run with -benchtime 1x).
func BenchmarkBacklogMemory(b *testing.B) {
	const n = 1_000_000
	const size = 1024
	for it := 0; it < b.N; it++ {
		br, err := Open(Options{})
		if err != nil {
			b.Fatal(err)
		}
		q := mustQueue(b, br, "mem", DefaultQueueConfig())
		body := benchBody(size)
		entries := make([]SendEntry, MaxBatch)
		for i := range entries {
			entries[i] = SendEntry{Body: body}
		}
		before := heapInUse()
		var out []SendResult
		for sent := 0; sent < n; sent += MaxBatch {
			if out, err = q.Send(entries, out[:0]); err != nil {
				b.Fatal(err)
			}
		}
		after := heapInUse()
		per := (float64(after) - float64(before)) / n
		b.ReportMetric(per-size, "B/msg-overhead")
		b.ReportMetric(per, "B/msg-total")
		info, _ := q.Attributes()
		if info.Active != n {
			b.Fatalf("active %d", info.Active)
		}
		runtime.KeepAlive(q)
		br.Close()
	}
}

// BenchmarkReceiveLatency compares one receive+delete on a queue holding a
// large backlog with the same on an almost empty queue. In "cold" the
// backlog has every priority, so each receive takes the oldest priority-1
// message (FIFO: cold in the CPU caches); in "hot" the backlog has
// priorities 2..16 only, so each receive takes the message just sent: the
// difference between the two isolates the cost of the memory hierarchy from
// the engine's own work.
func BenchmarkReceiveLatency(b *testing.B) {
	for _, c := range []struct {
		backlog int
		kind    string
	}{{10, "cold"}, {1_000_000, "cold"}, {1_000_000, "hot"}} {
		backlog := c.backlog
		b.Run(fmt.Sprintf("backlog=%d/%s", backlog, c.kind), func(b *testing.B) {
			br, err := Open(Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer br.Close()
			q := mustQueue(b, br, "lat", DefaultQueueConfig())
			body := benchBody(1024)
			entries := make([]SendEntry, MaxBatch)
			for i := range entries {
				entries[i] = SendEntry{Body: body, Priority: 1 + i%16}
				if c.kind == "hot" {
					entries[i].Priority = 2 + i%15
				}
			}
			var out []SendResult
			for sent := 0; sent < backlog; sent += MaxBatch {
				if out, err = q.Send(entries[:min(MaxBatch, backlog-sent)], out[:0]); err != nil {
					b.Fatal(err)
				}
			}
			debug.FreeOSMemory()
			var msgs []Message
			hs := make([]ReceiptHandle, 1)
			errs := make([]error, 1)
			one := []SendEntry{{Body: body, Priority: 1}}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			start, cpu0 := time.Now(), cpuTime()
			var recvNs int64
			for i := 0; i < b.N; i++ {
				// Keep the backlog constant: one in, one out.
				if out, err = q.Send(one, out[:0]); err != nil {
					b.Fatal(err)
				}
				r0 := time.Now()
				if msgs, err = q.Receive(ctx, ReceiveOptions{Max: 1, HasWait: true}, msgs[:0]); err != nil {
					b.Fatal(err)
				}
				recvNs += time.Since(r0).Nanoseconds()
				hs[0] = msgs[0].Handle
				if _, err := q.Delete(hs, errs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N), "ns/cycle")
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/cycle")
			b.ReportMetric(float64(recvNs)/float64(b.N), "ns/receive")
		})
	}
}

// parallelismFromEnv lets SMQD_BENCH_PARALLELISM override a benchmark's
// goroutines per GOMAXPROCS.
func parallelismFromEnv(def int) int {
	if v, err := strconv.Atoi(os.Getenv("SMQD_BENCH_PARALLELISM")); err == nil && v > 0 {
		return v
	}
	return def
}
