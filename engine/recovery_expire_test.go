package engine

import (
	"testing"
	"time"
)

// TestRecoveryExpiresMoreThanTheRingHolds: the expiry records a recovery
// logs for messages that expired while the broker was down are appended
// in pieces that fit the log's ring. One batch of them all failed with
// ErrRecordTooLarge once they passed the ring's size (4 MiB by default:
// about 50,000 messages), and the broker came up refusing every change,
// again at every restart. (The log takes such a batch since wal invariant
// 12; the pieces still keep it from holding every writer back.)
func TestRecoveryExpiresMoreThanTheRingHolds(t *testing.T) {
	dir := t.TempDir()
	clk := NewFakeClock(t0)
	b := openDurableTest(t, dir, clk, nil) // a 1 MiB ring
	cfg := DefaultQueueConfig()
	cfg.Retention = MinRetention
	q := mustQueue(t, b, "short", cfg)
	const n = 20_000 // about 1.6 MB of expiry records
	ents := make([]SendEntry, 16)
	for i := range ents {
		ents[i].Body = []byte("expires")
	}
	for sent := 0; sent < n; sent += len(ents) {
		if _, err := q.Send(ents, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * MinRetention)
	for round := 0; round < 2; round++ {
		b = openDurableTest(t, dir, clk, nil)
		if err := b.Health(); err != nil {
			t.Fatalf("round %d: the broker came up unhealthy: %v", round, err)
		}
		q, err := b.Queue("short")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.Send([]SendEntry{{Body: []byte("after")}}, nil); err != nil {
			t.Fatalf("round %d: send after the recovery: %v", round, err)
		}
		info, err := q.Attributes()
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(round + 1); info.Active != want {
			t.Fatalf("round %d: %d messages active, want %d (the expired ones gone)", round, info.Active, want)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Second)
	}
}
