package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smqd/smqd/wal"
)

// TestDiskFullGuard (space.go): the log on a MemFS with a capacity fills
// under sends. Sends and queue creations then fail with ErrDiskFull, while
// receives, deletes, visibility changes and attribute changes go on; a
// restart on the full disk opens and serves reads; freeing space brings
// sends back without a restart; nothing acknowledged is lost.
// diskFullOptions are the options of a broker in dir whose log is on fs
// (a MemFS given a capacity), with a 2 MiB free-space reserve and small
// segments, so that a few MiB of sends fill it.
func diskFullOptions(t *testing.T, dir string, fs wal.FS, clk Clock) Options {
	o := Options{Dir: dir, Clock: clk, Logger: testLogger(t), Stripes: 2, FreeSpaceReserve: 2 << 20}
	o.WAL.FS = fs
	o.WAL.SegmentBytes = 256 << 10
	o.WAL.BufferBytes = 256 << 10
	return o
}

func TestDiskFullGuard(t *testing.T) {
	dir := t.TempDir()
	fs := wal.NewMemFS()
	fs.SetCapacity(8 << 20)
	clk := NewFakeClock(t0)
	open := func() (*Broker, error) { return Open(diskFullOptions(t, dir, fs, clk)) }
	b, err := open()
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultQueueConfig()
	cfg.Retention = MaxRetention
	q := mustQueue(t, b, "full", cfg)
	acked := map[string]bool{}
	body := strings.Repeat("x", 4000)
	var sendErr error
	for i := 0; i < 10_000 && sendErr == nil; i++ {
		entries := make([]SendEntry, MaxBatch)
		for k := range entries {
			entries[k].Body = []byte(fmt.Sprintf("%06d-%d-%s", i, k, body))
		}
		if _, sendErr = q.Send(entries, nil); sendErr == nil {
			for _, e := range entries {
				acked[string(e.Body[:10])] = true
			}
		}
		clk.Advance(150 * time.Millisecond) // the space job samples
	}
	if !errors.Is(sendErr, ErrDiskFull) {
		t.Fatalf("sends on a filling disk ended with %v, want ErrDiskFull", sendErr)
	}
	st := b.Stats().Storage
	if !st.DiskFull || st.DiskFullEvents != 1 || st.FreeBytes >= st.FreeSpaceReserve {
		t.Fatalf("storage stats on a full disk: %+v", st)
	}
	t.Logf("disk full after %d messages, %d bytes free, reserve %d", len(acked), st.FreeBytes, st.FreeSpaceReserve)
	if _, err := b.CreateQueue("another", cfg); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("queue creation on a full disk: %v", err)
	}
	if err := b.SetQueueAttributes("full", ConfigPatch{}); err != nil {
		t.Fatalf("attribute change on a full disk: %v", err)
	}
	if err := b.Health(); err != nil {
		t.Fatalf("a full disk is not a failure: %v", err)
	}
	// Consumers drain.
	drainSome := func(b *Broker, n int) {
		q, _ := b.Queue("full")
		for done := 0; done < n; {
			msgs, err := q.Receive(context.Background(), ReceiveOptions{Max: MaxBatch, HasWait: true}, nil)
			if err != nil {
				t.Fatalf("receive on a full disk: %v", err)
			}
			hs := make([]ReceiptHandle, len(msgs))
			for i, m := range msgs {
				hs[i] = m.Handle
				delete(acked, string(m.Body[:10]))
			}
			if _, _, err := q.ChangeVisibility(hs[0], time.Minute); err != nil {
				t.Fatalf("visibility change on a full disk: %v", err)
			}
			if _, err := q.Delete(hs[1:], make([]error, len(hs))); len(hs) > 1 && err != nil {
				t.Fatalf("delete on a full disk: %v", err)
			}
			done += len(msgs)
		}
	}
	drainSome(b, 64)
	// A restart on the full disk opens and serves reads.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if b, err = open(); err != nil {
		t.Fatalf("restart on a full disk: %v", err)
	}
	defer func() { b.Close() }()
	q, _ = b.Queue("full")
	if !b.Stats().Storage.DiskFull {
		t.Fatal("not in the disk-full state after a restart on a full disk")
	}
	if _, err := q.Peek(1, nil); err != nil {
		t.Fatalf("peek after a restart on a full disk: %v", err)
	}
	drainSome(b, 32)
	if _, err := q.Send([]SendEntry{{Body: []byte("refused")}}, nil); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("send on a full disk after restart: %v", err)
	}
	// Space comes back: the guard sees it by itself, with no operation to
	// kick it (it samples while the disk is full: a cluster node waits for
	// that to take leads again), and sends work again without a restart.
	clk.Advance(150 * time.Millisecond) // the sample the refused send asked for: still full
	if !b.DiskFull() {
		t.Fatal("Broker.DiskFull false on a full disk")
	}
	fs.SetCapacity(64 << 20)
	clk.Advance(150 * time.Millisecond)
	if b.DiskFull() {
		t.Fatal("the guard did not see the space come back without an operation")
	}
	if _, err := q.Send([]SendEntry{{Body: []byte("welcome-back")}}, nil); err != nil {
		t.Fatalf("send after space was freed: %v", err)
	}
	if b.Stats().Storage.DiskFull {
		t.Fatal("still disk full after space was freed")
	}
	// Nothing acknowledged and not deleted is missing (the visibility
	// changed ones are Inactive: dumpQueue sees every state).
	got := bodiesIn(t, b, "full")
	have := map[string]bool{}
	for body := range got {
		if len(body) >= 10 {
			have[body[:10]] = true
		}
	}
	for k := range acked {
		if !have[k] {
			t.Fatalf("acknowledged message %s lost", k)
		}
	}
}

