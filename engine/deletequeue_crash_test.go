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

// openCheckpointless opens a durable broker on fs whose background
// checkpoints wait a day (the tests checkpoint by hand), pushes off.
func openCheckpointless(t *testing.T, dir string, fs *wal.MemFS, clk *FakeClock, stripes int, log *slog.Logger) *Broker {
	t.Helper()
	o := Options{Dir: dir, Clock: clk, Stripes: stripes, Logger: log}
	o.WAL.FS = fs
	o.Push.Disabled = true
	o.CheckpointInterval = 24 * time.Hour
	b, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

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
	open := func() *Broker { return openCheckpointless(t, dir, fs, clk, 2, slog.New(ch)) }
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

// TestSendRacingDeleteQueueLeavesNothingInTheIndex: a send reserves its
// slot, DeleteQueue logs its record and fences the stripes, and the send's
// record (written outside the stripe lock) reaches the log after the
// delete. When a checkpoint window ends between the two, the window holding
// the send no longer shows the queue's deletion; the send was put in the
// index, where nothing removed it, and every later start skipped it with a
// warning and counted it as an orphan (recovery audit, 2026-12-06). The
// straggler records are written here as the racing operations would: a
// send, and a dead-letter move into the deleted queue.
func TestSendRacingDeleteQueueLeavesNothingInTheIndex(t *testing.T) {
	dir := t.TempDir()
	fs := wal.NewMemFS()
	clk := NewFakeClock(t0)
	ch := &countHandler{n: map[string]int{}}
	open := func() *Broker { return openCheckpointless(t, dir, fs, clk, 1, slog.New(ch)) }
	b := open()
	cfg := DefaultQueueConfig()
	gone := mustQueue(t, b, "gone", cfg)
	src := mustQueue(t, b, "src", cfg)
	if _, err := src.SendOne(context.Background(), SendEntry{Body: []byte("moved")}); err != nil {
		t.Fatal(err)
	}
	d := durableOf(b)
	if err := d.checkpoint(); err != nil {
		t.Fatal(err)
	}
	var srcSeq uint64
	if err := d.idx.Messages(func(qid, seq uint64, _ []byte) error {
		if qid == src.id {
			srcSeq = seq
		}
		return nil
	}); err != nil || srcSeq == 0 {
		t.Fatalf("src's message is not in the index (%v)", err)
	}
	gid := gone.id
	if err := b.DeleteQueue("gone"); err != nil {
		t.Fatal(err)
	}
	if err := d.checkpoint(); err != nil { // the window ends after the delete
		t.Fatal(err)
	}

	// The stragglers, after the delete and past the checkpoint.
	var s slot
	s.seq = 7
	s.setMeta(clk.Now().UnixMilli(), DefaultPriority, stActive)
	var sum [16]byte
	var send logRec
	var head [bodyHeadLen]byte
	d.bodyRecord(&send, &head, gid, 0, 0, &s, &sum, nil, []byte("straggler"), false)
	var move logRec
	from := make([]byte, snapLen)
	var fs0 slot
	fs0.seq = srcSeq
	fs0.setMeta(clk.Now().UnixMilli(), DefaultPriority, stActive)
	putSnap(from, src.id, 0, 0, &fs0)
	s.seq = 8
	d.moveRecord(&move, from, gid, 0, 1, &s, &sum, nil, []byte("moved"))
	recs := []logRec{send, move}
	if err := d.append(recs); err != nil {
		t.Fatal(err)
	}
	if err := d.waitDurable(recs[1].pos); err != nil {
		t.Fatal(err)
	}
	if err := d.checkpoint(); err != nil {
		t.Fatal(err)
	}
	var left []uint64
	if err := d.idx.Messages(func(qid, seq uint64, _ []byte) error {
		if qid == gid {
			left = append(left, seq)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("the index holds messages %v of the deleted queue %d", left, gid)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	ch.n = map[string]int{}
	b2 := open()
	defer b2.Close()
	if r := b2.Recovery(); r.Orphans > 0 {
		t.Errorf("a clean start after the race reports %d orphans (%d warnings)", r.Orphans, ch.n["WARN skipping a message of no known queue"])
	}
	if q, _ := b2.Queue("src"); q == nil {
		t.Error("src is gone")
	} else if info, _ := q.Attributes(); info.Active != 0 {
		// The move's source half (a delete) still applies: the message left src.
		t.Errorf("src holds %d messages after its message was moved", info.Active)
	}
}
