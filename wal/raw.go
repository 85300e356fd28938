package wal

import (
	"fmt"
)

// ReadRaw reads the log's bytes at p into b as they are in p's segment
// file: framing, checksums and skip records included, nothing verified. It
// reads at most to the end of p's segment and to WrittenEnd, and returns
// the count read (0 at WrittenEnd). For copying the log byte for byte (an
// online backup): a copy of [Start, End) of every segment, each file
// zero-filled after its data, with a hole marker where SegmentInfo's End
// is not the next segment's Start, opens as the log did up to the copy's
// end.
//
// A position in a removed segment or in a hole fails with
// ErrSegmentRemoved; the caller that needs the bytes keeps segments from
// being removed meanwhile.
func (l *Log) ReadRaw(p Pos, b []byte) (int, error) {
	written := l.WrittenEnd()
	if p >= written || len(b) == 0 {
		return 0, nil
	}
	s := l.segs.Load().find(p)
	if s == nil {
		return 0, fmt.Errorf("read raw at %d: %w", p, ErrSegmentRemoved)
	}
	end := s.endPos(written)
	if p >= end {
		return 0, fmt.Errorf("read raw at %d (a hole after segment %016x): %w", p, uint64(s.start), ErrSegmentRemoved)
	}
	sf, err := s.acquire()
	if err != nil {
		return 0, fmt.Errorf("read raw at %d: %w", p, err)
	}
	defer sf.unref()
	n := int(min(int64(len(b)), int64(end-p)))
	got, err := readFull(sf.f, b[:n], int64(p-s.start))
	if err != nil {
		return got, fmt.Errorf("wal: read %s at %d: %w", sf.name, int64(p-s.start), err)
	}
	if got < n {
		return got, fmt.Errorf("wal: read %s at %d: %d of %d bytes (the file is short)", sf.name, int64(p-s.start), got, n)
	}
	return n, nil
}
