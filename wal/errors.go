package wal

import (
	"errors"
	"fmt"
	"syscall"
)

// ErrClosed is returned by every call on a Log after Close, and by a second Close.
var ErrClosed = errors.New("wal: closed")

// ErrFailed marks the sticky error after a failed write or fsync; the log must
// be reopened. The returned error also wraps the cause (e.g. syscall.ENOSPC).
var ErrFailed = errors.New("wal: log failed")

// ErrSpareFailed marks a retryable failure to prepare a new segment file
// (create, preallocate, sync): appends that need the next segment wait or
// fail with it until a file can be made; it clears by itself, no reopen.
// The error also wraps the cause, and ErrNoSpace when that is ENOSPC.
var ErrSpareFailed = errors.New("wal: cannot prepare a new segment file")

// ErrNoSpace is wrapped, besides ErrSpareFailed, when a segment file could
// not be prepared for lack of space (ENOSPC or EDQUOT). Retryable.
var ErrNoSpace = errors.New("wal: no space for a new segment file")

// ErrCorrupt is wrapped by every *CorruptionError.
var ErrCorrupt = errors.New("wal: corrupt record")

// ErrRepaired is wrapped, besides ErrCorrupt, by the *CorruptionError of a
// read at a skip record: the record there was lost to damage that
// Options.Repair skipped (or the range was skipped with SkipTo).
var ErrRepaired = errors.New("wal: record lost to repaired damage")

// ErrSegmentRemoved is returned when reading a position of a removed segment.
var ErrSegmentRemoved = errors.New("wal: segment removed")

// ErrRecordTooLarge is returned by Append for a payload over the limits
// (16 MiB, SegmentBytes-12, or larger than the in-memory ring). A batch
// larger than the ring is taken (invariant 12); only each record must fit.
var ErrRecordTooLarge = errors.New("wal: record too large")

// ErrInvalidType is returned by Append for record type 0.
var ErrInvalidType = errors.New("wal: invalid record type 0")

// ErrOutOfRange is returned for a position at or beyond the end of the log,
// or a reader range that is not inside the written log.
var ErrOutOfRange = errors.New("wal: position out of range")

// ErrActiveSegment is returned by RemoveSegment for the active segment or a
// segment that still has unwritten data.
var ErrActiveSegment = errors.New("wal: segment is active")

// ErrNoSegment is returned by RemoveSegment when no segment starts at the
// given position.
var ErrNoSegment = errors.New("wal: no such segment")

// ErrBadOptions is wrapped by Options.Validate errors.
var ErrBadOptions = errors.New("wal: bad options")

// CorruptionError reports a record that failed validation. It wraps
// ErrCorrupt, and ErrRepaired when Skipped.
type CorruptionError struct {
	Segment Pos    // start of the segment holding the bad record
	Offset  int64  // byte offset of the bad record in the segment file
	Pos     Pos    // log position of the bad record (Segment + Offset)
	Reason  string // what failed: "checksum", "bad header", "truncated", ...
	// Skipped: a read at a skip record (repair.go); the record that was
	// there is lost, and the bytes up to End hold no record.
	Skipped bool
	End     Pos // with Skipped: the end of the skip record
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("wal: corrupt record at pos %d (segment %016x offset %d): %s",
		e.Pos, uint64(e.Segment), e.Offset, e.Reason)
}

// Unwrap makes errors.Is(err, ErrCorrupt) true, and errors.Is(err,
// ErrRepaired) when Skipped.
func (e *CorruptionError) Unwrap() []error {
	if e.Skipped {
		return []error{ErrCorrupt, ErrRepaired}
	}
	return []error{ErrCorrupt}
}

// spareError is the retryable error of a failed segment-file preparation:
// it matches ErrSpareFailed, ErrNoSpace for lack of space, and the cause.
type spareError struct {
	cause error
}

func (e *spareError) Error() string {
	return fmt.Sprintf("wal: cannot prepare a new segment file (retrying; clears once the cause is gone): %v", e.cause)
}

// Unwrap returns ErrSpareFailed, ErrNoSpace if the cause is lack of space,
// and the cause.
func (e *spareError) Unwrap() []error {
	if isNoSpace(e.cause) {
		return []error{ErrSpareFailed, ErrNoSpace, e.cause}
	}
	return []error{ErrSpareFailed, e.cause}
}

// isNoSpace reports whether err means the file system is full.
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// failure is the sticky error: it matches both ErrFailed and its cause.
type failure struct {
	op    string // "write", "fsync", "roll"
	cause error
}

func (f *failure) Error() string {
	return fmt.Sprintf("wal: log failed on %s (reopen required): %v", f.op, f.cause)
}

// Unwrap returns ErrFailed and the cause, for errors.Is on either.
func (f *failure) Unwrap() []error { return []error{ErrFailed, f.cause} }
