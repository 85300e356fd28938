package wal

import (
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// gatedFlush is a flush the test starts and ends by hand.
type gatedFlush struct {
	started chan int   // the flush's number, when it begins
	release chan error // what it returns
	n       int
}

func newGatedSyncFS() (*SharedSyncFS, *gatedFlush) {
	g := &gatedFlush{started: make(chan int, 16), release: make(chan error)}
	s := NewSharedSync(NewMemFS(), func() error {
		g.n++
		g.started <- g.n
		return <-g.release
	})
	return s, g
}

// syncErr is one Sync's error.
func syncErr(s *SharedSyncFS) error {
	_, err := s.sync()
	return err
}

// recv takes the next value of ch, failing the test after 10 s without
// one (a bounded liveness wait: a broken Sync must fail the test, not hang
// it).
func recv[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("gave up waiting for %s", what)
		panic("unreachable")
	}
}

// A Sync called while a flush runs is not served by that flush: the
// flush may have begun before the caller's writes (invariant 1).
func TestSharedSyncWaitsForAFlushBegunAfterIt(t *testing.T) {
	s, g := newGatedSyncFS()
	a := make(chan error, 1)
	go func() { a <- syncErr(s) }()
	if n := recv(t, "flush 1 to begin", g.started); n != 1 {
		t.Fatalf("first flush is number %d", n)
	}
	b := make(chan error, 1)
	go func() { b <- syncErr(s) }()
	waitUntil(t, 10*time.Second, "the second Sync to wait", func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.waiting == 1 })
	g.release <- nil // flush 1 ends: it serves a, not b
	if err := recv(t, "the first Sync", a); err != nil {
		t.Fatal(err)
	}
	if n := recv(t, "flush 2 to begin", g.started); n != 2 {
		t.Fatalf("second flush is number %d", n)
	}
	select {
	case err := <-b:
		t.Fatalf("a Sync called during flush 1 returned (%v) before a flush begun after it ended", err)
	default:
	}
	g.release <- nil
	if err := recv(t, "the second Sync", b); err != nil {
		t.Fatal(err)
	}
	if f := s.Flushes(); f != 2 {
		t.Fatalf("%d flushes, want 2", f)
	}
}

// The Syncs that wait while a flush runs are all served by one more
// (invariant 2): that is what the shared flush is for.
func TestSharedSyncCoalesces(t *testing.T) {
	s, g := newGatedSyncFS()
	const waiters = 10
	first := make(chan error, 1)
	go func() { first <- syncErr(s) }()
	recv(t, "flush 1 to begin", g.started)
	errs := make(chan error, waiters)
	for range waiters {
		go func() { errs <- syncErr(s) }()
	}
	waitUntil(t, 10*time.Second, "every Sync to wait", func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.waiting == waiters })
	g.release <- nil
	recv(t, "flush 2 to begin", g.started) // one of the waiters runs it for all
	g.release <- nil
	for range waiters {
		if err := recv(t, "a waiting Sync", errs); err != nil {
			t.Fatal(err)
		}
	}
	if err := recv(t, "the first Sync", first); err != nil {
		t.Fatal(err)
	}
	if f := s.Flushes(); f != 2 {
		t.Fatalf("%d flushes for 1 + %d Syncs, want 2", f, waiters)
	}
}

// A failed flush fails the next Sync of every handle that held unsynced
// writes when it began, even after a good flush, and for good; a handle
// opened afterwards, or one with nothing unsynced, goes on (invariant 3).
func TestSharedSyncFailureFailsWhatItMayHaveLost(t *testing.T) {
	mem := NewMemFS()
	if err := mem.MkdirAll("/d", 0o700); err != nil {
		t.Fatal(err)
	}
	var failing atomic.Bool
	var during func() // runs inside the next flush
	boom := errors.New("EIO")
	s := NewSharedSync(mem, func() error {
		if f := during; f != nil {
			during = nil
			f()
		}
		if failing.Load() {
			return boom
		}
		return mem.SyncAll()
	})
	open := func(name string) File {
		f, err := s.OpenFile("/d/"+name, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	write := func(f File) {
		if _, err := f.WriteAt([]byte("x"), 0); err != nil {
			t.Fatal(err)
		}
	}
	failOnce := func(f File) {
		t.Helper()
		failing.Store(true)
		if err := f.Sync(); !errors.Is(err, boom) {
			t.Fatalf("Sync during a failing flush = %v, want %v", err, boom)
		}
		failing.Store(false)
	}

	// d's write was unsynced when a's flush failed: the next flush, good
	// as it is, proves nothing about it; neither does any later one.
	a, d := open("a"), open("d")
	write(a)
	write(d)
	failOnce(a)
	if err := d.Sync(); err == nil {
		t.Fatal("a handle written before a failed flush synced fine after it: its write may be lost")
	}
	if err := a.Sync(); err == nil {
		t.Fatal("the handle whose flush failed synced fine later")
	}
	if err := d.Sync(); err == nil {
		t.Fatal("a failed handle synced fine later")
	}

	// A write made while a good flush ran is not covered by it.
	e := open("e")
	write(e)
	during = func() { write(e) }
	if err := e.Sync(); err != nil {
		t.Fatal(err)
	}
	failOnce(open("other"))
	if err := e.Sync(); err == nil {
		t.Fatal("a write made during a good flush, unsynced when a later flush failed, synced fine")
	}

	// A handle with nothing unsynced sees only the failure of the flush it
	// waited for.
	clean := open("clean")
	failOnce(clean)
	if err := clean.Sync(); err != nil {
		t.Fatalf("a handle with nothing unsynced still fails after the failure passed: %v", err)
	}

	// Written after the failure, or reopened and written again (the log's
	// resync): fine.
	b := open("b")
	write(b)
	if err := b.Sync(); err != nil {
		t.Fatalf("a handle written after the failure: %v", err)
	}
	d2 := open("d")
	write(d2)
	if err := d2.Sync(); err != nil {
		t.Fatalf("a reopened handle written again: %v", err)
	}
}

// A log on the real shared flush (syncfs on linux): its Syncs flush, and
// what it wrote reads back after a reopen.
func TestSharedSyncFSLog(t *testing.T) {
	dir := t.TempDir()
	fs, err := NewSharedSyncFS(dir)
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	o := DefaultOptions()
	o.FS = fs
	o.Sync = SyncAlways
	l, err := Open(filepath.Join(dir, "wal"), o)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if err := l.Append([]Record{{Type: 1, Body: []byte{byte(i)}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if fs.Flushes() == 0 {
		t.Fatal("a synced log made no shared flush")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "wal")); err != nil {
		t.Fatal(err)
	}
	l, err = Open(filepath.Join(dir, "wal"), o)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r, err := l.NewReader(firstStart(l), l.End())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		if _, _, _, err := r.Next(); err != nil {
			break
		}
		n++
	}
	if n != 20 {
		t.Fatalf("%d records read back, want 20", n)
	}
}
