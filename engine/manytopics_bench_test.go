package engine

// Many topics: what an empty topic costs in live heap, and creates per
// second, in a durable broker (sync interval, so that the figure is the
// broker's, not the disk's).
//
//	go test -run '^$' -bench BenchmarkManyTopics -benchtime 1x ./engine/
//
// Reported: B-heap/topic (live heap after creating N empty topics, minus
// before, over N, after a GC), creates/s, open-ms (a restart: Open until
// it returns, every topic loaded from the index) and lists/s (topic names
// listed per second, pages of 1,000). SMQD_TOPICS_N sets N (default
// 20,000).

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"
)

func BenchmarkManyTopics(b *testing.B) {
	n, _ := strconv.Atoi(os.Getenv("SMQD_TOPICS_N"))
	if n == 0 {
		n = 20_000
	}
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	for range b.N {
		o := Options{Dir: b.TempDir(), Logger: testLogger(b)}
		o.WAL.Sync = SyncInterval
		br, err := Open(o)
		if err != nil {
			b.Fatal(err)
		}
		before := heap()
		start := time.Now()
		for i := range n {
			if _, err := br.CreateTopic(fmt.Sprintf("topic-%07d", i), DefaultTopicConfig()); err != nil {
				b.Fatal(err)
			}
		}
		took := time.Since(start)
		after := heap()
		b.ReportMetric(float64(after-before)/float64(n), "B-heap/topic")
		b.ReportMetric(float64(n)/took.Seconds(), "creates/s")
		runtime.KeepAlive(br)
		if err := br.Close(); err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		if br, err = Open(o); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "open-ms")
		start = time.Now()
		listed, marker := 0, ""
		for {
			names, next, err := br.ListTopics("", marker, 1000)
			if err != nil {
				b.Fatal(err)
			}
			listed += len(names)
			if next == "" {
				break
			}
			marker = next
		}
		if listed != n {
			b.Fatalf("listed %d topics of %d", listed, n)
		}
		b.ReportMetric(float64(n)/time.Since(start).Seconds(), "lists/s")
		if err := br.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
