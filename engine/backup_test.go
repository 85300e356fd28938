package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smqd/smqd/engine/archive"
	"github.com/smqd/smqd/wal"
)

// backupBodies receives every message of q, visible or not (the clock goes
// past every visibility timeout first), and returns how often each body
// came.
func backupBodies(t *testing.T, b *Broker, clk *FakeClock, name string) map[string]int {
	t.Helper()
	clk.Advance(24 * time.Hour)
	q, err := b.Queue(name)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for range 100000 {
		ms, err := q.Receive(context.Background(), ReceiveOptions{Max: 16, HasWait: true}, nil)
		if errors.Is(err, ErrMessageNotExist) {
			return got
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			got[string(m.Body)]++
		}
	}
	t.Fatal("the queue never emptied")
	return nil
}

// checkRestored fails t unless b, opened on a restored directory and
// drained, found its index and log consistent: a checkpoint within the
// log, nothing lost, every body read back.
func checkRestored(t *testing.T, b *Broker) {
	t.Helper()
	rec := b.Recovery()
	if rec.Checkpoint > rec.LogEnd || rec.Lost > 0 || rec.Moved > 0 || rec.Orphans > 0 {
		t.Errorf("the restored broker's recovery: %+v", rec)
	}
	if n := b.unreadable.Load(); n > 0 {
		t.Errorf("the restored broker could not read %d bodies", n)
	}
}

func backupTo(t *testing.T, b *Broker, opts BackupOptions) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := b.Backup(&buf, opts); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func restoreAndOpen(t *testing.T, archive []byte, clk *FakeClock, mod func(*Options)) (*Broker, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "restored")
	if _, err := Restore(bytes.NewReader(archive), dir); err != nil {
		t.Fatal(err)
	}
	return openDurableTest(t, dir, clk, mod), dir
}

// wantRestored restores ar, opens it and fails t unless queue name holds
// exactly want (body: copies) and checkRestored passes.
func wantRestored(t *testing.T, ar []byte, clk *FakeClock, mod func(*Options), name string, want map[string]int) {
	t.Helper()
	b2, _ := restoreAndOpen(t, ar, clk, mod)
	defer b2.Close()
	if got := backupBodies(t, b2, clk, name); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("restored %d bodies, want %d:\ngot  %.300v\nwant %.300v", len(got), len(want), got, want)
	}
	checkRestored(t, b2)
}

func smallSegments(o *Options) { o.WAL.SegmentBytes = 64 << 10 }

func sendBody(t *testing.T, q *Queue, body string) {
	t.Helper()
	if _, err := q.Send([]SendEntry{{Body: []byte(body)}}, nil); err != nil {
		t.Fatal(err)
	}
}

