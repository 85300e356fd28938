package bench

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkInprocCycle sends, receives and deletes batches through the
// in-process target (in memory) and through the MNS client against an
// in-process server: the per-message cost of engine and of engine + HTTP,
// by body size and batch size.
func BenchmarkInprocCycle(b *testing.B) {
	for _, target := range []string{"inproc", "http"} {
		for _, size := range []int{64, 1024, 16384} {
			for _, batch := range []int{1, 16} {
				b.Run(fmt.Sprintf("%s/body=%d/batch=%d", target, size, batch), func(b *testing.B) {
					ctx := context.Background()
					var tg Target = NewInproc(openBroker(b, false), 0)
					if target == "http" {
						tg = startServer(b, openBroker(b, false))
					}
					if err := tg.Prepare(ctx, []string{"b"}, true); err != nil {
						b.Fatal(err)
					}
					c, _ := tg.NewClient(ctx)
					defer c.Close()
					msgs := make([]Outgoing, batch)
					for i := range msgs {
						msgs[i] = Outgoing{Body: newBody(size, uint64(i))}
					}
					b.SetBytes(int64(size * batch))
					b.ReportAllocs()
					b.ResetTimer()
					for b.Loop() {
						if _, err := c.Send(ctx, 0, msgs); err != nil {
							b.Fatal(err)
						}
						if n, err := c.Receive(ctx, 0, batch, time.Second, nil); err != nil || n == 0 {
							b.Fatal(n, err)
						}
						for c.Pending() > 0 {
							if _, err := c.Delete(ctx, batch); err != nil {
								b.Fatal(err)
							}
						}
					}
					b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "msgs/s")
				})
			}
		}
	}
}
