package engine

// Power loss after compaction (invariant 5 of compaction.go). Found by the
// recovery audit of 2026-12-06, whose tests these are; each fails without
// the sync before a pass's first segment removal.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/smqd/smqd/wal"
)

// powerLossOpen opens a durable broker with its log on fs and its index in dir.
func powerLossOpen(t *testing.T, dir string, fs *wal.MemFS, clk *FakeClock, mode wal.SyncMode) *Broker {
	t.Helper()
	o := Options{Dir: dir, Clock: clk, Stripes: 1}
	o.WAL.FS = fs
	o.WAL.Sync = mode
	o.WAL.SyncInterval = time.Hour // interval mode: the writer's own fsyncs never come
	o.WAL.SegmentBytes = 64 << 10
	o.WAL.BufferBytes = 256 << 10
	o.CheckpointInterval = 24 * time.Hour
	o.CheckpointRecords = 1 << 40
	o.CheckpointBytes = 1 << 40
	o.Push.Disabled = true
	b, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCompactionRemovesASegmentOnlyAfterWhatEmptiedItIsDurable: a message
// sent, synced and checkpointed long ago is relocated by compaction (its
// relocate record is only written, not fsynced), then its old segment is
// removed (removal is made durable with a directory fsync). A power loss
// now loses the message: the index points into the removed segment, and
// the relocate record never reached the disk.
func TestCompactionRemovesASegmentOnlyAfterWhatEmptiedItIsDurable(t *testing.T) {
	for _, mode := range []wal.SyncMode{wal.SyncNone, wal.SyncInterval, wal.SyncAlways} {
		t.Run(mode.String(), func(t *testing.T) {
			dir, fs, clk := t.TempDir(), wal.NewMemFS(), NewFakeClock(t0)
			b := powerLossOpen(t, dir, fs, clk, mode)
			q := mustQueue(t, b, "keep", keptConfig())
			ctx := context.Background()
			// The one message to keep, then filler that fills a few segments.
			if _, err := q.SendOne(ctx, SendEntry{Body: []byte("precious"), Delay: time.Hour, HasDelay: true}); err != nil {
				t.Fatal(err)
			}
			sendFiller(t, q, 100)
			// Consume the filler (the precious one is delayed an hour).
			for i := 0; i < 200; i++ {
				m, err := q.ReceiveOne(ctx, 0)
				if err != nil {
					break
				}
				if err := q.DeleteOne(ctx, m.Handle); err != nil {
					t.Fatal(err)
				}
			}
			// Everything durable and checkpointed: the index holds "precious".
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}
			if err := durableOf(b).checkpoint(); err != nil {
				t.Fatal(err)
			}
			// Compaction: relocate, then (next pass) remove the old segment.
			_, moved, err := b.compactOnce(0)
			if err != nil {
				t.Fatal(err)
			}
			removed, _, err := b.compactOnce(0)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("relocated %d, removed %d", moved, removed)
			// Power loss: only fsynced data survives.
			lost := fs.CrashClone(nil)
			crashBroker(b)
			b2 := powerLossOpen(t, dir, lost, clk, mode)
			defer b2.Close()
			q2, err := b2.Queue("keep")
			if err != nil {
				t.Fatal(err)
			}
			found := false
			derr := dumpQueue(q2, func(id MessageID, body []byte, state string, dq uint32, visibleMs int64) {
				if string(body) == "precious" {
					found = true
				}
			})
			t.Logf("dump error: %v", derr)
			info, _ := q2.Attributes()
			t.Logf("recovery: %+v; queue: active %d delayed %d", b2.Recovery(), info.Active, info.Delayed)
			if !found {
				clk.Advance(2 * time.Hour)
				if _, err := q2.SendOne(ctx, SendEntry{Body: []byte("other")}); err != nil {
					t.Fatal(err)
				}
				bm, berr := q2.Receive(ctx, ReceiveOptions{Max: MaxBatch, HasWait: true}, nil)
				t.Logf("batch receive with another message waiting: %d msgs, %v", len(bm), berr)
				for _, x := range bm {
					t.Logf("  got %q", x.Body)
				}
				for k := 0; k < 3; k++ {
					clk.Advance(31 * time.Second)
					bm, berr = q2.Receive(ctx, ReceiveOptions{Max: MaxBatch, HasWait: true}, nil)
					t.Logf("batch receive again: %d msgs, %v", len(bm), berr)
				}
				m, rerr := q2.ReceiveOne(ctx, 0)
				info2, _ := q2.Attributes()
				t.Logf("after the delay: receive -> %q %v; counts active %d delayed %d inactive %d; stats %+v", m.Body, rerr, info2.Active, info2.Delayed, info2.Inactive, b2.Stats().Storage.Unreadable)
				t.Errorf("mode %v: the message sent, fsynced and checkpointed before the compaction is lost after a power loss (relocated %d, removed %d)", mode, moved, removed)
			}
		})
	}
}

