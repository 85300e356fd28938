package bench

import (
	"bytes"
	"context"
	"fmt"
	"strings"
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

// TestProduceCapEndsTheWindow: a produce run capped by --messages that
// finishes before its window ends reports its rate over the time it ran
// (it used to divide by the whole window: 357/s reported for 9,400/s).
func TestProduceCapEndsTheWindow(t *testing.T) {
	tg := NewInproc(openBroker(t, false), 30*time.Second)
	cfg := smokeConfig(Produce)
	cfg.Consumers = 0
	cfg.Warmup = 0
	cfg.Duration = time.Hour
	cfg.Messages = 2000
	res, err := Run(context.Background(), tg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != cfg.Messages {
		t.Fatalf("sent %d, want %d", res.Sent, cfg.Messages)
	}
	if res.WindowS <= 0 || res.WindowS >= cfg.Duration.Seconds() {
		t.Fatalf("window %.3f s for a run capped at %d messages in a %v window", res.WindowS, cfg.Messages, cfg.Duration)
	}
	if want := float64(res.Sent) / res.WindowS; res.SentPerS < 0.99*want || res.SentPerS > 1.01*want {
		t.Fatalf("sent/s %.1f, want %.1f", res.SentPerS, want)
	}
}

// runCapped runs w in process with --messages 2000 in a 30 s window and
// no warm-up.
func runCapped(t *testing.T, w Workload) (Config, *Result) {
	t.Helper()
	tg := NewInproc(openBroker(t, false), 30*time.Second)
	cfg := smokeConfig(w)
	cfg.Warmup = 0
	cfg.Duration = 30 * time.Second
	cfg.Messages = 2000
	res, err := Run(context.Background(), tg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, res)
	return cfg, res
}

// TestCycleCapEndsTheWindow: a cycle capped by --messages ends once every
// message sent is deleted, and reports its rates over the time it ran: its
// consumers long-polled to the window's end, and a 20,000-message run
// reported 1,333/s in a 15 s window and 4,000/s in a 5 s one.
func TestCycleCapEndsTheWindow(t *testing.T) {
	cfg, res := runCapped(t, Cycle)
	if res.Sent != cfg.Messages || res.Deleted != cfg.Messages {
		t.Fatalf("sent %d, deleted %d, want %d of each", res.Sent, res.Deleted, cfg.Messages)
	}
	if res.WindowS <= 0 || res.WindowS >= cfg.Duration.Seconds() {
		t.Fatalf("window %.3f s for a cycle capped at %d messages in a %v window", res.WindowS, cfg.Messages, cfg.Duration)
	}
	if want := float64(res.Deleted) / res.WindowS; res.DeletedPerS < 0.99*want || res.DeletedPerS > 1.01*want {
		t.Fatalf("deleted/s %.1f, want %.1f", res.DeletedPerS, want)
	}
}

// TestConsumeEndsWithThePreload: consume --messages ends once the preload
// is deleted, its rates over the time that took (5,000 messages drained in
// well under a second were reported as 1,000/s in a 5 s window).
func TestConsumeEndsWithThePreload(t *testing.T) {
	cfg, res := runCapped(t, Consume)
	if res.Preloaded != cfg.Messages || res.Deleted != cfg.Messages {
		t.Fatalf("preloaded %d, deleted %d, want %d of each", res.Preloaded, res.Deleted, cfg.Messages)
	}
	if res.WindowS <= 0 || res.WindowS >= cfg.Duration.Seconds() {
		t.Fatalf("window %.3f s for a consume of a %d-message preload in a %v window", res.WindowS, cfg.Messages, cfg.Duration)
	}
	var table bytes.Buffer
	res.WriteTable(&table)
	if strings.Contains(table.String(), "drain ") {
		t.Fatalf("a consume run shows a backlog drain:\n%s", table.String())
	}
}
