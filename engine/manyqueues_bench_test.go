package engine

// Many queues: what an empty queue costs, and how create, list, restart and
// delete scale. Each phase runs in a fresh process (this test binary
// re-executed), so the resident-memory figures are those of a process that
// holds only the broker.
//
//	SMQD_QUEUES_N=100000 go test -run '^$' -bench BenchmarkManyQueues -benchtime 1x ./engine/
//
// Reported: B-rss/queue and B-heap/queue (resident memory and live heap
// after creating N empty queues, minus before, over N, in a durable broker
// after a GC), MiB-rss (the process then) and MiB-rss-reopened (after a
// restart, which rebuilds them from the index), creates/s, lists/s (queue names listed per second, pages of
// 1,000), open-ms (restart to a broker that lists every queue), deletes/s.
// SMQD_QUEUES_CPUPROFILE=file profiles the restart phase.

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"
)

const manyQueuesChildEnv = "SMQD_QUEUES_CHILD"

func BenchmarkManyQueues(b *testing.B) {
	n, _ := strconv.Atoi(os.Getenv("SMQD_QUEUES_N"))
	if n == 0 {
		n = 10_000
	}
	dir := b.TempDir()
	run := func(phase string) map[string]float64 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestManyQueuesChild$")
		cmd.Env = append(os.Environ(), manyQueuesChildEnv+"="+phase, "SMQD_QUEUES_DIR="+dir, "SMQD_QUEUES_N="+strconv.Itoa(n))
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("%s: %v\n%s", phase, err, out)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if rest, ok := strings.CutPrefix(l, "RESULT "); ok {
				res := map[string]float64{}
				for _, kv := range strings.Fields(rest) {
					k, v, _ := strings.Cut(kv, "=")
					res[k], _ = strconv.ParseFloat(v, 64)
				}
				return res
			}
		}
		b.Fatalf("%s: no result\n%s", phase, out)
		return nil
	}
	for range b.N {
		c := run("create")
		o := run("open")
		b.ReportMetric(c["rss_per_queue"], "B-rss/queue")
		b.ReportMetric(c["heap_per_queue"], "B-heap/queue")
		b.ReportMetric(c["rss_mib"], "MiB-rss")
		b.ReportMetric(o["rss_mib"], "MiB-rss-reopened")
		b.ReportMetric(c["creates_per_s"], "creates/s")
		b.ReportMetric(c["lists_per_s"], "lists/s")
		b.ReportMetric(o["open_ms"], "open-ms")
		b.ReportMetric(o["deletes_per_s"], "deletes/s")
	}
}

// TestManyQueuesChild is one phase of BenchmarkManyQueues.
func TestManyQueuesChild(t *testing.T) {
	phase := os.Getenv(manyQueuesChildEnv)
	if phase == "" {
		t.Skip("only run as the child of BenchmarkManyQueues")
	}
	dir := os.Getenv("SMQD_QUEUES_DIR")
	n, _ := strconv.Atoi(os.Getenv("SMQD_QUEUES_N"))
	settle := func() (rssB, heapB float64) {
		runtime.GC()
		debug.FreeOSMemory()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return procStatus("VmRSS:") * (1 << 20), float64(ms.HeapAlloc)
	}
	name := func(i int) string { return fmt.Sprintf("q-%07d", i) }
	listAll := func(b *Broker) int {
		count, marker := 0, ""
		for {
			names, next, err := b.ListQueues("", marker, 1000)
			if err != nil {
				t.Fatal(err)
			}
			count += len(names)
			if next == "" {
				return count
			}
			marker = next
		}
	}
	profiling := false
	if f := os.Getenv("SMQD_QUEUES_CPUPROFILE"); f != "" && phase == "open" {
		out, err := os.Create(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.StartCPUProfile(out); err != nil {
			t.Fatal(err)
		}
		profiling = true
	}
	start := time.Now()
	b, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	opened := time.Since(start)
	switch phase {
	case "create":
		rss1, heap1 := settle()
		cfg := DefaultQueueConfig()
		start := time.Now()
		for i := range n {
			if _, err := b.CreateQueue(name(i), cfg); err != nil {
				t.Fatal(err)
			}
		}
		created := time.Since(start)
		rss2, heap2 := settle()
		start = time.Now()
		if got := listAll(b); got != n {
			t.Fatalf("listed %d queues, want %d", got, n)
		}
		listed := time.Since(start)
		fmt.Printf("RESULT rss_per_queue=%.0f heap_per_queue=%.0f rss_mib=%.1f creates_per_s=%.0f lists_per_s=%.0f\n",
			(rss2-rss1)/float64(n), (heap2-heap1)/float64(n), rss2/(1<<20),
			float64(n)/created.Seconds(), float64(n)/listed.Seconds())
	case "open":
		if got := listAll(b); got != n {
			t.Fatalf("listed %d queues after the restart, want %d", got, n)
		}
		openMs := float64(time.Since(start).Microseconds()) / 1000
		if profiling {
			pprof.StopCPUProfile()
		}
		rss1, _ := settle()
		start = time.Now()
		for i := range n {
			if err := b.DeleteQueue(name(i)); err != nil {
				t.Fatal(err)
			}
		}
		deleted := time.Since(start)
		fmt.Printf("RESULT rss_mib=%.1f open_ms=%.1f broker_open_ms=%.1f deletes_per_s=%.0f\n",
			rss1/(1<<20), openMs, float64(opened.Microseconds())/1000, float64(n)/deleted.Seconds())
	default:
		t.Fatalf("unknown phase %q", phase)
	}
}
