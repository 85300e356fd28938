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
// Invariants:
//  1. Resync runs only on a failed log (invariant 8 of log.go: the writer
//     does no more I/O), so nothing else writes the files meanwhile.
//  2. It covers [SyncedEnd, WrittenEnd) plus, in a recycled file, the end
//     mark after it: everything written that no successful fsync covered.
//     Before that range every byte was fsynced (invariant 4).
//  3. A nil return means the disk holds every byte a reopen will read as
//     records; on an error the disk still refuses, and nothing may be
//     reopened on top of the failed bytes.

import "fmt"

// Resync makes durable, on a log whose write or fsync failed, what a
// reopen of its files would find (see above). It returns nil at once for
// a log that has not failed, and may be called again after an error.
func (l *Log) Resync() error {
	if l.fail.Load() == nil || l.resynced.Load() {
		return nil
	}
	from, to := l.SyncedEnd(), l.WrittenEnd()
	sl := l.segs.Load()
	var buf []byte
	for p := from; p < to; {
		s := sl.find(p)
		if s == nil {
			return fmt.Errorf("wal: resync: no segment holds pos %d", p)
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
			return fmt.Errorf("wal: resync of segment %016x: %w", uint64(s.start), err)
		}
		p = segEnd
	}
	l.resynced.Store(true) // nothing writes the files any more (invariant 1)
	l.log.Info("wal resynced after its failure: what a reopen finds is on disk", "from", uint64(from), "to", uint64(to))
	return nil
}

// rewrite reads n bytes at off of s's file back, writes them again and
// fsyncs the file.
func (l *Log) rewrite(s *segment, off, n int64, buf *[]byte) error {
	sf, err := s.acquire()
	if err != nil {
		return err
	}
	defer sf.unref()
	*buf = growBuf(*buf, int(n), 0)
	b := (*buf)[:n]
	if _, err := readFull(sf.f, b, off); err != nil {
		return err
	}
	if _, err := sf.f.WriteAt(b, off); err != nil {
		return err
	}
	return sf.f.Sync()
}
