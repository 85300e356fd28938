package wal

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// segFilesOnly limits faults to segment files (not spares, not hole markers).
func segFilesOnly(name string) bool { return strings.HasSuffix(name, segSuffix) }

// TestFaultSticky (invariant 8) injects ENOSPC and EIO on a write and on an fsync: the
// failing wait and every later call fail with errors wrapping the cause and
// ErrFailed, reads of written data keep working, and after reopening with
// the fault removed nothing acknowledged is lost.
func TestFaultSticky(t *testing.T) {
	for _, cause := range []syscall.Errno{syscall.ENOSPC, syscall.EIO} {
		for _, where := range []string{"write", "fsync"} {
			for _, mode := range []SyncMode{SyncAlways, SyncInterval, SyncNone} {
				t.Run(cause.Error()+"/"+where+"/"+mode.String(), func(t *testing.T) {
					faultRun(t, cause, where, mode)
				})
			}
		}
	}
}

func isFailure(err, cause error) bool {
	return errors.Is(err, cause) && errors.Is(err, ErrFailed)
}

func faultRun(t *testing.T, cause error, where string, mode SyncMode) {
	mem := NewMemFS()
	ffs := NewFaultFS(mem)
	ffs.Filter = segFilesOnly
	opts := testOptions(t, ffs)
	opts.Sync = mode
	l := mustOpen(t, crashDir, opts)
	var acked []Record
	var bodies [][]byte
	for i := range 30 {
		b := testPayload(uint64(i), 100+i*50, false)
		acked = append(acked, appendWait(t, l, 1, b))
		bodies = append(bodies, b)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if where == "write" {
		ffs.FailNthWrite(1, cause)
	} else {
		ffs.FailNthSync(1, cause)
	}

	recs := []Record{{Type: 2, Body: []byte("doomed")}}
	if err := l.Append(recs); err != nil {
		t.Fatalf("Append before the failure is noticed: %v", err)
	}
	err := l.WaitDurable(recs[0].Pos)
	switch {
	case where == "fsync" && mode != SyncAlways:
		// The write succeeded, so the record is acknowledged; the fsync
		// fault surfaces at the next fsync.
		if err != nil {
			t.Fatalf("WaitDurable: %v", err)
		}
		if err := l.Sync(); !isFailure(err, cause) {
			t.Fatalf("Sync: %v, want failure wrapping %v", err, cause)
		}
	case !isFailure(err, cause):
		t.Fatalf("WaitDurable: %v, want failure wrapping %v", err, cause)
	}
	if ffs.Injected() != 1 {
		t.Fatalf("%d faults injected, want 1", ffs.Injected())
	}
	// Sticky: later calls fail without further I/O.
	if err := l.Append([]Record{{Type: 1, Body: []byte("x")}}); !isFailure(err, cause) {
		t.Fatalf("Append after failure: %v", err)
	}
	if err := l.Sync(); !isFailure(err, cause) {
		t.Fatalf("Sync after failure: %v", err)
	}
	// Reads of written data keep working.
	for i, r := range acked {
		if _, got, err := l.ReadAt(r.Pos, 0, nil); err != nil || !bytes.Equal(got, bodies[i]) {
			t.Fatalf("ReadAt %d after failure: %v", r.Pos, err)
		}
	}
	if err := l.Close(); !isFailure(err, cause) {
		t.Fatalf("Close: %v", err)
	}

	ffs.Disarm()
	l = mustOpen(t, crashDir, opts)
	defer l.Close()
	for i, r := range acked {
		if _, got, err := l.ReadAt(r.Pos, 0, nil); err != nil || !bytes.Equal(got, bodies[i]) {
			t.Fatalf("acknowledged record %d lost after reopen: %v", r.Pos, err)
		}
	}
	appendWait(t, l, 1, []byte("after reopen"))
}

// TestFaultAllWaitersFail arms a failure of every fsync and checks that
// every concurrent waiter not yet covered gets the error.
func TestFaultAllWaitersFail(t *testing.T) {
	ffs := NewFaultFS(NewMemFS())
	ffs.Filter = segFilesOnly
	l := mustOpen(t, crashDir, testOptions(t, ffs))
	defer l.Close()
	appendWait(t, l, 1, []byte("before"))
	ffs.FailSyncs(syscall.EIO)
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for g := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			recs := []Record{{Type: 1, Body: []byte("waiter")}}
			if err := l.Append(recs); err != nil {
				errs[g] = err
				return
			}
			errs[g] = l.WaitDurable(recs[0].Pos)
		}()
	}
	wg.Wait()
	for g, err := range errs {
		if !isFailure(err, syscall.EIO) {
			t.Fatalf("waiter %d: %v", g, err)
		}
	}
}

