package engine

import (
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/smqd/smqd/wal"
)

// freeFS reports the free space the test sets, whatever the real one is:
// the guard takes the smaller of the log's and the index's figures, so
// this one decides.
type freeFS struct {
	wal.FS
	free *atomic.Int64
}

func (f freeFS) FreeBytes(string) (int64, error) { return f.free.Load(), nil }

// openFailedOnFullDisk opens a broker whose log is on a FaultFS with a
// free-space figure the test sets (8 MiB reserve: critical below 2 MiB),
// sends acknowledged messages, then fails the log's writes with ENOSPC and
// makes the disk critically full, as another process filling a disk on
// which the log's segments are sparse (no fallocate) does. The fault is
// disarmed again: a resync that rewrites nothing succeeds on any disk.
func openFailedOnFullDisk(t *testing.T, dir string, clk *FakeClock, free *atomic.Int64) (*Broker, []string, func(*Options)) {
	t.Helper()
	ffs := wal.NewFaultFS(wal.NewMemFS())
	free.Store(1 << 40)
	mod := func(o *Options) {
		o.WAL.FS = freeFS{ffs, free}
		o.WAL.Sync = SyncAlways
		o.FreeSpaceReserve = 8 << 20
	}
	b := openDurableTest(t, dir, clk, mod)
	q := mustQueue(t, b, "full", DefaultQueueConfig())
	var acked []string
	for i := range 20 {
		body := fmt.Sprintf("m-%d", i)
		sendBody(t, q, body)
		acked = append(acked, body)
	}
	ffs.FailWrites(syscall.ENOSPC)
	if _, err := q.Send([]SendEntry{{Body: []byte("refused")}}, nil); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("send on a log failing with ENOSPC: %v", err)
	}
	if b.NeedsReopen() == nil {
		t.Fatal("the log failed with ENOSPC and the broker does not need a reopen")
	}
	free.Store(0)
	ffs.Disarm()
	return b, acked, mod
}

// TestResyncRefusedOnCriticallyFullDisk: after the log failed on a full
// disk, Resync refuses (ErrDiskFull) while free space is below the
// critical level, so that the single node's reopen (server/reopen.go) and
// a shard's restart in place (cluster/restart.go) keep waiting instead of
// closing the broker: closing the index there flushes Badger's memtable
// through a memory mapping onto the full disk, which is SIGBUS for the
// whole process (audit F1). Once space is back Resync succeeds, and the
// reopen finds every acknowledged send.
//
// Seen failing without the fix: Resync returned nil with 0 bytes free.
func TestResyncRefusedOnCriticallyFullDisk(t *testing.T) {
	dir := t.TempDir()
	clk := NewFakeClock(t0)
	var free atomic.Int64
	b, acked, mod := openFailedOnFullDisk(t, dir, clk, &free)
	err := b.Resync()
	if !errors.Is(err, ErrDiskFull) {
		b.Close()
		t.Fatalf("Resync with 0 bytes free returned %v, want ErrDiskFull: its caller would close the index onto the full disk", err)
	}
	t.Logf("refused, as it must be: %v", err)
	free.Store(1 << 40)
	if err := b.Resync(); err != nil {
		t.Fatalf("Resync once space is back: %v", err)
	}
	reopenHoldsAcked(t, b, dir, clk, mod, acked)
}

// TestResyncRefusedBelowTheMinimumToOpen: free space back above the
// critical level but still below the minimum Open needs (half the
// reserve). Resync must refuse there too: its callers close the broker
// once it succeeds and open the directory again, and Open refuses below
// the minimum, so a single node would be left with no broker at all
// (server/reopen.go answers every request 503, reads included, and a
// drain cannot give the space back) instead of the failed one, whose
// reads go on. Once free space is above the minimum, Resync succeeds and
// the reopen finds every acknowledged send. (diskfault audit, 2026-12-07:
// Resync refused only below the critical level.)
func TestResyncRefusedBelowTheMinimumToOpen(t *testing.T) {
	dir := t.TempDir()
	clk := NewFakeClock(t0)
	var free atomic.Int64
	b, acked, mod := openFailedOnFullDisk(t, dir, clk, &free)
	g := b.store.(*durableStore).space
	free.Store((g.critical + g.minimum) / 2)
	if err := b.Resync(); !errors.Is(err, ErrDiskFull) {
		b.Close()
		_, oerr := Open(durableTestOptions(t, dir, clk, mod))
		t.Fatalf("Resync with %d bytes free (critical %d, minimum to open %d) returned %v, want ErrDiskFull; "+
			"closing the broker and opening it again then gave: %v", free.Load(), g.critical, g.minimum, err, oerr)
	}
	free.Store(g.minimum)
	if err := b.Resync(); err != nil {
		t.Fatalf("Resync with the minimum to open free: %v", err)
	}
	reopenHoldsAcked(t, b, dir, clk, mod, acked)
}

// reopenHoldsAcked closes the failed broker b, as its caller does once
// Resync succeeded, opens dir again and checks that queue "full" holds
// every acknowledged send.
func reopenHoldsAcked(t *testing.T, b *Broker, dir string, clk *FakeClock, mod func(*Options), acked []string) {
	t.Helper()
	if err := b.Close(); err != nil {
		t.Logf("close of the failed broker: %v", err)
	}
	b = openDurableTest(t, dir, clk, mod)
	defer b.Close()
	have := bodiesIn(t, b, "full")
	for _, body := range acked {
		if !have[body] {
			t.Fatalf("acknowledged %s lost across the reopen", body)
		}
	}
}