// TestDiskFullRefusesToOpen: below the guard's minimum the broker does not
// open (instead of dying in Badger later), and says why. Under an explicit
// FreeSpaceReserve it names that reserve as what to lower: it told the
// embedder to lower the segment and memtable sizes, which do not size the
// guard then (embedding audit, 2026-12-07).
func TestDiskFullRefusesToOpen(t *testing.T) {
	dir := t.TempDir()
	fs := wal.NewMemFS()
	fs.MkdirAll(dir+"/wal", 0o700)
	fs.SetCapacity(1 << 20)
	o := Options{Dir: dir, Clock: NewFakeClock(t0), Logger: testLogger(t), FreeSpaceReserve: 4 << 20}
	o.WAL.FS = fs
	o.WAL.SegmentBytes = 256 << 10
	_, err := Open(o)
	if !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), "refusing to open") ||
		!strings.Contains(err.Error(), "FreeSpaceReserve") || strings.Contains(err.Error(), "memtable") {
		t.Fatalf("open with 1 MiB free and a 4 MiB reserve: %v; want it refused, naming FreeSpaceReserve", err)
	}
	t.Logf("refused, as it must be: %v", err)
}

// TestSpareFailureRecovers: a log that cannot make its next segment file
// (preallocation fails for lack of space) answers the changes that need it
// with the retryable ErrStorageUnavailable, reports itself unhealthy, keeps
// taking nothing for failed, and recovers by itself once the cause is gone:
// no restart, nothing acknowledged lost.
func TestSpareFailureRecovers(t *testing.T) {
	b, ffs := openSpareFaultBroker(t)
	defer b.Close()
	q := mustQueue(t, b, "spare", DefaultQueueConfig())
	ffs.FailPreallocate(syscall.ENOSPC)
	body := []byte(strings.Repeat("s", 2000))
	var err error
	sent := 0
	for i := 0; i < 1000 && err == nil; i++ {
		if _, err = q.Send([]SendEntry{{Body: body}}, nil); err == nil {
			sent++
		}
	}
	if !errors.Is(err, ErrStorageUnavailable) {
		t.Fatalf("sends while no segment file can be made ended with %v, want ErrStorageUnavailable", err)
	}
	if h := b.Health(); !errors.Is(h, ErrStorageUnavailable) {
		t.Fatalf("health while no segment file can be made: %v", h)
	}
	ffs.Disarm()
	// The log's spare goroutine retries with backoff (real time).
	deadline := time.Now().Add(30 * time.Second)
	for b.Health() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("still unhealthy after the cause is gone: %v", b.Health())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := q.Send([]SendEntry{{Body: body}}, nil); err != nil {
		t.Fatalf("send after recovery: %v", err)
	}
	info, _ := q.Attributes()
	if int(info.Active) < sent+1 {
		t.Fatalf("%d messages after recovery, %d acknowledged", info.Active, sent+1)
	}
}

