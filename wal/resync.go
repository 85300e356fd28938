package wal

// Resync after a failure: what a reopen finds must be what the disk holds.
//
// After a failed writeback Linux may mark the pages it could not write
// clean: they stay in the page cache, so a reopen of the files (a restart
// of the process, or of the log in place) reads them and recovers their
// records, but no later fsync writes them, and a power loss then leaves a
// hole in the middle of the log, before records acknowledged after the
// reopen. Resync closes that gap before a reopen: it reads back from the
// files the bytes written since the last fsync that succeeded, writes them
// again (their pages are dirty again) and fsyncs them.
//
// A process killed after such a failure, before its Resync, leaves the same
// pages behind, and the next start cannot tell: no fsync of its own reports
// an error seen by the dead one. ResyncTail covers that start: the owner of
// the log (the engine) calls it at start-up on everything past its last
// checkpoint, which a successful fsync covered before the checkpoint was
// written. After a clean stop that range is empty or nearly so.
//
// Invariants:
//  1. Resync runs only on a failed log (invariant 8 of log.go: the writer
//     does no more I/O), and ResyncTail only before the first Append, so
//     nothing else writes the files meanwhile.
//  2. Resync covers [SyncedEnd, WrittenEnd) plus, in a recycled file, the
//     end mark after it: everything written that no successful fsync
//     covered. Before that range every byte was fsynced (invariant 4).
//     When the range is empty (a write failed, not an fsync), it rewrites
//     up to resyncProbeBytes before it instead, unchanged: a probe of
//     whether the disk takes writes again. ResyncTail covers
//     [from, End at Open) and the end mark the same way.
//  3. A nil return means the disk holds every byte a reopen will read as
//     records in the range; on an error the disk still refuses, and nothing
//     may be reopened (or appended) on top of the failed bytes.

import (
	"errors"
	"fmt"
	"os"
)

// rewriteChunk bounds the buffer of a rewrite: a tail of hundreds of MiB is
// rewritten a chunk at a time, with one fsync per segment.
const rewriteChunk = 1 << 20

// Resync makes durable, on a log whose write or fsync failed, what a
// reopen of its files would find (see above). It returns nil at once for
// a log that has not failed, and may be called again after an error.
func (l *Log) Resync() error {
	if l.fail.Load() == nil || l.resynced.Load() {
		return nil
	}
	from, to := l.SyncedEnd(), l.WrittenEnd()
	if from == to {
		// Nothing unsynced (the failure was a write that did not happen):
		// rewriting nothing would say nothing about the disk, and the
		// broker would be closed and reopened while the disk may still
		// refuse everything, leaving none to serve reads until a reopen
		// succeeds. Probe it with the last bytes written instead: read
		// back, written again unchanged, and fsynced.
		from = l.probeFrom(to)
	}
	if _, err := l.rewriteRange(from, to); err != nil {
		return err
	}
	l.resynced.Store(true) // nothing writes the files any more (invariant 1)
	l.log.Info("wal resynced after its failure: what a reopen finds is on disk", "from", uint64(from), "to", uint64(to))
	return nil
}

// resyncProbeBytes is how much Resync rewrites, already durable, to find
// out whether the disk takes writes again when nothing is unsynced.
const resyncProbeBytes = 4096

// probeFrom returns where Resync's probe of the bytes before to starts:
// at most resyncProbeBytes back, within the segment holding them (to itself
// when no byte precedes it there).
func (l *Log) probeFrom(to Pos) Pos {
	if to == 0 {
		return to
	}
	s := l.segs.Load().find(to - 1)
	if s == nil || s.start >= to {
		return to
	}
	if to-s.start > resyncProbeBytes {
		return to - resyncProbeBytes
	}
	return s.start
}

// ErrResyncAfterAppend is ResyncTail's error once the log has taken a
// record since Open.
var ErrResyncAfterAppend = errors.New("wal: ResyncTail after an append")

// ResyncTail writes again and fsyncs every byte of the log from from to
// its end, so that what this start read from the page cache is on disk
// before anything is acknowledged on top of it (see above). It must be
// called before the first Append; from before the first segment, or in a
// removed segment's hole, starts at the next segment. It returns the bytes
// rewritten.
func (l *Log) ResyncTail(from Pos) (int64, error) {
	l.mu.Lock()
	appended := l.mu.records > 0
	l.mu.Unlock()
	if appended {
		return 0, ErrResyncAfterAppend
	}
	if err := l.Health(); err != nil {
		return 0, err
	}
	return l.rewriteRange(from, l.WrittenEnd())
}

// rewriteRange rewrites and fsyncs [from, to), plus the end mark after to
// in a recycled file, segment by segment. It returns the bytes rewritten.
func (l *Log) rewriteRange(from, to Pos) (int64, error) {
	sl := l.segs.Load()
	var buf []byte
	var total int64
	for p := from; p < to; {
		s := sl.find(p)
		if s == nil {
			s = sl.after(p)
			if s == nil || s.start >= to {
				break
			}
			p = s.start
		}
		segEnd := min(to, s.endPos(to))
		n := int64(segEnd - p)
		if segEnd == to && s.recycled.Load() {
			// The end mark the last write put after its data.
			if end := int64(segEnd-s.start) + headerSize; end <= s.capacity {
				n += headerSize
			}
		}
		if err := l.rewrite(s, int64(p-s.start), n, &buf); err != nil {
			return total, fmt.Errorf("wal: resync of segment %016x: %w", uint64(s.start), err)
		}
		total += n
		p = segEnd
	}
	return total, nil
}

// rewrite reads n bytes at off of s's file back, writes them again a chunk
// at a time, and fsyncs the file. It writes through a handle of its own:
// the log holds a sealed segment found at Open read-only.
func (l *Log) rewrite(s *segment, off, n int64, buf *[]byte) (err error) {
	sf, err := s.acquire() // keeps the file from removal meanwhile
	if err != nil {
		return err
	}
	defer sf.unref()
	f, err := l.fs.OpenFile(sf.name, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	for done := int64(0); done < n; {
		k := min(n-done, rewriteChunk)
		*buf = growBuf(*buf, int(k), 0)
		b := (*buf)[:k]
		if _, err := readFull(f, b, off+done); err != nil {
			return err
		}
		if _, err := f.WriteAt(b, off+done); err != nil {
			return err
		}
		done += k
	}
	return f.Sync()
}
