package engine

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smqd/smqd/wal"
)

// countHandler counts log records by message.
type countHandler struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.n[r.Level.String()+" "+r.Message]++
	h.mu.Unlock()
	return nil
}
func (h *countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countHandler) WithGroup(string) slog.Handler      { return h }

// TestDeleteQueueThenCrashReportsNoOrphans: DeleteQueue of a checkpointed
// backlog, a queue of the same name again with new messages, kill -9
// before the next checkpoint. The restart shows the new queue only, and
// does not report the deleted queue's messages as orphans, one Warn line
// each (recovery audit, 2026-12-06: 200,000 lines after a real one).
func TestDeleteQueueThenCrashReportsNoOrphans(t *testing.T) {
	dir := t.TempDir()
	fs := wal.NewMemFS()
	clk := NewFakeClock(t0)
	ch := &countHandler{n: map[string]int{}}
	open := func() *Broker {
		o := Options{Dir: dir, Clock: clk, Stripes: 2, Logger: slog.New(ch)}
		o.WAL.FS = fs
		o.Push.Disabled = true
		o.CheckpointInterval = 24 * time.Hour
		b, err := Open(o)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := open()
	cfg := DefaultQueueConfig()
	cfg.Retention = MaxRetention
	q := mustQueue(t, b, "jobs", cfg)
	const n = 50000
	for i := 0; i < n/MaxBatch; i++ {
		es := make([]SendEntry, MaxBatch)
		for k := range es {
			es[k].Body = []byte(fmt.Sprintf("old-%d-%d", i, k))
		}
		if _, err := q.Send(es, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := durableOf(b).checkpoint(); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteQueue("jobs"); err != nil {
		t.Fatal(err)
	}
	q2 := mustQueue(t, b, "jobs", cfg)
	for i := 0; i < 10; i++ {
		if _, err := q2.SendOne(context.Background(), SendEntry{Body: []byte(fmt.Sprintf("new-%d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	crashBroker(b)
	ch.n = map[string]int{}
	start := time.Now()
	b2 := open()
	took := time.Since(start)
	q3, _ := b2.Queue("jobs")
	info, _ := q3.Attributes()
	old := 0
	dumpQueue(q3, func(id MessageID, body []byte, state string, dq uint32, vis int64) {
		if strings.HasPrefix(string(body), "old-") {
			old++
		}
	})
	t.Logf("restart took %v; jobs holds %d (old %d); recovery %+v", took, info.Active, old, b2.Recovery())
	for k, v := range ch.n {
		if v > 1 {
			t.Logf("log %dx %q", v, k)
		}
	}
	if old > 0 || info.Active != 10 {
		t.Errorf("jobs: %d messages, %d of the deleted queue", info.Active, old)
	}
	if r := b2.Recovery(); r.Orphans > 0 {
		t.Errorf("a DeleteQueue followed by a crash is reported as %d orphans, with as many Warn lines (%d)", r.Orphans, ch.n["WARN skipping a message of no known queue"])
	}
	// A checkpoint later, a crash again: are they gone from the index?
	if err := durableOf(b2).checkpoint(); err != nil {
		t.Fatal(err)
	}
	crashBroker(b2)
	b3 := open()
	t.Logf("after a checkpoint and another crash: recovery %+v", b3.Recovery())
	b3.Close()
}
