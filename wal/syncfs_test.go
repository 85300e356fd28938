package wal

import (
	"errors"
	"os"
	"path/filepath"
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
	go func() { a <- s.sync() }()
	if n := recv(t, "flush 1 to begin", g.started); n != 1 {
		t.Fatalf("first flush is number %d", n)
	}
	b := make(chan error, 1)
	go func() { b <- s.sync() }()
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
	go func() { first <- s.sync() }()
	recv(t, "flush 1 to begin", g.started)
	errs := make(chan error, waiters)
	for range waiters {
		go func() { errs <- s.sync() }()
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

// A failed flush fails every Sync after it, with no flush tried again
// (invariant 3).
func TestSharedSyncFailureIsSticky(t *testing.T) {
	s, g := newGatedSyncFS()
	boom := errors.New("EIO")
	done := make(chan error, 1)
	go func() { done <- s.sync() }()
	recv(t, "the flush to begin", g.started)
	g.release <- boom
	if err := recv(t, "the failed Sync", done); !errors.Is(err, boom) {
		t.Fatalf("Sync = %v, want %v", err, boom)
	}
	s.flush = func() error { return nil } // a flush now would succeed
	for range 3 {
		if err := s.sync(); !errors.Is(err, boom) {
			t.Fatalf("a later Sync = %v, want the first failure", err)
		}
	}
	if f := s.Flushes(); f != 1 {
		t.Fatalf("%d flushes after a failure, want 1", f)
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
