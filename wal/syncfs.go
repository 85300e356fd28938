package wal

// syncfs.go: an FS whose files share one flush of the whole file system
// (syncfs(2) on linux) instead of each flushing itself (fdatasync). A
// cluster node runs one log per shard on one disk; with every operation
// fsynced on its own shard's log, a node made about as many flushes as
// operations, each a device flush (docs/cluster-benchmarks.md, "One
// flush per node"). Through a SharedSyncFS the logs' flushes that ask at
// the same time are one.
//
// Invariants:
//  1. A file's Sync returns nil only after a flush of the file system that
//     began after the Sync was called (so after every write the caller
//     made before it) has completed without error.
//  2. At most one flush runs at a time; a Sync that arrives while one runs
//     waits for the next, which serves every Sync waiting then.
//  3. A failed flush fails the Sync of every file handle written since its
//     last good Sync before that flush began, even when a later flush
//     succeeds, and then every later Sync of that handle (a handle with
//     nothing unsynced only sees the failure of the flush it waited for). After a failed
//     write-back the kernel may have dropped any dirty page of the file
//     system, so a later flush proves nothing about those writes (the
//     "fsyncgate" lesson; log.go makes its first failure sticky too). A
//     handle opened later (the log's resync reopens its segments and
//     writes them again) starts clean, as a file's own fdatasync would.
//
// Owner: mu guards the generation counters, the running flag and the last
// flush's result; the Sync that finds no flush running runs it
// (leader-follower, no goroutine of its own) and holds no lock across the
// system call. Each handle's state has its own lock.

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
)

// SharedSyncFS is an FS (the OS's, by NewSharedSyncFS) with the Sync of
// every file it opens replaced by one shared flush of the whole file
// system. Everything else (reads, writes, directory syncs) is the inner
// FS's.
//
// The flush covers every file of that file system, the ones of other
// programs included: use it only where the directory has a file system
// of its own or the other writers are few (a dedicated data disk).
type SharedSyncFS struct {
	FS
	flush func() error // one flush of the whole file system
	close func() error

	fails   atomic.Uint64         // flushes that failed so far (written under mu)
	failErr atomic.Pointer[error] // the last failure

	mu        sync.Mutex
	cond      *sync.Cond
	started   uint64 // generation of the last flush begun
	done      uint64 // generation of the last flush finished
	running   bool
	lastErr   error  // the result of flush done
	lastFails uint64 // fails when flush done began
	flushes   uint64
	waiting   int // Syncs waiting for a flush another runs (tests)
}

// NewSharedSync returns inner with its files' Syncs replaced by flush,
// shared as SharedSyncFS says. flush must make durable every write made
// to any file of inner before it began (MemFS.SyncAll does, for tests).
func NewSharedSync(inner FS, flush func() error) *SharedSyncFS {
	s := &SharedSyncFS{FS: inner, flush: flush, close: func() error { return nil }}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// Flushes returns the number of file-system flushes made so far.
func (s *SharedSyncFS) Flushes() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flushes
}

// Close releases the directory the flushes go through. Files opened
// through s must be closed first.
func (s *SharedSyncFS) Close() error { return s.close() }

// OpenFile opens name on the inner FS; its Sync is the shared flush.
func (s *SharedSyncFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := s.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	sf := sharedSyncFile{File: f, fs: s, st: &handleState{}}
	if v, ok := f.(vecWriterAt); ok {
		return sharedSyncVecFile{sf, v}, nil
	}
	return sf, nil
}

// sync waits for a flush that begins after the call (invariants 1, 2) and
// returns that flush's result and how many flushes had failed when it
// began.
func (s *SharedSyncFS) sync() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	need := s.started + 1
	for s.done < need {
		if s.running {
			s.waiting++
			s.cond.Wait()
			s.waiting--
			continue
		}
		s.running = true
		s.started++
		gen, before := s.started, s.fails.Load()
		s.mu.Unlock()
		err := s.flush()
		s.mu.Lock()
		if err != nil {
			s.failErr.Store(&err)
			s.fails.Add(1)
		}
		s.running = false
		s.done, s.lastErr, s.lastFails = gen, err, before
		s.flushes++
		s.cond.Broadcast()
	}
	// Flush done began after the call: it serves this Sync whether it is
	// need or a later one.
	return s.lastFails, s.lastErr
}

// handleState is what a handle wrote since its last good Sync
// (invariant 3).
//
// A handle's failure is sticky without a flag of its own: a failed Sync
// leaves it dirty with its base, below the failure count from then on.
type handleState struct {
	mu     sync.Mutex
	dirty  bool
	base   uint64 // s.fails when it became dirty
	writes uint64 // writes so far
}

// touch marks the handle dirty; it runs before each write, so a flush
// failing during the write counts as after it.
func (h *handleState) touch(s *SharedSyncFS) {
	h.mu.Lock()
	if !h.dirty {
		h.dirty, h.base = true, s.fails.Load()
	}
	h.writes++
	h.mu.Unlock()
}

// sharedSyncFile is a file whose Sync is its FS's shared flush.
type sharedSyncFile struct {
	File
	fs *SharedSyncFS
	st *handleState
}

func (f sharedSyncFile) WriteAt(p []byte, off int64) (int, error) {
	f.st.touch(f.fs)
	return f.File.WriteAt(p, off)
}

func (f sharedSyncFile) Truncate(size int64) error {
	f.st.touch(f.fs)
	return f.File.Truncate(size)
}

func (f sharedSyncFile) Preallocate(size int64) error {
	f.st.touch(f.fs)
	return f.File.Preallocate(size)
}

func (f sharedSyncFile) Sync() error {
	h := f.st
	h.mu.Lock()
	dirty, base, writes := h.dirty, h.base, h.writes
	h.mu.Unlock()
	failsBefore, err := f.fs.sync()
	if err == nil && dirty && failsBefore > base {
		// A flush failed after this handle's first unsynced write and
		// before the flush that served this Sync began.
		err = fmt.Errorf("%w: %w", errFlushFailedEarlier, *f.fs.failErr.Load())
	}
	if err != nil {
		return err
	}
	h.mu.Lock()
	if h.writes == writes { // nothing written while the flush ran
		h.dirty = false
	}
	h.mu.Unlock()
	return nil
}

// errFlushFailedEarlier: a shared flush failed while the handle held
// unsynced writes.
var errFlushFailedEarlier = errors.New("wal: a shared flush of the file system failed while this file held unsynced writes, which may be lost (reopen and write them again)")

// sharedSyncVecFile keeps the inner file's vectored write (writeVecAt).
type sharedSyncVecFile struct {
	sharedSyncFile
	vec vecWriterAt
}

func (f sharedSyncVecFile) WriteVecAt(bufs [][]byte, off int64) (int, error) {
	f.st.touch(f.fs)
	return f.vec.WriteVecAt(bufs, off)
}