// takeAll receives and deletes every visible message whose body starts
// with prefix; the others are received too, and come back after their
// visibility timeout.
func takeAll(t *testing.T, q *Queue, keep func(body string) bool) {
	t.Helper()
	errs := make([]error, 16)
	for range 10000 {
		ms, err := q.Receive(context.Background(), ReceiveOptions{Max: 16, HasWait: true}, nil)
		if errors.Is(err, ErrMessageNotExist) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		var hs []ReceiptHandle
		for _, m := range ms {
			if !keep(string(m.Body)) {
				hs = append(hs, m.Handle)
			}
		}
		if _, err := q.Delete(hs, errs[:len(hs)]); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("the queue never emptied")
}

// Invariant 1 of backup.go: segments that compaction would remove while a
// backup copies the log stay until it is done. The backup's index copy has
// an old checkpoint; then (in the hook between the index copy and the log
// copy) segments after that checkpoint fill, empty, are passed by a newer
// checkpoint and become removable. A restore must still replay them.
func TestBackupKeepsSegmentsCompactionWouldRemove(t *testing.T) {
	clk := NewFakeClock(t0)
	b := openDurableTest(t, t.TempDir(), clk, smallSegments)
	defer b.Close()
	cfg := DefaultQueueConfig()
	cfg.VisibilityTimeout = time.Hour
	q := mustQueue(t, b, "bq", cfg)
	pad := string(bytes.Repeat([]byte{'.'}, 1000))
	want := map[string]int{}
	for i := range 200 {
		body := fmt.Sprintf("keep-%03d %s", i, pad)
		sendBody(t, q, body)
		if i%10 == 0 {
			want[body] = 1
		}
	}
	takeAll(t, q, func(body string) bool { return want[body] > 0 })
	d := durableOf(b)
	if err := d.checkpoint(); err != nil {
		t.Fatal(err)
	}
	removedBefore := b.compacted.removed.Load()
	b.testBackup.beforeLog = func() {
		for i := range 400 {
			sendBody(t, q, fmt.Sprintf("gone-%03d %s", i, pad))
		}
		takeAll(t, q, func(body string) bool { return want[body] > 0 })
		for i := range 5 {
			body := fmt.Sprintf("late-%d", i)
			sendBody(t, q, body)
			want[body] = 1
		}
		for range 2 {
			if err := d.checkpoint(); err != nil {
				t.Error(err)
			}
			if _, _, err := b.compactOnce(0); err != nil {
				t.Error(err)
			}
		}
	}
	ar := backupTo(t, b, BackupOptions{})
	b.testBackup.beforeLog = nil
	if n := b.compacted.removed.Load() - removedBefore; n != 0 {
		t.Errorf("compaction removed %d segments during the backup", n)
	}
	// After the backup: not in it.
	sendBody(t, q, "after")
	// The segments go once the backup is done.
	if err := d.checkpoint(); err != nil {
		t.Fatal(err)
	}
	if removed, _, err := b.compactOnce(0); err != nil || removed == 0 {
		t.Fatalf("after the backup compaction removed %d segments (err %v); want some", removed, err)
	}

	wantRestored(t, ar, clk, smallSegments, "bq", want)
}

// A backup taken while producers and consumers run holds every message
// acknowledged before it started that no consumer began to delete before
// it ended, none whose delete was acknowledged before it started, nothing
// never sent, and nothing twice (backup.go invariants 1 to 3). Compaction
// and checkpoints run all the while.
func TestBackupUnderLoad(t *testing.T) {
	for _, mode := range []string{"always", "interval", "none"} {
		t.Run(mode, func(t *testing.T) {
			testBackupUnderLoad(t, mode)
		})
	}
}

func testBackupUnderLoad(t *testing.T, mode string) {
	clk := NewFakeClock(t0)
	mod := func(o *Options) {
		smallSegments(o)
		switch mode {
		case "interval":
			o.WAL.Sync = wal.SyncInterval
		case "none":
			o.WAL.Sync = wal.SyncNone
		}
	}
	b := openDurableTest(t, t.TempDir(), clk, mod)
	defer b.Close()
	cfg := DefaultQueueConfig()
	cfg.VisibilityTimeout = time.Hour
	q := mustQueue(t, b, "lq", cfg)

	type life struct{ sent, delStart, delAck int64 }
	var (
		ev    atomic.Int64
		mu    sync.Mutex
		lives = map[string]*life{}
	)
	const producers, perProducer = 4, 1500
	pad := string(bytes.Repeat([]byte{'x'}, 400))
	var wg sync.WaitGroup
	var sentAll atomic.Bool
	var deletesAcked atomic.Int64 // delete calls answered
	var prod sync.WaitGroup
	for p := range producers {
		prod.Add(1)
		go func() {
			defer prod.Done()
			for i := range perProducer {
				if i == perProducer/2 {
					// Half way, wait (bounded) for the consumers' first
					// deletes: on a loaded host the producers finished
					// before any, and the run checked nothing.
					for end := time.Now().Add(time.Minute); deletesAcked.Load() < 20 && time.Now().Before(end); {
						time.Sleep(time.Millisecond)
					}
				}
				body := fmt.Sprintf("p%d-%04d %s", p, i, pad)
				l := &life{} // known before a consumer can see it
				mu.Lock()
				lives[body] = l
				mu.Unlock()
				if _, err := q.Send([]SendEntry{{Body: []byte(body)}}, nil); err != nil {
					t.Error(err)
					return
				}
				at := ev.Add(1)
				mu.Lock()
				l.sent = at
				mu.Unlock()
			}
		}()
	}
	go func() { prod.Wait(); sentAll.Store(true) }()
	for c := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 1))
			errs := make([]error, 16)
			// Bounded by time, not by receives: empty polls while the
			// producers' first sends waited for their flushes used up a
			// budget of 100,000, and the consumers left before deleting
			// anything (the run then checked nothing).
			for end := time.Now().Add(2 * time.Minute); time.Now().Before(end); {
				ms, err := q.Receive(context.Background(), ReceiveOptions{Max: 1 + rng.IntN(16), HasWait: true}, nil)
				if errors.Is(err, ErrMessageNotExist) {
					if sentAll.Load() {
						return
					}
					time.Sleep(100 * time.Microsecond)
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				// A third of what is received stays, unacknowledged.
				var hs []ReceiptHandle
				var bodies []string
				for _, m := range ms {
					if rng.IntN(3) > 0 {
						hs = append(hs, m.Handle)
						bodies = append(bodies, string(m.Body))
					}
				}
				if len(hs) == 0 {
					continue
				}
				start := ev.Add(1)
				mu.Lock()
				for _, body := range bodies {
					if l := lives[body]; l != nil {
						l.delStart = start
					}
				}
				mu.Unlock()
				if _, err := q.Delete(hs, errs[:len(hs)]); err != nil {
					t.Error(err)
					return
				}
				ack := ev.Add(1)
				deletesAcked.Add(1)
				mu.Lock()
				for i, body := range bodies {
					if l := lives[body]; l != nil && errs[i] == nil {
						l.delAck = ack
					}
				}
				mu.Unlock()
			}
		}()
	}
	stopCompact, compactDone := make(chan struct{}), make(chan struct{})
	go func() { // checkpoints and compaction all the while
		defer close(compactDone)
		d := durableOf(b)
		for {
			select {
			case <-stopCompact:
				return
			case <-time.After(time.Millisecond):
			}
			if err := d.checkpoint(); err != nil {
				t.Error(err)
				return
			}
			if _, _, err := b.compactOnce(0); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	// Back up once a third is sent and some deletes are done, and hold
	// the log copy until 1,000 more operations are done (or the producers
	// are).
	for (ev.Load() < producers*perProducer/3 || deletesAcked.Load() < 20) && !sentAll.Load() {
		time.Sleep(time.Millisecond)
	}
	b.testBackup.beforeLog = func() {
		from := ev.Load()
		for ev.Load() < from+1000 && !sentAll.Load() {
			time.Sleep(time.Millisecond)
		}
	}
	b0 := ev.Add(1)
	var ar bytes.Buffer
	info, err := b.Backup(&ar, BackupOptions{})
	b1 := ev.Add(1)
	prod.Wait()
	wg.Wait()
	close(stopCompact)
	<-compactDone
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("backup between events %d and %d of %d: %+v", b0, b1, ev.Load(), info)

	b2, _ := restoreAndOpen(t, ar.Bytes(), clk, mod)
	defer b2.Close()
	got := backupBodies(t, b2, clk, "lq")
	checkRestored(t, b2)
	mu.Lock()
	defer mu.Unlock()
	var must, mustNot, kept int
	for body, l := range lives {
		n := got[body]
		switch {
		case l.sent != 0 && l.sent < b0 && (l.delStart == 0 || l.delStart > b1):
			must++
			if n == 0 {
				t.Errorf("%.8s: sent (event %d) before the backup (%d..%d), not deleted, is not in it", body, l.sent, b0, b1)
			}
		case l.delAck != 0 && l.delAck < b0:
			mustNot++
			if n > 0 {
				t.Errorf("%.8s: deleted (event %d) before the backup (%d..%d) is in it", body, l.delAck, b0, b1)
			}
		}
		if n > 1 {
			t.Errorf("%.8s: %d times in the backup", body, n)
		}
		if n > 0 {
			kept++
		}
	}
	for body := range got {
		if lives[body] == nil {
			t.Errorf("%.8s: in the backup, never sent", body)
		}
	}
	t.Logf("%d messages restored; %d had to be, %d had to be gone", kept, must, mustNot)
	if must == 0 || mustNot == 0 {
		t.Fatalf("the run checked nothing: %d must, %d must not", must, mustNot)
	}
}

// Restore refuses an archive cut short or with a bit flipped, and leaves
// nothing in its directory (invariant 4).
func TestRestoreRefusesDamagedBackups(t *testing.T) {
	ar, clk := backupOf150(t)
	rng := rand.New(rand.NewPCG(3, 4))
	root := t.TempDir()
	empty := filepath.Join(root, "empty")
	if err := os.Mkdir(empty, 0o700); err != nil {
		t.Fatal(err)
	}
	for i := range 24 {
		c := bytes.Clone(ar)
		what := ""
		if i%2 == 0 {
			n := rng.IntN(len(c))
			c, what = c[:n], fmt.Sprintf("cut at %d of %d", n, len(ar))
		} else {
			p := rng.IntN(len(c))
			c[p] ^= 1 << rng.IntN(8)
			what = fmt.Sprintf("bit flipped at %d of %d", p, len(ar))
		}
		dir := filepath.Join(root, fmt.Sprint("r", i))
		if i%4 < 2 {
			dir = empty // exists, empty: it must be left so
		}
		_, err := Restore(bytes.NewReader(c), dir)
		if !errors.Is(err, archive.ErrDamaged) {
			t.Fatalf("%s: %v, want archive.ErrDamaged", what, err)
		}
		ents, err := os.ReadDir(dir)
		switch {
		case dir == empty && (err != nil || len(ents) > 0):
			t.Fatalf("%s: the empty directory holds %d entries (%v)", what, len(ents), err)
		case dir != empty && !errors.Is(err, os.ErrNotExist):
			t.Fatalf("%s: the directory Restore made is still there (%v)", what, err)
		}
	}
	if ents, _ := os.ReadDir(root); len(ents) != 1 {
		t.Fatalf("the failed restores left %d entries beside the empty directory", len(ents)-1)
	}
	// The whole archive restores into the directory the failures left.
	if _, err := Restore(bytes.NewReader(ar), empty); err != nil {
		t.Fatal(err)
	}
	b2 := openDurableTest(t, empty, clk, smallSegments)
	defer b2.Close()
	if got := backupBodies(t, b2, clk, "dq"); len(got) != 150 {
		t.Fatalf("%d bodies restored, want 150", len(got))
	}
	checkRestored(t, b2)
}

func TestBackupRefusals(t *testing.T) {
	mem, _ := openTest(t, Options{})
	if _, err := mem.Backup(&bytes.Buffer{}, BackupOptions{}); !errors.Is(err, ErrBackupUnsupported) {
		t.Errorf("in memory: %v", err)
	}
	mem.Close()
	h, _ := newHandShard(t)
	if _, err := h.leader.Backup(&bytes.Buffer{}, BackupOptions{}); !errors.Is(err, ErrBackupUnsupported) {
		t.Errorf("a replica: %v", err)
	}

	clk := NewFakeClock(t0)
	dir := t.TempDir()
	b := openDurableTest(t, dir, clk, nil)
	for _, name := range []string{"../x", "/etc/passwd", "wal/0000000000000000.wal", "index/MANIFEST", "LOCK", "index.kv", "a b"} {
		if _, err := b.Backup(&bytes.Buffer{}, BackupOptions{Files: []string{name}}); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("file %q: %v", name, err)
		}
	}
	// Files named are copied (a missing one skipped) and restored private.
	if err := os.WriteFile(filepath.Join(dir, "credentials"), []byte("k=s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ar := backupTo(t, b, BackupOptions{Files: []string{"credentials", "missing"}})
	b.Close()
	if _, err := b.Backup(&bytes.Buffer{}, BackupOptions{}); !errors.Is(err, ErrClosed) {
		t.Errorf("closed: %v", err)
	}
	b2, rdir := restoreAndOpen(t, ar, clk, nil)
	b2.Close()
	fi, err := os.Stat(filepath.Join(rdir, "credentials"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("credentials restored: %v %v", fi, err)
	}
	if data, _ := os.ReadFile(filepath.Join(rdir, "credentials")); string(data) != "k=s\n" {
		t.Fatalf("credentials restored as %q", data)
	}
	// Not into a directory that holds anything; it is left as it was.
	if _, err := Restore(bytes.NewReader(ar), rdir); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("into a used directory: %v", err)
	}
	if data, _ := os.ReadFile(filepath.Join(rdir, "credentials")); string(data) != "k=s\n" {
		t.Fatalf("a refused restore changed the directory: %q", data)
	}
}

// Invariant 3 of backup.go: in the interval mode a send is acknowledged
// once written, before any fsync; a backup still holds it.
func TestBackupHoldsWhatIntervalModeAcknowledged(t *testing.T) {
	clk := NewFakeClock(t0)
	mod := func(o *Options) {
		o.WAL.Sync = wal.SyncInterval
		o.WAL.SyncInterval = time.Hour // no fsync of its own during the test
	}
	b := openDurableTest(t, t.TempDir(), clk, mod)
	defer b.Close()
	q := mustQueue(t, b, "iq", DefaultQueueConfig())
	want := map[string]int{}
	for i := range 50 {
		body := fmt.Sprint("unsynced-", i)
		sendBody(t, q, body)
		want[body] = 1
	}
	wantRestored(t, backupTo(t, b, BackupOptions{}), clk, mod, "iq", want)
}

// Invariant 2 of backup.go: the log copy ends after every record the index
// copy reflects. Records appended and checkpointed just before the index is
// copied are in the log copy too.
func TestBackupLogCoversTheIndexCopy(t *testing.T) {
	clk := NewFakeClock(t0)
	b := openDurableTest(t, t.TempDir(), clk, nil)
	defer b.Close()
	q := mustQueue(t, b, "cq", DefaultQueueConfig())
	want := map[string]int{"before": 1}
	sendBody(t, q, "before")
	b.testBackup.beforeIndex = func() {
		for i := range 20 {
			body := fmt.Sprint("checkpointed-", i)
			sendBody(t, q, body)
			want[body] = 1
		}
		if err := durableOf(b).checkpoint(); err != nil {
			t.Error(err)
		}
	}
	wantRestored(t, backupTo(t, b, BackupOptions{}), clk, nil, "cq", want)
}

// BackupOptions.BytesPerSecond: the backup sleeps so that it never writes
// ahead of the rate. The clock is the test's: it moves only when the
// backup sleeps, so the sleeps must add up to the archive's size over the
// rate, less the last write (the cap is checked before each write).
func TestBackupRateCap(t *testing.T) {
	clk := NewFakeClock(t0)
	b := openDurableTest(t, t.TempDir(), clk, smallSegments)
	defer b.Close()
	q := mustQueue(t, b, "rq", DefaultQueueConfig())
	for i := range 600 {
		sendBody(t, q, fmt.Sprintf("r%d %s", i, bytes.Repeat([]byte{'r'}, 2000)))
	}
	now := t0
	var slept time.Duration
	b.testBackup.now = func() time.Time { return now }
	b.testBackup.sleep = func(d time.Duration) { slept += d; now = now.Add(d) }
	const rate = 100 << 10
	var buf bytes.Buffer
	info, err := b.Backup(&buf, BackupOptions{BytesPerSecond: rate})
	if err != nil {
		t.Fatal(err)
	}
	full := time.Duration(float64(info.Bytes) / rate * float64(time.Second))
	least := time.Duration(float64(info.Bytes-archive.MaxData-64) / rate * float64(time.Second))
	if slept < least || slept > full {
		t.Fatalf("%d bytes at %d a second: slept %s, want between %s and %s", info.Bytes, rate, slept, least, full)
	}
	if _, err := b.Backup(&buf, BackupOptions{BytesPerSecond: -1}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a negative rate: %v", err)
	}
}

// A capped backup writes in pieces of about a quarter second's worth and
// sleeps at most backupSleep at a time, looking at whether the broker
// closes between sleeps: Close ends it within one sleep. It wrote 1 MiB
// frames at once and slept each one's whole debt, with the index's read
// transaction held (backup audit: 17 minutes at 1 KB/s through which
// Close waited).
func TestBackupRateCapPacesEvenlyAndEndsOnClose(t *testing.T) {
	clk := NewFakeClock(t0)
	b := openDurableTest(t, t.TempDir(), clk, smallSegments)
	q := mustQueue(t, b, "rq", DefaultQueueConfig())
	for i := range 100 {
		sendBody(t, q, fmt.Sprintf("r%d %s", i, bytes.Repeat([]byte{'r'}, 2000)))
	}
	now := t0
	var sleeps int
	var longest time.Duration
	closed := make(chan error, 1)
	b.testBackup.now = func() time.Time { return now }
	b.testBackup.sleep = func(d time.Duration) {
		longest = max(longest, d)
		now = now.Add(d)
		if sleeps++; sleeps == 50 {
			go func() { closed <- b.Close() }()
			for i := 0; i < 5000 && !b.closed.Load(); i++ { // until Close marked the broker closed
				time.Sleep(time.Millisecond)
			}
		}
	}
	const rate = 4 << 10
	w := &maxWriter{}
	_, err := b.Backup(w, BackupOptions{BytesPerSecond: rate})
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("a capped backup through Close: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if longest > backupSleep || w.largest > rate/4 || sleeps > 50 {
		t.Fatalf("longest sleep %s, largest write %d bytes at %d a second, %d sleeps (Close after the 50th)", longest, w.largest, rate, sleeps)
	}
}

// maxWriter keeps the size of the largest write.
type maxWriter struct{ largest int }

func (m *maxWriter) Write(p []byte) (int, error) {
	m.largest = max(m.largest, len(p))
	return len(p), nil
}

// failingWriter fails every write once n bytes are written.
type failingWriter struct{ n int }

func (f *failingWriter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		k := f.n
		f.n = 0
		return k, errors.New("the client went away")
	}
	f.n -= len(p)
	return len(p), nil
}

// A backup whose writer fails midway (the client disconnects) returns its
// error and leaves the broker as it was: serving, with compaction free to
// remove segments again, and the next backup whole.
func TestBackupWriterFailure(t *testing.T) {
	clk := NewFakeClock(t0)
	b := openDurableTest(t, t.TempDir(), clk, smallSegments)
	defer b.Close()
	q := mustQueue(t, b, "fq", DefaultQueueConfig())
	for i := range 300 {
		sendBody(t, q, fmt.Sprintf("f%d %s", i, bytes.Repeat([]byte{'f'}, 1000)))
	}
	takeAll(t, q, func(string) bool { return false })
	for _, at := range []int{0, 100, 200 << 10} {
		if _, err := b.Backup(&failingWriter{n: at}, BackupOptions{}); err == nil || err.Error() != "the client went away" {
			t.Fatalf("failing after %d bytes: %v", at, err)
		}
		if n := b.backups.Load(); n != 0 {
			t.Fatalf("after a failed backup %d backups count as running", n)
		}
	}
	if err := durableOf(b).checkpoint(); err != nil {
		t.Fatal(err)
	}
	if removed, _, err := b.compactOnce(0); err != nil || removed == 0 {
		t.Fatalf("compaction after failed backups removed %d segments (%v)", removed, err)
	}
	sendBody(t, q, "still serving")
	wantRestored(t, backupTo(t, b, BackupOptions{}), clk, smallSegments, "fq", map[string]int{"still serving": 1})
}

// A backup holds topics, their subscriptions and MessageCount, and the
// copies their publishes put into queues.
func TestBackupHoldsTopics(t *testing.T) {
	clk := NewFakeClock(t0)
	b := openPubDurable(t, t.TempDir(), clk)
	defer b.Close()
	setupPubTopic(t, b)
	publishN(t, b, clk, 3)
	if err := durableOf(b).checkpoint(); err != nil {
		t.Fatal(err)
	}
	publishN(t, b, clk, 2) // in the log past the checkpoint only
	b2, _ := restoreAndOpen(t, backupTo(t, b, BackupOptions{}), clk, nil)
	defer b2.Close()
	if n := messageCount(t, b2, "pt"); n != 5 {
		t.Errorf("restored MessageCount %d, want 5", n)
	}
	subs, _, err := b2.ListSubscriptions("pt", "", "", 0)
	if err != nil || len(subs) != len(pubSinks) {
		t.Errorf("restored subscriptions %v (%v), want %d", subs, err, len(pubSinks))
	}
	for _, n := range pubSinks {
		q, err := b2.Queue(n)
		if err != nil {
			t.Fatal(err)
		}
		if a, _ := q.Attributes(); a.Active+a.Delayed+a.Inactive != 5 {
			t.Errorf("queue %s holds %+v, want 5 copies", n, a)
		}
	}
	checkRestored(t, b2)
}

// A backup of the builds of 2026-12-05 (fe342a7 to 994fd58^) holds its
// index as Badger's own backup stream, "index.badger", under the same
// format number: it is restored (upgrade audit: it was refused as "the
// archive holds no index or no log"). testdata/backup-format1-badger.smqd
// was made by fe342a7's smqctl backup.
func TestRestoreABadgerStreamBackup(t *testing.T) {
	f, err := os.Open("testdata/backup-format1-badger.smqd")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := filepath.Join(t.TempDir(), "d")
	if _, err := Restore(f, dir); err != nil {
		t.Fatal(err)
	}
	// The archive's own time (it was made just before its commit): with
	// the clock at time.Now() its messages expired by their retention a
	// day after it was made, and the test failed from 2026-12-07 08:20.
	b := openDurableTest(t, dir, NewFakeClock(time.Date(2026, 12, 6, 8, 25, 20, 0, time.UTC)), nil)
	defer b.Close()
	names, _, err := b.ListQueues("", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var msgs int64
	for _, n := range names {
		q, err := b.Queue(n)
		if err != nil {
			t.Fatal(err)
		}
		info := attrs(t, q)
		msgs += info.Active + info.Inactive + info.Delayed
	}
	t.Logf("queues %v, %d messages", names, msgs)
	if len(names) != 6 || msgs != 14 {
		t.Fatalf("restored %d queues %v holding %d messages, want 6 holding 14", len(names), names, msgs)
	}
}

// A restore into a directory removes what an earlier restore into it left
// when it crashed (its hidden ".NAME.restoring-*" directory): on a volume
// that a restore filled, Badger ended it with SIGBUS, and the directory it
// left kept the volume full for every later try (backup audit,
// 2026-12-07).
func TestRestoreRemovesWhatACrashedRestoreLeft(t *testing.T) {
	ar, clk := backupOf150(t)
	root := t.TempDir()
	dir := filepath.Join(root, "data")
	stale := filepath.Join(root, ".data.restoring-123")
	if err := os.MkdirAll(filepath.Join(stale, "index"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stale, "index", "000001.vlog"), make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(root, ".other.restoring-1") // another directory's: left alone
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := Restore(bytes.NewReader(ar), dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the crashed restore's directory is still there (%v)", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("another directory's restore was removed: %v", err)
	}
	b := openDurableTest(t, dir, clk, nil)
	defer b.Close()
	checkRestored(t, b)
}
