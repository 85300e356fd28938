package wal

// faultfs.go is an FS wrapper for tests that injects errors into writes,
// syncs and preallocations, the way pebble's errorfs and nats-server's
// mockWriteErr do. FaultFS.mu guards every field; counting and deciding
// happen under it, the wrapped I/O outside it.

import (
	"os"
	"sync"
	"time"
)

// FaultFS wraps an FS and injects errors. It is a test tool. Faults apply to
// files whose name passes Filter (nil: every file); a file's name is the one
// it was opened under. Writes are File.WriteAt calls, syncs are File.Sync
// calls; both are counted from the last arming call.
type FaultFS struct {
	inner FS

	// Filter selects the files faults apply to; set it before use.
	Filter func(name string) bool

	mu          sync.Mutex
	writes      int64 // WriteAt calls on matching files since the last arming
	syncs       int64 // Sync calls on matching files since the last arming
	nthWrite    int64 // fail the nthWrite-th write (0: off)
	nthSync     int64 // fail the nthSync-th sync (0: off)
	nthWriteErr error
	nthSyncErr  error
	allWrites   error // non-nil: every write fails with it
	allSyncs    error // non-nil: every sync fails with it
	preallocErr error // non-nil: every Preallocate fails with it
	injected    int64 // faults injected so far
}

// NewFaultFS wraps inner; no fault is armed.
func NewFaultFS(inner FS) *FaultFS { return &FaultFS{inner: inner} }

// FailNthWrite makes the n-th write from now (n >= 1) fail with err; the
// writes before and after it succeed.
func (f *FaultFS) FailNthWrite(n int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes, f.nthWrite, f.nthWriteErr = 0, int64(n), err
}

// FailNthSync makes the n-th sync from now (n >= 1) fail with err.
func (f *FaultFS) FailNthSync(n int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.syncs, f.nthSync, f.nthSyncErr = 0, int64(n), err
}

// FailWrites makes every write from now fail with err until Disarm.
func (f *FaultFS) FailWrites(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.allWrites = err
}

// FailSyncs makes every sync from now fail with err until Disarm.
func (f *FaultFS) FailSyncs(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.allSyncs = err
}

// FailPreallocate makes every Preallocate fail with err until Disarm.
func (f *FaultFS) FailPreallocate(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.preallocErr = err
}

// Disarm removes every armed fault.
func (f *FaultFS) Disarm() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nthWrite, f.nthSync = 0, 0
	f.nthWriteErr, f.nthSyncErr, f.allWrites, f.allSyncs, f.preallocErr = nil, nil, nil, nil, nil
}

// Injected returns how many faults were injected so far.
func (f *FaultFS) Injected() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.injected
}

// match applies Filter.
func (f *FaultFS) match(name string) bool { return f.Filter == nil || f.Filter(name) }

// writeFault counts a write and returns the error to inject, if any.
func (f *FaultFS) writeFault() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes++
	err := f.allWrites
	if f.nthWrite != 0 && f.writes == f.nthWrite {
		err = f.nthWriteErr
	}
	if err != nil {
		f.injected++
	}
	return err
}

// syncFault counts a sync and returns the error to inject, if any.
func (f *FaultFS) syncFault() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.syncs++
	err := f.allSyncs
	if f.nthSync != 0 && f.syncs == f.nthSync {
		err = f.nthSyncErr
	}
	if err != nil {
		f.injected++
	}
	return err
}

// preallocFault returns the armed preallocation error, if any.
func (f *FaultFS) preallocFault() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.preallocErr != nil {
		f.injected++
	}
	return f.preallocErr
}

// OpenFile implements FS.
func (f *FaultFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	file, err := f.inner.OpenFile(name, flag, perm)
	if err != nil || !f.match(name) {
		return file, err
	}
	return &faultFile{File: file, fs: f, name: name}, nil
}

// Remove implements FS.
func (f *FaultFS) Remove(name string) error { return f.inner.Remove(name) }

// Rename implements FS.
func (f *FaultFS) Rename(oldname, newname string) error { return f.inner.Rename(oldname, newname) }

// ReadDir implements FS.
func (f *FaultFS) ReadDir(dir string) ([]string, error) { return f.inner.ReadDir(dir) }

// MkdirAll implements FS.
func (f *FaultFS) MkdirAll(dir string, perm os.FileMode) error { return f.inner.MkdirAll(dir, perm) }

// SyncDir implements FS.
func (f *FaultFS) SyncDir(dir string) error { return f.inner.SyncDir(dir) }

// FreeBytes implements FS (no fault: it reports the inner FS's space).
func (f *FaultFS) FreeBytes(dir string) (int64, error) { return f.inner.FreeBytes(dir) }

// faultFile injects the armed faults of its FaultFS.
type faultFile struct {
	File
	fs   *FaultFS
	name string
}

// WriteAt fails without writing anything when a write fault is due.
func (ff *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if err := ff.fs.writeFault(); err != nil {
		return 0, &os.PathError{Op: "write", Path: ff.name, Err: err}
	}
	return ff.File.WriteAt(p, off)
}

// Sync fails without syncing when a sync fault is due.
func (ff *faultFile) Sync() error {
	if err := ff.fs.syncFault(); err != nil {
		return &os.PathError{Op: "fdatasync", Path: ff.name, Err: err}
	}
	return ff.File.Sync()
}

// Preallocate fails when FailPreallocate is armed.
func (ff *faultFile) Preallocate(size int64) error {
	if err := ff.fs.preallocFault(); err != nil {
		return &os.PathError{Op: "fallocate", Path: ff.name, Err: err}
	}
	return ff.File.Preallocate(size)
}

// NewSlowWriteFS returns fs with a sleep of delay before every write to a
// file opened through it (a slow disk: a log's writes then trail its
// appends, and records wait in its ring). A test tool: its files write no
// vectors, so each buffer of a vectored write sleeps.
func NewSlowWriteFS(fs FS, delay time.Duration) FS { return slowWriteFS{fs, delay} }

type slowWriteFS struct {
	FS
	delay time.Duration
}

func (s slowWriteFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := s.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return slowWriteFile{f, s.delay}, nil
}

type slowWriteFile struct {
	File
	delay time.Duration
}

func (f slowWriteFile) WriteAt(p []byte, off int64) (int, error) {
	time.Sleep(f.delay)
	return f.File.WriteAt(p, off)
}
