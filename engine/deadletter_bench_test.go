package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/smqd/smqd/wal"
)

// BenchmarkDeadLetterMove: receives that move messages to the dead-letter
// queue (MaxReceiveCount 1, every message received once before the timer
// starts), 8 receivers on a durable broker with sync always; ns/op is per
// message moved.
func BenchmarkDeadLetterMove(b *testing.B) {
	clk := NewFakeClock(time.Now())
	o := Options{Dir: b.TempDir(), Clock: clk}
	o.WAL.Sync = wal.SyncAlways
	br, err := Open(o)
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	mustQueue(b, br, "dlq", DefaultQueueConfig())
	q := mustQueue(b, br, "src", dlqConfig("dlq", 1))
	ents := make([]SendEntry, MaxBatch)
	for i := range ents {
		ents[i].Body = benchBody(1024)
	}
	n := (b.N + MaxBatch - 1) / MaxBatch * MaxBatch
	for i := 0; i < n; i += MaxBatch {
		if _, err := q.Send(ents, nil); err != nil {
			b.Fatal(err)
		}
	}
	for got := 0; got < n; {
		ms, err := q.Receive(context.Background(), ReceiveOptions{Max: MaxBatch}, nil)
		if err != nil {
			b.Fatal(err)
		}
		got += len(ms)
	}
	clk.Advance(11 * time.Second) // every hide over
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				_, err := q.Receive(context.Background(), ReceiveOptions{Max: MaxBatch}, nil)
				if errors.Is(err, ErrMessageNotExist) {
					if info, _ := q.Attributes(); info.Active+info.Inactive == 0 {
						return
					}
					continue
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if info, _ := q.Attributes(); info.Active+info.Inactive != 0 {
		b.Fatalf("%d messages not moved", info.Active+info.Inactive)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "moves/s")
}
