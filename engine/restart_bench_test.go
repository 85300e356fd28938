package engine

// Restart figures: time from Open to the first successful receive with a
// large backlog, and the whole process's resident memory then. Each phase
// runs in its own process (this test binary re-executed), so the memory
// figure is that of a fresh process that only recovered the backlog.
//
//	SMQD_RESTART_N=1000000 go test -run '^$' -bench BenchmarkRestart -benchtime 1x ./engine/
//
// SMQD_RESTART_CRASH=1 ends the fill like kill -9 (after a Sync, without
// Close), so the open replays the log written since the last checkpoint.
// SMQD_RESTART_DRAIN=0.5 (with CRASH) first receives and deletes that
// fraction of the backlog at full speed, as in smqbench backlog
// --restart-check: the open then also steps over the deletions.
// SMQD_RESTART_CPUPROFILE=file writes a CPU profile of the open phase.
// SMQD_RESTART_NO_TAIL_RESYNC=1 skips the open's rewrite and fsync of the
// log tail past the checkpoint (recovery.go), to measure what it costs.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smqd/smqd/wal"
)

const restartChildEnv = "SMQD_RESTART_CHILD"

func BenchmarkRestart(b *testing.B) {
	n, _ := strconv.Atoi(os.Getenv("SMQD_RESTART_N"))
	if n == 0 {
		n = 1_000_000
	}
	dir := os.Getenv("SMQD_RESTART_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	run := func(phase string) string {
		cmd := exec.Command(os.Args[0], "-test.run=^TestRestartChild$")
		cmd.Env = append(os.Environ(), restartChildEnv+"="+phase, "SMQD_RESTART_DIR="+dir, "SMQD_RESTART_N="+strconv.Itoa(n))
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("%s: %v\n%s", phase, err, out)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "RESULT ") {
				return strings.TrimPrefix(l, "RESULT ")
			}
		}
		b.Fatalf("%s: no result\n%s", phase, out)
		return ""
	}
	if os.Getenv("SMQD_RESTART_SKIP_FILL") == "" {
		b.Logf("fill: %s", run("fill"))
	}
	for i := 0; i < b.N; i++ {
		res := run("open")
		b.Logf("open: %s", res)
		var openMs, firstMs, rssMiB, hwmMiB float64
		var msgs int
		fmt.Sscanf(res, "open_ms=%f first_receive_ms=%f rss_mib=%f hwm_mib=%f messages=%d", &openMs, &firstMs, &rssMiB, &hwmMiB, &msgs)
		b.ReportMetric(firstMs, "ms-to-first-receive")
		b.ReportMetric(rssMiB, "MiB-rss")
		b.ReportMetric(hwmMiB, "MiB-rss-peak")
		b.ReportMetric(float64(msgs), "messages")
	}
}

// TestRestartChild is a phase of BenchmarkRestart run in a child process.
func TestRestartChild(t *testing.T) {
	phase := os.Getenv(restartChildEnv)
	if phase == "" {
		t.Skip("only run as a child of BenchmarkRestart")
	}
	dir := os.Getenv("SMQD_RESTART_DIR")
	n, _ := strconv.Atoi(os.Getenv("SMQD_RESTART_N"))
	switch phase {
	case "fill":
		o := Options{Dir: dir}
		o.WAL.Sync = wal.SyncNone // the state is the same; Close syncs
		b, err := Open(o)
		if err != nil {
			t.Fatal(err)
		}
		b.CreateQueue("backlog", DefaultQueueConfig())
		q, _ := b.Queue("backlog")
		body := benchBody(1024)
		start := time.Now()
		var wg sync.WaitGroup
		per := n / 4
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				entries := make([]SendEntry, MaxBatch)
				for i := range entries {
					entries[i] = SendEntry{Body: body, Priority: 1 + i}
				}
				var out []SendResult
				for sent := 0; sent < per; sent += MaxBatch {
					k := min(MaxBatch, per-sent)
					var err error
					if out, err = q.Send(entries[:k], out[:0]); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		fill := time.Since(start)
		drained, drainS := 0, 0.0
		if f, _ := strconv.ParseFloat(os.Getenv("SMQD_RESTART_DRAIN"), 64); f > 0 {
			d0 := time.Now()
			drained = drainFor(t, q, int(f*float64(4*per)))
			drainS = time.Since(d0).Seconds()
		}
		if os.Getenv("SMQD_RESTART_CRASH") != "" {
			// Like kill -9 right after the last acknowledged send: no final
			// checkpoint, the log tail since the last one is replayed.
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}
			st := b.Stats().Storage
			fmt.Printf("RESULT messages=%d drained=%d fill_s=%.1f drain_s=%.2f crashed_without_close=true replay_bytes=%d replay_waits=%d\n",
				4*per-drained, drained, fill.Seconds(), drainS, st.LogEnd-st.CheckpointAt, st.ReplayWaits)
			os.Exit(0)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("RESULT messages=%d fill_s=%.1f close_s=%.1f\n", 4*per, fill.Seconds(), time.Since(start.Add(fill)).Seconds())
	case "open":
		if f := os.Getenv("SMQD_RESTART_CPUPROFILE"); f != "" {
			pf, err := os.Create(f)
			if err != nil {
				t.Fatal(err)
			}
			pprof.StartCPUProfile(pf)
			defer func() { pprof.StopCPUProfile(); pf.Close() }()
		}
		o := Options{Dir: dir, testNoTailResync: os.Getenv("SMQD_RESTART_NO_TAIL_RESYNC") != ""}
		start := time.Now()
		b, err := Open(o)
		if err != nil {
			t.Fatal(err)
		}
		opened := time.Since(start)
		q, err := b.Queue("backlog")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.Receive(context.Background(), ReceiveOptions{Max: 1, HasWait: true}, nil); err != nil {
			t.Fatal(err)
		}
		first := time.Since(start)
		info, _ := q.Attributes()
		rss, hwm := procStatus("VmRSS:"), procStatus("VmHWM:")
		fmt.Printf("RESULT open_ms=%.1f first_receive_ms=%.1f rss_mib=%.1f hwm_mib=%.1f messages=%d recovery=%+v\n",
			float64(opened.Microseconds())/1000, float64(first.Microseconds())/1000, rss, hwm,
			info.Active+info.Inactive+info.Delayed, b.Recovery())
		b.Close()
	}
}

// drainFor receives and deletes n messages of q with 4 goroutines, in
// batches of 16, and returns how many it deleted.
func drainFor(t *testing.T, q *Queue, n int) int {
	var deleted atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var msgs []Message
			hs := make([]ReceiptHandle, MaxBatch)
			errs := make([]error, MaxBatch)
			for deleted.Load() < int64(n) {
				var err error
				msgs, err = q.Receive(context.Background(), ReceiveOptions{Max: MaxBatch, HasWait: true}, msgs[:0])
				if err != nil {
					t.Error(err)
					return
				}
				hs = hs[:0]
				for i := range msgs {
					hs = append(hs, msgs[i].Handle)
				}
				if _, err := q.Delete(hs, errs[:len(hs)]); err != nil {
					t.Error(err)
					return
				}
				deleted.Add(int64(len(hs)))
			}
		}()
	}
	wg.Wait()
	return int(deleted.Load())
}

// procStatus returns a /proc/self/status memory field in MiB.
func procStatus(field string) float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, field) {
			var kb float64
			fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(l, field)), "%f", &kb)
			return kb / 1024
		}
	}
	return -1
}
