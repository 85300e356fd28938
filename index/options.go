package index

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// Defaults, chosen and measured as described in doc.go ("Tuning").
const (
	// DefaultMemTableBytes is the default Options.MemTableBytes.
	DefaultMemTableBytes = 8 << 20
	// DefaultNumMemtables is the default Options.NumMemtables.
	DefaultNumMemtables = 2
	// DefaultBlockCacheBytes is the default Options.BlockCacheBytes: none.
	// Tables are uncompressed, so blocks are read in place from the
	// memory-mapped files and a cache would only hold their parsed headers.
	DefaultBlockCacheBytes = 0
	// DefaultNumCompactors is the default Options.NumCompactors.
	DefaultNumCompactors = 2
	// DefaultScanReleaseBytes is the default Options.ScanReleaseBytes.
	DefaultScanReleaseBytes = 32 << 20
	// DefaultCommitReleaseInterval is the default Options.CommitReleaseInterval.
	DefaultCommitReleaseInterval = time.Second

	// minMemTableBytes keeps Badger's derived limits (15% of a memtable per
	// write transaction) above the value-size limit by a wide margin.
	minMemTableBytes = 1 << 20
	// maxInlineValueBytes is Badger's largest ValueThreshold (1 MiB): values
	// below it stay in the LSM tree, never in the value log.
	maxInlineValueBytes = 1 << 20
)

// Options configures a Store. The zero value is valid: every unset field gets
// its default in code (DefaultOptions shows them).
type Options struct {
	// Logger receives the store's lifecycle and error messages and, at
	// Warn and above, Badger's (Badger's Info becomes Debug). Nil discards.
	Logger *slog.Logger

	// MemTableBytes is the size of one Badger memtable (skiplist arena and
	// memtable WAL, which is preallocated to twice this). It also bounds one
	// write transaction to 15% of it. Default DefaultMemTableBytes.
	MemTableBytes int64

	// NumMemtables is how many memtables (one active, the rest waiting to be
	// flushed) may exist at once; more absorbs write bursts, each costs up to
	// MemTableBytes of heap. Minimum 2. Default DefaultNumMemtables.
	NumMemtables int

	// BlockCacheBytes is the size of Badger's block cache. Tables are not
	// compressed, so blocks are read in place from the mmapped table files
	// and the cache only saves re-parsing block headers on repeated point
	// reads. Default DefaultBlockCacheBytes (none).
	BlockCacheBytes int64

	// NumCompactors is the number of Badger compaction goroutines, at least
	// 2 (Badger refuses 1). Default DefaultNumCompactors.
	NumCompactors int

	// ScanReleaseBytes: while Queues or Messages scans, each time about this
	// many bytes of tables have been read, and once at the end, the store
	// asks the kernel to reclaim its resident pages of the memory-mapped
	// tables (Linux MADV_DONTNEED; see release.go). The pages stay in the
	// page cache. This keeps the start-up scan of a large index from leaving
	// the process's RSS at the size of the index. Default
	// DefaultScanReleaseBytes; negative disables.
	ScanReleaseBytes int64

	// CommitReleaseInterval: a Commit that finds at least this much time
	// passed since the last release drops the resident pages of the mapped
	// tables too. Badger's compactions read and write every table through
	// the mappings, so without this the process's RSS grows towards the size
	// of the index under a steady write load. Default
	// DefaultCommitReleaseInterval; negative disables.
	CommitReleaseInterval time.Duration

	// tweak, if set, edits the Badger options last. Tests only.
	tweak func(*badger.Options)
}

// DefaultOptions returns a fresh Options value with every default filled in.
func DefaultOptions() Options {
	return Options{}.withDefaults()
}

// withDefaults returns o with unset fields replaced by their defaults.
func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = discardLogger()
	}
	if o.MemTableBytes == 0 {
		o.MemTableBytes = DefaultMemTableBytes
	}
	if o.NumMemtables == 0 {
		o.NumMemtables = DefaultNumMemtables
	}
	if o.NumCompactors == 0 {
		o.NumCompactors = DefaultNumCompactors
	}
	if o.ScanReleaseBytes == 0 {
		o.ScanReleaseBytes = DefaultScanReleaseBytes
	}
	if o.CommitReleaseInterval == 0 {
		o.CommitReleaseInterval = DefaultCommitReleaseInterval
	}
	if o.BlockCacheBytes == 0 {
		o.BlockCacheBytes = DefaultBlockCacheBytes
	}
	return o
}

