package engine

// Many topics: what an empty topic costs in live heap, and creates per
// second, in a durable broker (sync interval, so that the figure is the
// broker's, not the disk's).
//
//	go test -run '^$' -bench BenchmarkManyTopics -benchtime 1x ./engine/
//
// Reported: B-heap/topic (live heap after creating N empty topics, minus
// before, over N, after a GC) and creates/s. SMQD_TOPICS_N sets N
// (default 20,000).

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
	}
}
