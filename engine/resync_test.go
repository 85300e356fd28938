package engine

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/smqd/smqd/index"
	"github.com/smqd/smqd/wal"
)

// TestLostWritebackAcrossRestart: an fsync of the log fails as on Linux,
// losing the write it was to make durable though reads still see it
// (wal.MemFS FailSyncsLosingWrites). The broker is stopped, started again
// on the same files (it reads the lost record from the "page cache"), takes
// more sends acknowledged durable, and then the power fails. Every
// acknowledged send must be there after the power loss, and the log must
// open without damage.
//
// Two things can save the lost record; two arms leave one each, the third
// neither:
//   - heal-then-close: the disk works again before the stop, so Close's
//     resync rewrites it (start-up's tail resync is switched off);
//   - kill-while-failing: the disk still refuses at the stop, as when the
//     process is killed before its keeper could resync; start-up's tail
//     resync (wal.Log.ResyncTail) must rewrite it;
//   - neither: the control. It must lose data or refuse to open, or the
//     test does not model the hazard.
//
// Seen failing: with Close's resync removed, heal-then-close refused to
// open after the power loss; with the start-up resync removed,
// kill-while-failing did.
func TestLostWritebackAcrossRestart(t *testing.T) {
	for _, arm := range []struct {
		name       string
		healFirst  bool // the disk works again before Close
		tailResync bool
		mustKeep   bool
	}{
		{"heal-then-close", true, false, true},
		{"kill-while-failing", false, true, true},
		{"neither", false, false, false},
	} {
		t.Run(arm.name, func(t *testing.T) {
			dir := t.TempDir()
			clk := NewFakeClock(t0)
			fs := wal.NewMemFS()
			var crashed atomic.Bool
			mod := func(fs wal.FS) func(*Options) {
				return func(o *Options) {
					o.WAL.FS = fs
					o.WAL.Sync = SyncAlways
					o.testNoTailResync = !arm.tailResync
					o.testCommit = func(idx *index.Store, b *index.Batch) error {
						if crashed.Load() {
							return errPowerLost // the index keeps what it had at the power loss
						}
						return idx.Commit(b)
					}
				}
			}
			b := openDurableTest(t, dir, clk, mod(fs))
			q := mustQueue(t, b, "lw", DefaultQueueConfig())
			var acked []string
			send := func(q *Queue, body string) error {
				_, err := q.Send([]SendEntry{{Body: []byte(body)}}, nil)
				if err == nil {
					acked = append(acked, body)
				}
				return err
			}
			for i := range 10 {
				if err := send(q, fmt.Sprintf("before-%d", i)); err != nil {
					t.Fatal(err)
				}
			}
			fs.FailSyncsLosingWrites(syscall.EIO)
			if err := send(q, "lost"); !errors.Is(err, syscall.EIO) {
				t.Fatalf("send on a failing fsync: %v, want EIO", err)
			}
			if arm.healFirst {
				fs.FailSyncsLosingWrites(nil)
			}
			b.Close() // with the disk refusing, its resync fails and is logged
			fs.FailSyncsLosingWrites(nil)

			b = openDurableTest(t, dir, clk, mod(fs))
			if got, want := b.Recovery().Resynced > 0, arm.tailResync; got != want {
				t.Fatalf("start-up resynced %d bytes of the tail; want some: %v", b.Recovery().Resynced, want)
			}
			if st := b.Stats().Storage.Recovery; st != b.Recovery() {
				t.Fatalf("StorageStats.Recovery %+v, Recovery %+v", st, b.Recovery())
			}
			q, err := b.Queue("lw")
			if err != nil {
				t.Fatal(err)
			}
			for i := range 5 {
				if err := send(q, fmt.Sprintf("after-%d", i)); err != nil {
					t.Fatal(err)
				}
			}
			lost := fs.CrashClone(nil) // the power fails: only what was made durable
			crashed.Store(true)
			b.Close()
			crashed.Store(false)

			b, err = Open(durableTestOptions(t, dir, clk, mod(lost)))
			if err != nil {
				if arm.mustKeep {
					t.Fatalf("open after the power loss: %v", err)
				}
				t.Logf("control arm: the open after the power loss failed: %v", err)
				return
			}
			defer b.Close()
			have := bodiesIn(t, b, "lw")
			missing := 0
			for _, body := range acked {
				if !have[body] {
					missing++
				}
			}
			switch {
			case arm.mustKeep && missing > 0:
				t.Fatalf("%d of %d acknowledged sends lost after the power loss", missing, len(acked))
			case !arm.mustKeep && missing == 0:
				t.Fatal("control arm kept every acknowledged send: the test does not model the lost writeback")
			case !arm.mustKeep:
				t.Logf("control arm: %d of %d acknowledged sends lost", missing, len(acked))
			}
		})
	}
}

// TestStartRefusedWhileTheTailCannotBeMadeDurable: docs/operations.md
// ("Disk full and I/O errors") says every start writes again and fsyncs
// the log past the last checkpoint before it serves, and that while the
// disk still refuses those writes the start fails ("make the log tail
// durable"). A broker is stopped with its fsyncs failing (as when it is
// killed before its keeper could resync); a start whose log writes fail
// must be refused so, and leave nothing behind that stops the next start,
// which, once the disk works, holds every acknowledged send. (diskfault
// audit, 2026-12-07: no test failed with recovery.go's check of the tail
// resync's error removed; with it removed this one served.)
func TestStartRefusedWhileTheTailCannotBeMadeDurable(t *testing.T) {
	dir := t.TempDir()
	clk := NewFakeClock(t0)
	fs := wal.NewMemFS()
	mod := func(fs wal.FS) func(*Options) {
		return func(o *Options) {
			o.WAL.FS = fs
			o.WAL.Sync = SyncAlways
		}
	}
	b := openDurableTest(t, dir, clk, mod(fs))
	q := mustQueue(t, b, "tail", DefaultQueueConfig())
	var acked []string
	for i := range 10 {
		body := fmt.Sprintf("before-%d", i)
		if _, err := q.Send([]SendEntry{{Body: []byte(body)}}, nil); err != nil {
			t.Fatal(err)
		}
		acked = append(acked, body)
	}
	fs.FailSyncsLosingWrites(syscall.EIO)
	if _, err := q.Send([]SendEntry{{Body: []byte("lost")}}, nil); !errors.Is(err, syscall.EIO) {
		t.Fatalf("send on a failing fsync: %v, want EIO", err)
	}
	b.Close() // its resync fails too, and is logged
	fs.FailSyncsLosingWrites(nil)

	// The log opens (it only reads and fsyncs), but its tail cannot be
	// written again.
	refusing := wal.NewFaultFS(fs)
	refusing.FailWrites(syscall.EIO)
	b, err := Open(durableTestOptions(t, dir, clk, mod(refusing)))
	if err == nil {
		b.Close()
		t.Fatal("the start served while the disk refused to make the log's tail durable")
	}
	if !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "make the log tail durable") {
		t.Fatalf("start while the disk refuses writes: %v, want EIO and \"make the log tail durable\"", err)
	}

	b = openDurableTest(t, dir, clk, mod(fs))
	defer b.Close()
	if b.Recovery().Resynced == 0 {
		t.Fatal("the start after the disk healed resynced nothing of the tail")
	}
	have := bodiesIn(t, b, "tail")
	for _, body := range acked {
		if !have[body] {
			t.Errorf("acknowledged send %q lost", body)
		}
	}
}
