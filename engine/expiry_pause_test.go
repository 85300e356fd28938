package engine

// A mass expiry after a pause (flushLocked's chunks). Found by the
// recovery audit of 2026-12-06, whose test this is.

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smqd/smqd/wal"
)

// TestMassExpiryAfterAPauseKeepsTheBrokerUsable: messages of one stripe that expire in
// one advance of its wheel are logged as one append; more than the log's
// ring holds fails the append and with it the whole broker.
func TestMassExpiryAfterAPauseKeepsTheBrokerUsable(t *testing.T) {
	dir := t.TempDir()
	clk := &jumpClock{FakeClock: NewFakeClock(t0)}
	o := Options{Dir: dir, Clock: clk, Stripes: 1}
	o.WAL.FS = wal.NewMemFS()
	o.Push.Disabled = true // default BufferBytes (4 MiB)
	b, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cfg := DefaultQueueConfig()
	cfg.Retention = 60 * time.Second
	q := mustQueue(t, b, "short", cfg)
	other := mustQueue(t, b, "other", DefaultQueueConfig())
	for i := 0; i < 70000/MaxBatch; i++ {
		es := make([]SendEntry, MaxBatch)
		for k := range es {
			es[k].Body = []byte("x")
		}
		if _, err := q.Send(es, nil); err != nil {
			t.Fatal(err)
		}
		if i%100 == 99 {
			clk.Advance(time.Millisecond) // sent over 43 ms
		}
	}
	// The process is paused (or the clock steps) across the expiry: the
	// next look at the stripe (a receive, GetQueueAttributes, its timer)
	// expires them all in one advance of its wheel.
	clk.off.Store(int64(2 * time.Minute))
	info, _ := q.Attributes()
	_, serr := other.SendOne(context.Background(), SendEntry{Body: []byte("y")})
	t.Logf("after the expiry: short holds %d; usable: %v; a send to another queue: %v", info.Active, b.usable(), serr)
	if serr != nil {
		t.Errorf("the broker refuses changes after a mass expiry: %v", serr)
	}
}

// jumpClock is a FakeClock whose Now can jump ahead without firing the
// timers in between (a paused process, a VM resumed, a clock step).
type jumpClock struct {
	*FakeClock
	off atomic.Int64
}

func (c *jumpClock) Now() time.Time { return c.FakeClock.Now().Add(time.Duration(c.off.Load())) }