// TestCompactionAfterAnUnsyncedDeleteLeavesNoGhost: in sync none/interval a
// delete is acknowledged after the write; compaction then removes the
// segment of the deleted message durably before the delete record is
// fsynced. A power loss loses the delete (allowed in these modes) but the
// message cannot come back either: it is a ghost, counted, unreadable.
func TestCompactionAfterAnUnsyncedDeleteLeavesNoGhost(t *testing.T) {
	for _, mode := range []wal.SyncMode{wal.SyncNone, wal.SyncInterval} {
		t.Run(mode.String(), func(t *testing.T) {
			dir, fs, clk := t.TempDir(), wal.NewMemFS(), NewFakeClock(t0)
			b := powerLossOpen(t, dir, fs, clk, mode)
			q := mustQueue(t, b, "keep", keptConfig())
			ctx := context.Background()
			sendFiller(t, q, 100)
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}
			if err := durableOf(b).checkpoint(); err != nil {
				t.Fatal(err)
			}
			// Delete the first 40 (acknowledged after the write only).
			for i := 0; i < 40; i++ {
				m, err := q.ReceiveOne(ctx, 0)
				if err != nil {
					t.Fatal(err)
				}
				if err := q.DeleteOne(ctx, m.Handle); err != nil {
					t.Fatal(err)
				}
			}
			removed, _, err := b.compactOnce(0)
			if err != nil {
				t.Fatal(err)
			}
			lost := fs.CrashClone(nil)
			crashBroker(b)
			b2 := powerLossOpen(t, dir, lost, clk, mode)
			defer b2.Close()
			q2, _ := b2.Queue("keep")
			info, _ := q2.Attributes()
			n, bad := 0, 0
			for si := range q2.stripes {
				st := &q2.stripes[si]
				for i := uint32(0); i < st.slab.n; i++ {
					if !st.slab.valid(i) {
						continue
					}
					s := st.slab.at(i)
					if s.seq == 0 {
						continue
					}
					n++
					var m Message
					if ok, err := q2.readBody(q2.b.getReader(), &m, &bodyLoc{pos: s.bodyPos, size: s.recSize, slot: i, seq: s.seq, stripe: st.idx}); err != nil || !ok {
						bad++
					}
				}
			}
			t.Logf("removed %d segments; after power loss: active %d, %d messages, %d unreadable; recovery %+v", removed, info.Active, n, bad, b2.Recovery())
			if bad > 0 {
				t.Errorf("%d messages came back whose bodies are gone (ghosts)", bad)
			}
		})
	}
}

// While the log waits for a segment file it cannot make, nothing past the
// stall is durable, so compaction removes no segment (what emptied it may
// be among the unwritten records); the pass does not fail either, which
// logged an Error on every pass (review, 2026-12-06).
func TestCompactionDuringAStallRemovesNothingAndDoesNotFail(t *testing.T) {
	b, ffs := openSpareFaultBroker(t)
	defer b.Close()
	q := mustQueue(t, b, "fill", DefaultQueueConfig())
	sendFiller(t, q, 200)
	for {
		ms, err := q.Receive(context.Background(), ReceiveOptions{Max: 16, HasWait: true}, nil)
		if err != nil || len(ms) == 0 {
			break
		}
		hs := make([]ReceiptHandle, len(ms))
		for i := range ms {
			hs[i] = ms[i].Handle
		}
		if _, err := q.Delete(hs, make([]error, len(hs))); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := durableOf(b).checkpoint(); err != nil {
		t.Fatal(err)
	}
	stallLog(t, b, ffs, mustQueue(t, b, "stall", DefaultQueueConfig()))
	if removed, _, err := b.compactOnce(0); removed != 0 || err != nil {
		t.Fatalf("during the stall: %d removed, %v; want none, and no error", removed, err)
	}
}

// keptConfig is a queue whose messages outlive the test (the longest
// retention).
func keptConfig() QueueConfig {
	cfg := DefaultQueueConfig()
	cfg.Retention = MaxRetention
	return cfg
}

// sendFiller sends n messages of about 2 KB to q, enough to fill segments
// of the power-loss tests' size.
func sendFiller(t *testing.T, q *Queue, n int) {
	t.Helper()
	filler := strings.Repeat("f", 2000)
	for i := range n {
		if _, err := q.SendOne(context.Background(), SendEntry{Body: []byte(fmt.Sprintf("f%03d%s", i, filler))}); err != nil {
			t.Fatal(err)
		}
	}
}
