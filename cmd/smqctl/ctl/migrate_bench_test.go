package ctl

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
)

// BenchmarkMigrate: smqctl migrate between two durable smqd (sync always,
// in this process) of 4 queues × 8,000 messages of 1 KiB, with 1 and with
// 4 batches of a queue in flight (--parallel). Reported: messages moved a
// second.
//
//	go test -run '^$' -bench BenchmarkMigrate -benchtime 1x -count 3 ./cmd/smqctl/ctl/
func BenchmarkMigrate(b *testing.B) {
	for _, parallel := range []int{1, 4} {
		b.Run(fmt.Sprintf("parallel=%d", parallel), func(b *testing.B) {
			var moved int
			var took time.Duration
			for range b.N {
				b.StopTimer()
				src, dst := startDaemonWith(b, engine.Options{Dir: b.TempDir()}), startDaemonWith(b, engine.Options{Dir: b.TempDir()})
				body := []byte(strings.Repeat("x", 1024))
				batch := make([]engine.SendEntry, 16)
				for i := range batch {
					batch[i] = engine.SendEntry{Body: body}
				}
				for _, name := range []string{"a", "b", "c", "d"} {
					if _, err := src.b.CreateQueue(name, engine.DefaultQueueConfig()); err != nil {
						b.Fatal(err)
					}
					q, _ := src.b.Queue(name)
					for i := 0; i < 8000; i += 16 {
						if _, err := q.Send(batch, nil); err != nil {
							b.Fatal(err)
						}
					}
				}
				c := src.ctl(b)
				b.StartTimer()
				t0 := time.Now()
				r := c.run("migrate", "--to", dst.addr, "--parallel", strconv.Itoa(parallel), "--json")
				took += time.Since(t0)
				b.StopTimer()
				if r.code != ExitOK {
					b.Fatalf("migrate: %d %s %s", r.code, r.stdout, r.stderr)
				}
				moved += 4 * 8000
			}
			b.ReportMetric(float64(moved)/took.Seconds(), "msgs/s")
		})
	}
}
