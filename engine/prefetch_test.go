package engine

import (
	"context"
	"crypto/md5"
	"fmt"
	"testing"
)

// TestPrefetchLargeBacklog drains a stripe far above prefetchMinActive, with
// lanes of every length (including one-element lanes and lanes whose wheel
// neighbours are bucket heads), and checks that the hints change nothing:
// priority order, FIFO within a priority, every body and MD5 intact.
func TestPrefetchLargeBacklog(t *testing.T) {
	b, _ := openTest(t, Options{Stripes: 1})
	q := mustQueue(t, b, "pf", DefaultQueueConfig())
	const n = 3 * prefetchMinActive
	want := map[int][]string{} // priority -> bodies in send order
	var entries []SendEntry
	for i := 0; i < n; i++ {
		// Priority 16 gets one message; the others share the rest unevenly.
		p := 1 + (i*7)%15
		if i == n/2 {
			p = 16
		}
		body := fmt.Sprintf("message %d priority %d %0*d", i, p, i%900, 0)
		want[p] = append(want[p], body)
		entries = append(entries, SendEntry{Body: []byte(body), Priority: p})
		if len(entries) == MaxBatch || i == n-1 {
			if _, err := q.Send(entries, nil); err != nil {
				t.Fatal(err)
			}
			entries = entries[:0]
		}
	}
	var order []string // the expected receive order
	for p := 1; p <= 16; p++ {
		order = append(order, want[p]...)
	}
	var msgs []Message
	for k := 0; k < len(order); {
		var err error
		msgs, err = q.Receive(context.Background(), ReceiveOptions{Max: 1 + k%MaxBatch}, msgs[:0])
		if err != nil {
			t.Fatalf("message %d: %v", k, err)
		}
		for _, m := range msgs {
			if k >= len(order) || string(m.Body) != order[k] {
				t.Fatalf("message %d: got priority %d body %q, want %q", k, m.Priority, m.Body, order[k])
			}
			if m.MD5 != md5.Sum(m.Body) {
				t.Fatalf("message %d: MD5 mismatch", k)
			}
			k++
		}
	}
	if _, err := q.Receive(context.Background(), ReceiveOptions{Max: 1}, nil); err != ErrMessageNotExist {
		t.Fatalf("after the drain: %v", err)
	}
}
