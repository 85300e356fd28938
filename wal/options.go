package wal

import (
	"fmt"
	"log/slog"
	"time"
)

// SyncMode says when WaitDurable considers a record acknowledged.
type SyncMode uint8

const (
	// SyncAlways: WaitDurable returns after the record is fdatasync'ed (default).
	SyncAlways SyncMode = iota
	// SyncInterval: WaitDurable returns after the record is written to its
	// file; the writer fsyncs at most every Options.SyncInterval.
	SyncInterval
	// SyncNone: WaitDurable returns after the write; fsync happens only on a
	// segment roll, on Sync and on Close.
	SyncNone
)

// String returns "always", "interval" or "none".
func (m SyncMode) String() string {
	switch m {
	case SyncAlways:
		return "always"
	case SyncInterval:
		return "interval"
	case SyncNone:
		return "none"
	}
	return fmt.Sprintf("SyncMode(%d)", uint8(m))
}

// ParseSyncMode parses the String form of a SyncMode.
func ParseSyncMode(s string) (SyncMode, error) {
	switch s {
	case "always":
		return SyncAlways, nil
	case "interval":
		return SyncInterval, nil
	case "none":
		return SyncNone, nil
	}
	return 0, fmt.Errorf("%w: unknown sync mode %q (want always, interval or none)", ErrBadOptions, s)
}

// Limits and defaults. The limits are part of the on-disk contract (a reader
// rejects a length over MaxPayload as corrupt); never lower them.
const (
	// MaxPayload is the largest stored payload of a record.
	MaxPayload = 16 << 20
	// MinSegmentBytes is the smallest allowed Options.SegmentBytes.
	MinSegmentBytes = 64 << 10

	defaultSegmentBytes     = 64 << 20
	defaultSyncInterval     = time.Second
	defaultBufferBytes      = 32 << 20
	defaultCompressMinBytes = 4096
	minBufferBytes          = 64 << 10
)

// Options configures a Log. The zero value gives the defaults below.
type Options struct {
	// FS is where the files live; nil means the OS file system (OSFS).
	FS FS
	// SegmentBytes is the preallocated size of each segment file. Default
	// 64 MiB; minimum 64 KiB; must be a multiple of 4 KiB.
	SegmentBytes int64
	// Sync says when WaitDurable returns. Default SyncAlways.
	Sync SyncMode
	// SyncInterval bounds how often SyncInterval mode fsyncs. Default 1s.
	SyncInterval time.Duration
	// BufferBytes is the size of the in-memory ring of the most recent log
	// bytes: it holds appended-but-unwritten records (Append blocks when it
	// is full) and serves recent reads without a syscall. Default 32 MiB,
	// minimum 64 KiB.
	BufferBytes int
	// CompressMinBytes is the smallest payload Append tries to compress with
	// s2. 0 means the default 4096; negative disables compression.
	CompressMinBytes int
	// RecycleSegments is how many removed segment files are kept, renamed,
	// to become future segments instead of being unlinked. A recycled file
	// is already written on disk, so an fdatasync after writing into it
	// need not convert unwritten extents (on ext4 that halves its latency);
	// its old bytes are never mistaken for records (checksums are seeded
	// with the position) and the writer ends every write into it with a
	// zero header. 0 means the default 2; negative disables recycling.
	RecycleSegments int
	// Repair makes Open verify every segment (not only the last) and cover
	// each damaged byte range with skip records instead of failing: only
	// the damaged records are lost, every valid record after them keeps
	// its position, and each range is reported in RecoveryInfo.Repairs
	// (repair.go). A short older segment file is extended with zeros and
	// its missing bytes repaired the same way. Without it, mid-log damage
	// in the last segment fails Open with a *CorruptionError, and damage
	// in older segments (not scanned) surfaces as *CorruptionError on read.
	// A torn tail is cut either way.
	Repair bool
	// DeferWrites (SyncAlways only; ignored otherwise): Append does not
	// wake the writer. What it appended is written with the next write
	// someone waits for (Sync, WaitDurable, WaitWritten, an Append that
	// needs room), or once a quarter of the ring is unwritten. For a log
	// whose appends are each followed soon by a wait: a cluster replica's,
	// where a leader's records go to the log before the entry header that
	// its append worker writes and syncs, and both then take one write
	// instead of two. Records nobody ever waits for stay in memory until
	// then (they are not durable before it anyway).
	DeferWrites bool
	// Logger receives lifecycle and recovery messages; nil discards them.
	Logger *slog.Logger

	// after is the timer of the spare goroutine's retry backoff; nil means
	// time.After. Tests only.
	after func(time.Duration) <-chan time.Time
}

// DefaultOptions returns a fresh Options with every default filled in.
func DefaultOptions() Options {
	return Options{}.withDefaults()
}

// withDefaults returns a copy of o with unset fields filled.
func (o Options) withDefaults() Options {
	if o.FS == nil {
		o.FS = OSFS()
	}
	if o.SegmentBytes == 0 {
		o.SegmentBytes = defaultSegmentBytes
	}
	if o.SyncInterval == 0 {
		o.SyncInterval = defaultSyncInterval
	}
	if o.BufferBytes == 0 {
		o.BufferBytes = defaultBufferBytes
	}
	if o.CompressMinBytes == 0 {
		o.CompressMinBytes = defaultCompressMinBytes
	}
	if o.RecycleSegments == 0 {
		o.RecycleSegments = 2
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.after == nil {
		o.after = time.After
	}
	return o
}

// ReserveBytes is the free space (FS.FreeBytes) the log needs so that, once
// the engine's free-space guard refuses new sends, the small records of
// receives, deletes and visibility changes keep being written for at least
// one more full segment. Only segment files allocate space, and only when a
// spare is prepared: the active segment and a ready spare are already
// allocated (preallocated), and the ring is memory. The next roll takes the
// ready spare and the spare goroutine at once prepares another
// (SegmentBytes); the roll after that needs one more (SegmentBytes); and
// the unwritten bytes the ring may hold (up to BufferBytes) can need a
// further spare per whole segment they span. So:
//
//	SegmentBytes × (2 + BufferBytes / SegmentBytes)
//
// (integer division): 128 MiB with the defaults. Recycled segment files
// (RecycleSegments) reduce the need but are not counted. The engine adds its
// own needs (relocations by compaction) and the index's reserve.
func (o Options) ReserveBytes() int64 {
	o = o.withDefaults()
	return o.SegmentBytes * (2 + int64(o.BufferBytes)/o.SegmentBytes)
}

// Validate reports the first bad field of o (after defaults are applied).
func (o Options) Validate() error {
	o = o.withDefaults()
	switch {
	case o.SegmentBytes < MinSegmentBytes:
		return fmt.Errorf("%w: SegmentBytes %d below minimum %d", ErrBadOptions, o.SegmentBytes, MinSegmentBytes)
	case o.SegmentBytes%4096 != 0:
		return fmt.Errorf("%w: SegmentBytes %d not a multiple of 4096", ErrBadOptions, o.SegmentBytes)
	case o.Sync > SyncNone:
		return fmt.Errorf("%w: unknown Sync mode %d", ErrBadOptions, o.Sync)
	case o.SyncInterval < 0:
		return fmt.Errorf("%w: negative SyncInterval %v", ErrBadOptions, o.SyncInterval)
	case o.BufferBytes < minBufferBytes:
		return fmt.Errorf("%w: BufferBytes %d below minimum %d", ErrBadOptions, o.BufferBytes, minBufferBytes)
	}
	return nil
}