// TestMemFSCapacity: a MemFS with a capacity fails growth past it with
// ENOSPC (changing nothing), reports the free bytes, and frees space on
// truncate and remove.
func TestMemFSCapacity(t *testing.T) {
	m := NewMemFS()
	if err := m.MkdirAll("/d", 0o700); err != nil {
		t.Fatal(err)
	}
	m.SetCapacity(10000)
	f, err := m.OpenFile("/d/a", osCreateRW, filePerm)
	if err != nil {
		t.Fatal(err)
	}
	free := func() int64 {
		n, err := m.FreeBytes("/d")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if err := f.Preallocate(6000); err != nil || free() != 4000 {
		t.Fatalf("preallocate: %v, free %d", err, free())
	}
	if _, err := f.WriteAt(make([]byte, 100), 5000); err != nil || free() != 4000 {
		t.Fatalf("write inside the allocation: %v, free %d", err, free())
	}
	if _, err := f.WriteAt(make([]byte, 5004), 5000); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write past the capacity: %v", err)
	}
	if err := f.Preallocate(20000); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("preallocate past the capacity: %v", err)
	}
	if sz, _ := f.Size(); sz != 6000 || free() != 4000 {
		t.Fatalf("a failed growth changed the file: size %d free %d", sz, free())
	}
	if err := f.Truncate(1000); err != nil || free() != 9000 {
		t.Fatalf("truncate: %v, free %d", err, free())
	}
	if err := m.Remove("/d/a"); err != nil || free() != 10000 {
		t.Fatalf("remove: %v, free %d", err, free())
	}
	m.SetCapacity(0)
	if n := free(); n < 1<<40 {
		t.Fatalf("unlimited MemFS reports %d free", n)
	}
	if (Options{}).ReserveBytes() != 2*defaultSegmentBytes {
		t.Fatalf("default reserve %d", (Options{}).ReserveBytes())
	}
}

// A kill clone keeps every write and name, synced or not; a power-loss
// clone (rnd nil) keeps only what was synced. Both are one instant across
// the file systems given.
func TestKillCloneKeepsWhatWasWritten(t *testing.T) {
	a, b := NewMemFS(), NewMemFS()
	for _, m := range []*MemFS{a, b} {
		if err := m.MkdirAll("/d", 0o700); err != nil {
			t.Fatal(err)
		}
		if err := m.SyncDir("/d"); err != nil {
			t.Fatal(err)
		}
	}
	fa, err := a.OpenFile("/d/synced", osCreateRW, filePerm)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fa.WriteAt([]byte("durable"), 0); err != nil {
		t.Fatal(err)
	}
	if err := fa.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := a.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	if _, err := fa.WriteAt([]byte(" and written"), 7); err != nil {
		t.Fatal(err)
	}
	fb, err := b.OpenFile("/d/new", osCreateRW, filePerm) // its name never synced
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fb.WriteAt([]byte("written"), 0); err != nil {
		t.Fatal(err)
	}
	read := func(m *MemFS, name string) string {
		f, err := m.OpenFile(name, os.O_RDONLY, 0)
		if err != nil {
			return "<" + err.Error() + ">"
		}
		defer f.Close()
		n, _ := f.Size()
		buf := make([]byte, n)
		if _, err := f.ReadAt(buf, 0); err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		return string(buf)
	}
	killed := KillCloneAll(a, b)
	if got := read(killed[0], "/d/synced"); got != "durable and written" {
		t.Errorf("kill clone: synced file reads %q", got)
	}
	if got := read(killed[1], "/d/new"); got != "written" {
		t.Errorf("kill clone: unsynced file reads %q", got)
	}
	lost := CrashCloneAll(nil, a, b)
	if got := read(lost[0], "/d/synced"); got != "durable" {
		t.Errorf("power-loss clone: synced file reads %q", got)
	}
	if got := read(lost[1], "/d/new"); !strings.HasPrefix(got, "<") {
		t.Errorf("power-loss clone: a file whose name was never synced reads %q", got)
	}
	// The clones are copies: a write to one changes neither the source
	// nor the other clone.
	kf, err := killed[1].OpenFile("/d/new", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kf.WriteAt([]byte("W"), 0); err != nil {
		t.Fatal(err)
	}
	if got := read(b, "/d/new"); got != "written" {
		t.Errorf("a write to the clone changed the source: %q", got)
	}
}
