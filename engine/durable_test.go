package engine

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/smqd/smqd/wal"
)

// openDurableTest opens a durable broker in dir on clk.
func openDurableTest(t testing.TB, dir string, clk *FakeClock, mod func(*Options)) *Broker {
	t.Helper()
	b, err := Open(durableTestOptions(t, dir, clk, mod))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// durableTestOptions are openDurableTest's options, for a test that expects
// the open to fail.
func durableTestOptions(t testing.TB, dir string, clk *FakeClock, mod func(*Options)) Options {
	o := Options{Dir: dir, Clock: clk, Logger: testLogger(t), Stripes: 2}
	o.WAL.SegmentBytes = 256 << 10
	o.WAL.BufferBytes = 1 << 20
	if mod != nil {
		mod(&o)
	}
	return o
}

func TestDurableRestartKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	clk := NewFakeClock(t0)
	b := openDurableTest(t, dir, clk, nil)
	cfg := DefaultQueueConfig()
	cfg.VisibilityTimeout = time.Minute
	q := mustQueue(t, b, "dq", cfg)
	var ids []MessageID
	for i := 0; i < 40; i++ {
		res, err := q.Send([]SendEntry{{Body: []byte{'m', byte(i)}, Priority: 1 + i%16}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res[0].ID)
	}
	q.Send([]SendEntry{{Body: []byte("delayed"), Delay: time.Hour, HasDelay: true}}, nil)
	got, err := q.Receive(context.Background(), ReceiveOptions{Max: 4, HasWait: true}, nil)
	if err != nil || len(got) != 4 {
		t.Fatal(err, len(got))
	}
	errs := make([]error, 1)
	if _, err := q.Delete([]ReceiptHandle{got[0].Handle}, errs); err != nil || errs[0] != nil {
		t.Fatal(err, errs[0])
	}
	keep := got[1].Handle // still Inactive across the restart
	if err := durableOf(b).checkpoint(); err != nil {
		t.Fatal(err)
	}
	b.ReleaseMemory() // loses nothing (checked after the restart)
	// More changes after the checkpoint: replayed from the log tail.
	q.Send([]SendEntry{{Body: []byte("after checkpoint")}}, nil)
	if _, err := q.Delete([]ReceiptHandle{got[2].Handle}, errs); err != nil || errs[0] != nil {
		t.Fatal(err, errs[0])
	}
	before, _ := q.Attributes()
	// Crash: no final checkpoint. Close the log and index underneath.
	crashBroker(b)
	b.ReleaseMemory() // on a closed index: nothing to do, no panic

	b2 := openDurableTest(t, dir, clk, nil)
	defer b2.Close()
	q2, err := b2.Queue("dq")
	if err != nil {
		t.Fatal(err)
	}
	b2.ReleaseMemory()
	after, _ := q2.Attributes()
	if after.Active != before.Active || after.Inactive != before.Inactive || after.Delayed != before.Delayed || after.Config != before.Config {
		t.Fatalf("before %+v after %+v", before, after)
	}
	// The handle issued before the restart still works.
	if _, err := q2.Delete([]ReceiptHandle{keep}, errs); err != nil || errs[0] != nil {
		t.Fatalf("pre-restart handle: %v %v", err, errs[0])
	}
	// New ids never repeat old ones.
	res, _ := q2.Send([]SendEntry{{Body: []byte("new")}}, nil)
	for _, id := range ids {
		if id == res[0].ID {
			t.Fatal("message id reused after restart")
		}
	}
	checkInvariants(t, q2)
}

func TestDurableSendFailsOnWriteFault(t *testing.T) {
	dir := t.TempDir()
	clk := NewFakeClock(t0)
	ffs := wal.NewFaultFS(wal.OSFS())
	ffs.Filter = func(name string) bool { return len(name) > 4 && name[len(name)-4:] == ".wal" }
	b := openDurableTest(t, dir, clk, func(o *Options) { o.WAL.FS = ffs })
	q := mustQueue(t, b, "f", DefaultQueueConfig())
	if _, err := q.Send([]SendEntry{{Body: []byte("before")}}, nil); err != nil {
		t.Fatal(err)
	}
	ffs.FailSyncs(errEIOForTest)
	if _, err := q.Send([]SendEntry{{Body: []byte("during")}}, nil); !errors.Is(err, errEIOForTest) {
		t.Fatalf("send during fault: %v", err)
	}
	if _, err := q.Send([]SendEntry{{Body: []byte("after")}}, nil); err == nil {
		t.Fatal("send after a failed fsync succeeded")
	}
	b.Close()
	ffs.Disarm()
	b2 := openDurableTest(t, dir, clk, func(o *Options) { o.WAL.FS = ffs })
	defer b2.Close()
	q2, _ := b2.Queue("f")
	msgs, err := q2.Peek(16, nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range msgs {
		if string(m.Body) == "before" {
			found = true
		}
		if string(m.Body) == "after" {
			t.Fatal("a refused send came back")
		}
	}
	if !found {
		t.Fatal("acknowledged message lost")
	}
}

var errEIOForTest = errors.New("injected EIO")

// TestDataDirLocked: a second broker on the same data directory is refused
// before it touches anything.
func TestDataDirLocked(t *testing.T) {
	dir := t.TempDir()
	clk := NewFakeClock(t0)
	b := openDurableTest(t, dir, clk, nil)
	defer b.Close()
	_, err := Open(Options{Dir: dir, Clock: clk})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v", err)
	}
}

// TestReplayBoundHoldsForConsumers: MaxReplayRecords bounds the log beyond
// the checkpoint whoever writes it. Receives, deletes and visibility changes
// append records too (a drain writes two per message); without the bound they
// would outrun the checkpointer (which otherwise looks only every 100 ms) and
// a restart would replay all of them.
func TestReplayBoundHoldsForConsumers(t *testing.T) {
	const limit = 256
	b := openDurableTest(t, t.TempDir(), NewFakeClock(t0), func(o *Options) {
		o.CheckpointRecords = limit / 4
		o.MaxReplayRecords = limit
		o.CheckpointInterval = time.Hour
		// One segment for the whole test: no compaction relocations, whose
		// records (a segment's live bodies at once) the bound admits on top.
		o.WAL.SegmentBytes = 64 << 20
	})
	defer b.Close()
	q := mustQueue(t, b, "bound", DefaultQueueConfig())
	d := durableOf(b)
	beyond := func() int64 { return d.records.Load() - d.cpRecords.Load() }
	const n = 4000
	entries := make([]SendEntry, MaxBatch)
	for i := range entries {
		entries[i] = SendEntry{Body: []byte("bounded replay")}
	}
	for sent := 0; sent < n; sent += MaxBatch {
		if _, err := q.Send(entries, nil); err != nil {
			t.Fatal(err)
		}
	}
	waitsAfterSends := b.Stats().Storage.ReplayWaits
	worst := int64(0)
	var msgs []Message
	hs := make([]ReceiptHandle, MaxBatch)
	errs := make([]error, MaxBatch)
	for done := 0; done < n; {
		var err error
		msgs, err = q.Receive(context.Background(), ReceiveOptions{Max: MaxBatch, HasWait: true}, msgs[:0])
		if err != nil {
			t.Fatalf("after %d: %v", done, err)
		}
		worst = max(worst, beyond())
		hs = hs[:0]
		for i := range msgs {
			if i%4 == 0 { // some visibility changes too
				h, _, err := q.ChangeVisibility(msgs[i].Handle, time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				msgs[i].Handle = h
				worst = max(worst, beyond())
			}
			hs = append(hs, msgs[i].Handle)
		}
		if _, err := q.Delete(hs, errs[:len(hs)]); err != nil {
			t.Fatal(err)
		}
		worst = max(worst, beyond())
		done += len(hs)
	}
	// One operation may append up to MaxBatch records after it was let
	// through.
	if worst > limit+MaxBatch {
		t.Fatalf("%d records beyond the checkpoint during the drain, bound %d", worst, limit+MaxBatch)
	}
	if b.Stats().Storage.ReplayWaits == waitsAfterSends {
		t.Fatalf("no consumer waited for the checkpointer: the bound was never exercised")
	}
}

// TestReceiveReadsRunsOfBodies: a batch received in the order it was sent
// reads its bodies from the log files with one read per run, not one per
// message, and every body and MD5 is right.
func TestReceiveReadsRunsOfBodies(t *testing.T) {
	b := openDurableTest(t, t.TempDir(), NewFakeClock(t0), func(o *Options) {
		o.Stripes = 1
		o.WAL.SegmentBytes = 4 << 20 // one segment: runs never cross one
	})
	defer b.Close()
	q := mustQueue(t, b, "runs", DefaultQueueConfig())
	const n = 4096 // 4 MiB of bodies: far more than the 1 MiB ring
	want := map[MessageID][]byte{}
	for sent := 0; sent < n; sent += MaxBatch {
		entries := make([]SendEntry, MaxBatch)
		for i := range entries {
			body := bytes.Repeat([]byte{byte(sent + i)}, 1000)
			binary.LittleEndian.PutUint32(body, uint32(sent+i))
			entries[i] = SendEntry{Body: body}
		}
		res, err := q.Send(entries, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := range res {
			want[res[i].ID] = entries[i].Body
		}
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	before := b.Stats().Storage.WAL
	var msgs []Message
	for got := 0; got < n/2; got += len(msgs) {
		var err error
		if msgs, err = q.Receive(context.Background(), ReceiveOptions{Max: MaxBatch, HasWait: true}, msgs[:0]); err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if !bytes.Equal(m.Body, want[m.ID]) || m.MD5 != md5.Sum(m.Body) {
				t.Fatalf("message %v: wrong body or MD5", m.ID)
			}
		}
	}
	after := b.Stats().Storage.WAL
	reads := (after.FileReads - before.FileReads) + (after.RingReads - before.RingReads)
	if reads > n/2/4 {
		t.Fatalf("%d log reads for %d messages received in batches of %d", reads, n/2, MaxBatch)
	}
}

// TestOperationsRacingCloseGetErrClosed: sends, receives and deletes that
// race Close in durable mode fail with ErrClosed (the server's 503), never
// with the log's or the index's own closed error, which the server's table
// does not know (a 500): storage.go invariant 4.
func TestOperationsRacingCloseGetErrClosed(t *testing.T) {
	for round := 0; round < 10; round++ {
		b := openDurableTest(t, t.TempDir(), NewFakeClock(t0), nil)
		q := mustQueue(t, b, "race", DefaultQueueConfig())
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		started := make(chan struct{}, 4)
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; ; i++ {
					var err error
					switch (w + i) % 3 {
					case 0, 1:
						_, err = q.Send([]SendEntry{{Body: []byte("racing close")}}, nil)
					default:
						var msgs []Message
						msgs, err = q.Receive(context.Background(), ReceiveOptions{Max: 4, HasWait: true}, nil)
						if err == nil {
							_, err = q.Delete([]ReceiptHandle{msgs[0].Handle}, make([]error, 1))
						} else if errors.Is(err, ErrMessageNotExist) {
							err = nil
						}
					}
					if i == 20 {
						started <- struct{}{}
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}(w)
		}
		for w := 0; w < 4; w++ {
			<-started
		}
		b.Close()
		wg.Wait()
		close(errs)
		for err := range errs {
			if !errors.Is(err, ErrClosed) {
				t.Fatalf("round %d: an operation racing Close failed with %v, want ErrClosed", round, err)
			}
		}
	}
}

// TestClosedStorageSaysErrClosed: every call on a closed backend that can
// fail says ErrClosed, in both backends (storage.go invariant 4): an
// operation that passed the broker's own closed check just before Close
// meets the closed log, and must still get the engine's error.
func TestClosedStorageSaysErrClosed(t *testing.T) {
	for _, durable := range []bool{false, true} {
		o := Options{Clock: NewFakeClock(t0), Logger: testLogger(t)}
		if durable {
			o.Dir = t.TempDir()
		}
		o = o.withDefaults()
		s, _, err := openStorage(&o)
		if err != nil {
			t.Fatal(err)
		}
		b := &Broker{opts: o, log: o.Logger, clock: o.Clock, queues: map[string]*Queue{}, byID: map[uint64]*Queue{}}
		b.compactor = newJob(o.Clock, compactInterval, func() bool { return false })
		b.store = s
		if err := s.load(b); err != nil {
			t.Fatal(err)
		}
		recs := []logRec{{typ: recQueueDelete, head: make([]byte, 8)}}
		if err := s.append(recs); err != nil {
			t.Fatal(err)
		}
		if err := s.close(true); err != nil {
			t.Fatal(err)
		}
		for name, err := range map[string]error{
			"append":      s.append([]logRec{{typ: recQueueDelete, head: make([]byte, 8)}}),
			"sync":        s.sync(),
			"adminRecord": s.adminRecord(recQueueDelete, make([]byte, 8)),
		} {
			if !errors.Is(err, ErrClosed) {
				t.Errorf("durable=%v: %s on a closed backend: %v, want ErrClosed", durable, name, err)
			}
		}
		if durable {
			if _, _, _, err := s.read(recs[0].pos, recs[0].size, nil); !errors.Is(err, ErrClosed) {
				t.Errorf("read on a closed backend: %v, want ErrClosed", err)
			}
			if err := s.waitDurable(recs[0].pos); err != nil && !errors.Is(err, ErrClosed) {
				t.Errorf("waitDurable on a closed backend: %v", err)
			}
		}
	}
}

// TestRestartAfterKillWithLongTail: a start-up after a kill -9 that
// replays a tail long enough for its fold to be freed at once
// (foldFreeEntries). Recovery read the fold's abort count after dropping
// it, and the start-up panicked (seen with 70,000 messages, in
// BenchmarkRestart's kill -9 case, where 1,000,000 1 KiB sends leave about
// 110 MB past the checkpoint).
func TestRestartAfterKillWithLongTail(t *testing.T) {
	dir := t.TempDir()
	clk := NewFakeClock(t0)
	noCheckpoint := func(o *Options) {
		o.WAL.Sync = SyncNone
		o.WAL.SegmentBytes = 16 << 20
		o.CheckpointRecords, o.MaxReplayRecords = 1<<40, 1<<40
		o.CheckpointBytes, o.MaxReplayBytes = 1<<40, 1<<40
		o.CheckpointInterval = 24 * time.Hour
	}
	b := openDurableTest(t, dir, clk, noCheckpoint)
	q := mustQueue(t, b, "long", DefaultQueueConfig())
	const n = foldFreeEntries + 4000
	entries := make([]SendEntry, MaxBatch)
	for i := range entries {
		entries[i] = SendEntry{Body: []byte("m")}
	}
	var out []SendResult
	for sent := 0; sent < n; sent += MaxBatch {
		var err error
		if out, err = q.Send(entries[:min(MaxBatch, n-sent)], out[:0]); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	crashBroker(b)

	b = openDurableTest(t, dir, clk, noCheckpoint)
	defer b.Close()
	if r := b.Recovery(); r.Replayed <= foldFreeEntries || r.Messages != n {
		t.Fatalf("recovery %+v: want more than %d records replayed and %d messages", r, foldFreeEntries, n)
	}
	q, err := b.Queue("long")
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := q.Attributes(); a.Active != n {
		t.Fatalf("%d active after the restart, want %d", a.Active, n)
	}
}