// While the log waits for a segment file it cannot make, a delete or a
// visibility change is refused before it changes anything: the message is
// still there and its handle still works once the log recovers. They used
// to change the queue first and then answer ErrStorageUnavailable ("retry
// later") for a change already made, so that the retry met a handle gone.
func TestStalledLogRefusesDeletesBeforeChangingThem(t *testing.T) {
	b, ffs := openSpareFaultBroker(t)
	defer b.Close()
	q := mustQueue(t, b, "stall", DefaultQueueConfig())
	sendBody(t, q, "keep")
	ms, err := q.Receive(context.Background(), ReceiveOptions{Max: 1, HasWait: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := ms[0].Handle
	stallLog(t, b, ffs, q)
	errs := make([]error, 1)
	if _, err := q.Delete([]ReceiptHandle{h}, errs); !errors.Is(err, ErrStorageUnavailable) {
		t.Fatalf("a delete while the log is stalled: %v", err)
	}
	if _, _, err := q.ChangeVisibility(h, time.Minute); !errors.Is(err, ErrStorageUnavailable) {
		t.Fatalf("a visibility change while the log is stalled: %v", err)
	}
	if info, _ := q.Attributes(); info.Inactive != 1 {
		t.Fatalf("the received message: %d inactive, want 1 (the refused delete changed the queue)", info.Inactive)
	}
	ffs.Disarm()
	deadline := time.Now().Add(30 * time.Second) // a bound: the spare goroutine retries with backoff
	for b.store.stalled() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("still stalled after the cause is gone: %v", b.store.stalled())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := q.Delete([]ReceiptHandle{h}, errs); err != nil || errs[0] != nil {
		t.Fatalf("the retried delete: %v %v", err, errs[0])
	}
}

// A free-space reserve set below what the log and the index need is
// warned about at open (space.go: a disk filled by others could reach
// Badger before the guard stops writes); one at or above it, or the
// sized default, is not.
func TestSmallFreeSpaceReserveIsWarnedAbout(t *testing.T) {
	for _, tc := range []struct {
		reserve int64
		warned  bool
	}{{1 << 20, true}, {0, false}, {4 << 30, false}} {
		var logged bytes.Buffer
		o := Options{Dir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(&logged, nil)), FreeSpaceReserve: tc.reserve}
		o.WAL.SegmentBytes = 64 << 10
		b, err := Open(o)
		if err != nil {
			if tc.reserve == 4<<30 {
				continue // this file system has less than the minimum free: nothing to see
			}
			t.Fatal(err)
		}
		b.Close()
		if got := strings.Contains(logged.String(), "free-space reserve is below"); got != tc.warned {
			t.Errorf("reserve %d: warned %v, want %v:\n%s", tc.reserve, got, tc.warned, logged.String())
		}
	}
}

// openSpareFaultBroker opens a durable broker whose log's files are on a
// FaultFS (to fail the preallocation of its next segments), with small
// segments and no recycling.
// stallLog makes the log of b stall: the next segment file cannot be made
// (ffs fails preallocation with ENOSPC) and q's sends fill the current one.
func stallLog(t *testing.T, b *Broker, ffs *wal.FaultFS, q *Queue) {
	t.Helper()
	ffs.FailPreallocate(syscall.ENOSPC)
	body := []byte(strings.Repeat("s", 2000))
	for i := 0; i < 1000 && b.store.stalled() == nil; i++ {
		q.Send([]SendEntry{{Body: body}}, nil)
	}
	if err := b.store.stalled(); !errors.Is(err, ErrStorageUnavailable) {
		t.Fatalf("the log never stalled: %v", err)
	}
}

func openSpareFaultBroker(t *testing.T) (*Broker, *wal.FaultFS) {
	t.Helper()
	ffs := wal.NewFaultFS(wal.NewMemFS())
	b := openDurableTest(t, t.TempDir(), NewFakeClock(t0), func(o *Options) {
		o.WAL.FS = ffs
		o.WAL.SegmentBytes = 64 << 10
		o.WAL.BufferBytes = 64 << 10
		o.WAL.RecycleSegments = -1
	})
	return b, ffs
}
