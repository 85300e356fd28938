package wal

// syncfs.go: an OS FS whose files share one flush of the whole file
// system (syncfs(2) on linux) instead of each flushing itself
// (fdatasync). A cluster node runs one log per shard on one disk; with
// every operation fsynced on its own shard's log, a node made about as
// many flushes as operations, each a device flush (docs/cluster-benchmarks.md,
// "Shard count, system calls and context switches per message"). Through
// a SharedSyncFS the logs' flushes that ask at the same time are one.
//
// Invariants:
//  1. A Sync returns nil only after a flush of the file system that began
//     after the Sync was called (so after every write the caller made
//     before it) has completed without error.
//  2. At most one flush runs at a time; a Sync that arrives while one runs
//     waits for the next, which serves every Sync waiting then.
//  3. A failed flush is sticky: every Sync after it returns its error.
//     After a failed flush the kernel may have dropped dirty pages of any
//     file of the file system, so no later flush proves those durable (the
//     log makes the first failure sticky too, invariant 8 of log.go).
//
// Owner: mu guards the generation counters, the running flag and the
// error; the Sync that finds no flush running runs it (leader-follower,
// no goroutine of its own) and holds no lock across the system call.

import (
	"os"
	"sync"
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

	mu      sync.Mutex
	cond    *sync.Cond
	started uint64 // generation of the last flush begun
	done    uint64 // generation of the last flush finished
	running bool
	err     error
	flushes uint64
	waiting int // Syncs waiting for a flush another runs (tests)
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
	if v, ok := f.(vecWriterAt); ok {
		return sharedSyncVecFile{sharedSyncFile{f, s}, v}, nil
	}
	return sharedSyncFile{f, s}, nil
}

// sync waits for a flush that begins after the call (invariants 1, 2).
func (s *SharedSyncFS) sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	need := s.started + 1
	for s.done < need && s.err == nil {
		if s.running {
			s.waiting++
			s.cond.Wait()
			s.waiting--
			continue
		}
		s.running = true
		s.started++
		gen := s.started
		s.mu.Unlock()
		err := s.flush()
		s.mu.Lock()
		s.running = false
		s.done = gen
		s.flushes++
		if err != nil && s.err == nil {
			s.err = err
		}
		s.cond.Broadcast()
	}
	return s.err
}

// sharedSyncFile is a file whose Sync is its FS's shared flush.
type sharedSyncFile struct {
	File
	fs *SharedSyncFS
}

func (f sharedSyncFile) Sync() error { return f.fs.sync() }

// sharedSyncVecFile keeps the inner file's vectored write (writeVecAt).
type sharedSyncVecFile struct {
	sharedSyncFile
	vec vecWriterAt
}

func (f sharedSyncVecFile) WriteVecAt(bufs [][]byte, off int64) (int, error) {
	return f.vec.WriteVecAt(bufs, off)
}