// Validate reports options that cannot work, wrapping ErrInvalidOptions. It
// checks the options as given, after defaults are applied.
func (o Options) Validate() error {
	o = o.withDefaults()
	switch {
	case o.MemTableBytes < minMemTableBytes:
		return fmt.Errorf("%w: MemTableBytes %d below %d", ErrInvalidOptions, o.MemTableBytes, minMemTableBytes)
	case o.MemTableBytes > 1<<30:
		return fmt.Errorf("%w: MemTableBytes %d above 1 GiB", ErrInvalidOptions, o.MemTableBytes)
	case o.NumMemtables < 2:
		return fmt.Errorf("%w: NumMemtables %d below 2", ErrInvalidOptions, o.NumMemtables)
	case o.NumCompactors < 0 || o.NumCompactors == 1:
		return fmt.Errorf("%w: NumCompactors must be 0 or at least 2, got %d", ErrInvalidOptions, o.NumCompactors)
	case o.BlockCacheBytes < 0:
		return fmt.Errorf("%w: BlockCacheBytes %d is negative", ErrInvalidOptions, o.BlockCacheBytes)
	}
	return nil
}

// maxValueBytes is the largest value a batch may hold: below Badger's
// ValueThreshold (so values stay inline, invariant 5) and well below the
// per-transaction limit (15% of a memtable).
func (o Options) maxValueBytes() int {
	limit := int64(maxInlineValueBytes)
	if txn := o.MemTableBytes * 15 / 100 / 2; txn < limit {
		limit = txn
	}
	return int(limit) - 1
}

// badgerOptions translates o (with defaults applied) into Badger's options
// for directory dir. doc.go ("Tuning") explains each choice.
func (o Options) badgerOptions(dir string) badger.Options {
	bo := badger.DefaultOptions(dir)
	// "library": the caller's logger carries its "component" already.
	bo.Logger = badgerLogger{l: o.Logger.With("library", "badger")}
	bo.MetricsEnabled = false // Badger's metrics are process-global expvars

	// Durability: every write request is msynced before Badger acknowledges
	// it (invariant 3).
	bo.SyncWrites = true
	bo.NumVersionsToKeep = 1
	bo.DetectConflicts = false // we only do blind writes

	// Everything inline in the LSM tree: values are smaller than the
	// threshold by construction (Commit enforces maxValueBytes), so the value
	// log is never written and can be tiny.
	bo.ValueThreshold = int64(o.maxValueBytes()) + 1
	bo.ValueLogFileSize = 1 << 20
	bo.ValueLogMaxEntries = 10000

	// Memory: small memtables, few of them, small or no caches.
	bo.MemTableSize = o.MemTableBytes
	bo.NumMemtables = o.NumMemtables
	// Up to 8 level-0 tables (one per flushed memtable) before they are
	// merged down: fewer, larger L0 compactions measured faster under a
	// steady checkpoint load than Badger's 5; writes stall at 24.
	bo.NumLevelZeroTables = 8
	bo.NumLevelZeroTablesStall = 24
	// Badger's default 2 MiB tables: every in-flight table builder holds its
	// whole table in memory, so small tables keep compaction's heap small.
	bo.BaseTableSize = 2 << 20
	bo.BaseLevelSize = 16 << 20
	bo.NumCompactors = o.NumCompactors
	// Close merges level 0 into the tree: deleted keys then leave the disk
	// and the next start-up scan merges fewer tables.
	bo.CompactL0OnClose = true
	bo.IndexCacheSize = 0 // table indexes stay in their (mmapped) files
	bo.BlockCacheSize = o.BlockCacheBytes
	// No compression: measured faster to scan and smaller in RSS than
	// Snappy or zstd for our ~60-byte values (doc.go, "Tuning").
	bo.Compression = options.None

	// Integrity: Open verifies every table itself before Badger sees it
	// (checkDir, invariant 6). Badger's own verification is off: at table
	// open it would read every table a second time through the mmap, and on
	// block reads a failure inside an iterator only ends the iteration early.
	bo.ChecksumVerificationMode = options.NoVerification
	if o.tweak != nil {
		o.tweak(&bo)
	}
	return bo
}
