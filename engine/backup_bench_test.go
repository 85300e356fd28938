package engine

// An online backup's cost: how fast it copies a backlog, what it takes
// from the traffic running beside it, and how long a restore and the
// first open of the restored directory take.
//
//	SMQD_BACKUP_N=1000000 go test -run '^$' -bench BenchmarkBackup -benchtime 1x ./engine/
//
// A durable broker (sync always, the default) holds N messages of 1 KiB
// (default 100,000). Reported: backup-MB/s (archive bytes written to a
// file in the test's temporary directory, on the same disk, over the
// backup's time), backup-cpu-ms (the process's user+system CPU during the
// backup, traffic included), restore-s, open-ms (the restored directory's
// first open: its recovery), and cycle-ratio: messages cycled per second
// (4 goroutines, each sending, receiving and deleting 16 at a time) while
// the backup ran, over the same cycle's rate measured just before it.
// SMQD_BACKUP_RATE caps the backup (BackupOptions.BytesPerSecond).
// rss-rise-MiB: the process's peak resident set while the backup ran,
// over its resident set just before.

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func BenchmarkBackup(b *testing.B) {
	n, _ := strconv.Atoi(os.Getenv("SMQD_BACKUP_N"))
	if n == 0 {
		n = 100_000
	}
	rate, _ := strconv.ParseInt(os.Getenv("SMQD_BACKUP_RATE"), 10, 64)
	body := bytes.Repeat([]byte{'b'}, 1024)
	for range b.N {
		dir := b.TempDir()
		br, err := Open(Options{Dir: filepath.Join(dir, "src"), Logger: testLogger(b)})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := br.CreateQueue("backlog", DefaultQueueConfig()); err != nil {
			b.Fatal(err)
		}
		if _, err := br.CreateQueue("cycle", DefaultQueueConfig()); err != nil {
			b.Fatal(err)
		}
		q, _ := br.Queue("backlog")
		cq, _ := br.Queue("cycle")
		entries := make([]SendEntry, 16)
		for i := range entries {
			entries[i] = SendEntry{Body: body}
		}
		for sent := 0; sent < n; sent += 16 {
			if _, err := q.Send(entries[:min(16, n-sent)], nil); err != nil {
				b.Fatal(err)
			}
		}
		// The cycle: 4 goroutines until stop; returns messages cycled.
		cycle := func(stop *atomic.Bool) int64 {
			var done atomic.Int64
			var wg sync.WaitGroup
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs := make([]error, 16)
					hs := make([]ReceiptHandle, 0, 16)
					var ms []Message
					for !stop.Load() {
						if _, err := cq.Send(entries, nil); err != nil {
							b.Error(err)
							return
						}
						ms, err = cq.Receive(context.Background(), ReceiveOptions{Max: 16, HasWait: true}, ms[:0])
						if err != nil {
							continue
						}
						hs = hs[:0]
						for _, m := range ms {
							hs = append(hs, m.Handle)
						}
						if _, err := cq.Delete(hs, errs[:len(hs)]); err != nil {
							b.Error(err)
							return
						}
						done.Add(int64(len(hs)))
					}
				}()
			}
			wg.Wait()
			return done.Load()
		}
		var stop atomic.Bool
		start := time.Now()
		time.AfterFunc(3*time.Second, func() { stop.Store(true) })
		before := float64(cycle(&stop)) / time.Since(start).Seconds()

		f, err := os.Create(filepath.Join(dir, "b.smqd"))
		if err != nil {
			b.Fatal(err)
		}
		stop.Store(false)
		var cycled int64
		cycleDone := make(chan struct{})
		go func() { cycled = cycle(&stop); close(cycleDone) }()
		rss0 := rssNow()
		var peak atomic.Int64
		sampled := make(chan struct{})
		go func() { // the process's resident set while the backup runs
			defer close(sampled)
			for !stop.Load() {
				if r := rssNow(); r > peak.Load() {
					peak.Store(r)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		cpu0 := cpuTime()
		start = time.Now()
		info, err := br.Backup(f, BackupOptions{BytesPerSecond: rate})
		took := time.Since(start)
		cpu := cpuTime() - cpu0
		stop.Store(true)
		<-cycleDone
		<-sampled
		b.ReportMetric(float64(peak.Load()-rss0)/(1<<20), "rss-rise-MiB")
		if err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		during := float64(cycled) / took.Seconds()
		b.ReportMetric(float64(info.Bytes)/took.Seconds()/1e6, "backup-MB/s")
		b.ReportMetric(took.Seconds(), "backup-s")
		b.ReportMetric(float64(cpu.Milliseconds()), "backup-cpu-ms")
		b.ReportMetric(during/before, "cycle-ratio")
		b.ReportMetric(before, "cycle-msgs/s")
		if err := br.Close(); err != nil {
			b.Fatal(err)
		}

		if _, err := f.Seek(0, 0); err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		if _, err := Restore(f, filepath.Join(dir, "restored")); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "restore-s")
		f.Close()
		start = time.Now()
		r, err := Open(Options{Dir: filepath.Join(dir, "restored"), Logger: testLogger(b)})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "open-ms")
		rq, _ := r.Queue("backlog")
		if a, _ := rq.Attributes(); a.Active != int64(n) {
			b.Fatalf("restored %d messages, want %d", a.Active, n)
		}
		r.Close()
	}
}

// rssNow is the process's resident set in bytes (Linux; 0 elsewhere).
func rssNow() int64 {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}
