package wal

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkFdatasyncShape measures what a write + fdatasync costs on this
// disk in the shapes smqd produces, to say what bounds a sync-always
// broker here (docs/benchmarks.md, "What bounds sync always on this machine"):
//
//   - bytes=N: one file, N bytes written and fdatasynced at a time (a group
//     commit of N bytes). The latency grows far slower than the bytes.
//   - files=N: N files, each with its own goroutine writing 4 KiB and
//     fdatasyncing it (a cluster node's shards each sync their own log).
//     Concurrent flushes of different files share the device.
//   - busy=N: one file, 48 KiB per fdatasync, beside N goroutines that keep
//     a CPU busy each (the HTTP handlers and the load generator of a
//     benchmark). The flush's wake-ups wait for a CPU.
//
// Each reports µs/fsync (mean wall time of one write + fdatasync, as its
// goroutine sees it), fsyncs/s (all goroutines together) and, without busy
// goroutines, cpu-µs/fsync (the process's CPU per write + fdatasync).
// Each file is filled with zeros and synced first, so that the timed
// flushes convert no unwritten extents, as in a recycled WAL segment.
func BenchmarkFdatasyncShape(b *testing.B) {
	for _, n := range []int{4 << 10, 48 << 10, 512 << 10} {
		b.Run(fmt.Sprintf("bytes=%d", n), func(b *testing.B) { fsyncShape(b, 1, n, 0) })
	}
	for _, files := range []int{1, 3, 8, 24} {
		b.Run(fmt.Sprintf("files=%d", files), func(b *testing.B) { fsyncShape(b, files, 4<<10, 0) })
	}
	for _, busy := range []int{0, 1, 2} {
		b.Run(fmt.Sprintf("busy=%d", busy), func(b *testing.B) { fsyncShape(b, 1, 48<<10, busy) })
	}
}

func fsyncShape(b *testing.B, files, size, busy int) {
	const fileBytes = 32 << 20
	dir := b.TempDir()
	fs := make([]File, files)
	zero := make([]byte, 1<<20)
	for i := range fs {
		f, err := OSFS().OpenFile(filepath.Join(dir, fmt.Sprint(i)), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		for off := int64(0); off < fileBytes; off += int64(len(zero)) {
			if _, err := f.WriteAt(zero, off); err != nil {
				b.Fatal(err)
			}
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		fs[i] = f
	}
	var stop atomic.Bool
	var spin sync.WaitGroup
	for range busy {
		spin.Add(1)
		go func() {
			defer spin.Done()
			x := 0
			for !stop.Load() {
				x++
			}
			runtime.KeepAlive(x)
		}()
	}
	buf := testPayload(5, size, false)
	var next atomic.Int64
	var wall atomic.Int64
	var wg sync.WaitGroup
	b.SetBytes(int64(size))
	b.ResetTimer()
	cpu0, _ := processCPU()
	for _, f := range fs {
		wg.Add(1)
		go func(f File) {
			defer wg.Done()
			var off int64
			for next.Add(1) <= int64(b.N) {
				t := time.Now()
				if _, err := f.WriteAt(buf, off); err != nil {
					b.Error(err)
					return
				}
				if err := f.Sync(); err != nil {
					b.Error(err)
					return
				}
				wall.Add(int64(time.Since(t)))
				if off += int64(size); off+int64(size) > fileBytes {
					off = 0
				}
			}
		}(f)
	}
	wg.Wait()
	cpu1, _ := processCPU()
	b.StopTimer()
	stop.Store(true)
	spin.Wait()
	if busy == 0 && cpu1 > cpu0 { // the spinners' CPU would swamp it
		b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/1e3/float64(b.N), "cpu-µs/fsync")
	}
	b.ReportMetric(float64(wall.Load())/1e3/float64(b.N), "µs/fsync")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "fsyncs/s")
}
