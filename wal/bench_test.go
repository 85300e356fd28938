package wal

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// BenchmarkGroupCommit measures acknowledged appends in SyncAlways mode on
// the real disk (b.TempDir): each of N appenders appends one record and
// waits for its fsync, in a loop. Compare fsyncs/s with BenchmarkFdatasync:
// group commit turns one disk flush into many acknowledged records.
func BenchmarkGroupCommit(b *testing.B) {
	for _, appenders := range []int{1, 8, 64} {
		for _, size := range []int{128, 1024, 16 << 10} {
			b.Run(fmt.Sprintf("appenders=%d/payload=%d", appenders, size), func(b *testing.B) {
				benchAppend(b, SyncAlways, appenders, size, true)
			})
		}
	}
}

// BenchmarkAppendNoSync measures the CPU cost of the append path alone
// (SyncNone, no wait): framing, checksum, ring copy, the writer's write.
func BenchmarkAppendNoSync(b *testing.B) {
	for _, size := range []int{128, 1024, 16 << 10} {
		b.Run(fmt.Sprintf("payload=%d", size), func(b *testing.B) {
			benchAppend(b, SyncNone, 1, size, false)
		})
	}
}

func benchAppend(b *testing.B, mode SyncMode, appenders, size int, wait bool) {
	benchAppendOpts(b, Options{Sync: mode, CompressMinBytes: -1}, appenders, size, wait)
}

func benchAppendOpts(b *testing.B, opts Options, appenders, size int, wait bool) {
	l, err := Open(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	body := testPayload(1, size, false)
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	before := l.Stats()
	cpu0, csw0 := processCPU()
	for range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			recs := make([]Record, 1)
			for left.Add(-1) >= 0 {
				recs[0] = Record{Type: 1, Body: body}
				if err := l.Append(recs); err != nil {
					b.Error(err)
					return
				}
				if wait {
					if err := l.WaitDurable(recs[0].Pos); err != nil {
						b.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if !wait {
		if err := l.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cpu, csw := processCPU()
	cpu, csw = cpu-cpu0, csw-csw0
	st := l.Stats()
	secs := b.Elapsed().Seconds()
	if cpu > 0 {
		// The whole process's CPU (appenders, writer, runtime) per record:
		// what a change to the commit path costs or saves.
		b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "cpu-µs/record")
		b.ReportMetric(float64(csw)/float64(b.N), "vcsw/record")
	}
	fsyncs := float64(st.Fsyncs - before.Fsyncs)
	b.ReportMetric(float64(b.N)/secs, "records/s")
	b.ReportMetric(fsyncs/secs, "fsyncs/s")
	if fsyncs > 0 {
		b.ReportMetric(float64(b.N)/fsyncs, "records/fsync")
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkFdatasync is the raw rate of the disk under b.TempDir: write
// 4 KiB and fdatasync, in a loop, into a preallocated file (as the log
// does) and into a file that grows with every write.
func BenchmarkFdatasync(b *testing.B) {
	for _, prealloc := range []bool{true, false} {
		b.Run(fmt.Sprintf("prealloc=%v", prealloc), func(b *testing.B) {
			name := filepath.Join(b.TempDir(), "sync.bin")
			f, err := OSFS().OpenFile(name, os.O_CREATE|os.O_RDWR, 0o644)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			const fileBytes = 64 << 20
			if prealloc {
				if err := f.Preallocate(fileBytes); err != nil {
					b.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
			}
			buf := testPayload(2, 4096, false)
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				off := int64(i) * int64(len(buf)) % fileBytes
				if _, err := f.WriteAt(buf, off); err != nil {
					b.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "fsyncs/s")
		})
	}
}

// BenchmarkReadAt reads back a record from the ring (just appended) and from
// the file (after reopening, page cache warm).
func BenchmarkReadAt(b *testing.B) {
	for _, where := range []string{"ring", "file"} {
		b.Run(where, func(b *testing.B) {
			dir := b.TempDir()
			l, err := Open(dir, Options{Sync: SyncNone})
			if err != nil {
				b.Fatal(err)
			}
			recs := []Record{{Type: 1, Body: testPayload(3, 1024, false)}}
			if err := l.Append(recs); err != nil {
				b.Fatal(err)
			}
			if where == "file" {
				if err := l.Close(); err != nil {
					b.Fatal(err)
				}
				if l, err = Open(dir, Options{Sync: SyncNone}); err != nil {
					b.Fatal(err)
				}
			}
			defer l.Close()
			buf := make([]byte, 0, 4096)
			b.SetBytes(1024)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, _, err := l.ReadAt(recs[0].Pos, recs[0].Size, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
