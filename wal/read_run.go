package wal

import "fmt"

// maxRunBytes bounds one ReadRun read; longer runs are read in pieces.
const maxRunBytes = 256 << 10

// ReadRun reads records that lie back to back from p, whose framed sizes are
// sizes (as Append reported them: record i+1 starts at record i's position
// plus sizes[i]), and calls fn with each record's index, type and payload,
// in order.
//
// Records already written to their segment file are read with one pread per
// run of up to 256 KiB instead of one per record; runs still in the
// in-memory ring are copied from it record by record, as ReadAt does. Every
// record is verified exactly as ReadAt verifies it, and a record whose framed
// size is not the one given is corruption too (the sizes locate the records:
// a wrong one would misplace the next).
//
// Payloads alias buf, which ReadRun returns (grown if needed) for reuse; fn
// must not keep them. The first error ends the run: the records before it
// were passed to fn, and the caller can read the rest one by one with ReadAt
// (for example after ErrSegmentRemoved). Damage found by the one-read path is
// returned, not logged: a caller that falls back to ReadAt gets the report
// from there.
func (l *Log) ReadRun(p Pos, sizes []int, buf []byte, fn func(i int, typ RecordType, payload []byte)) ([]byte, error) {
	var scratch []byte // decompression space, allocated only when needed
	for i := 0; i < len(sizes); {
		// The longest prefix of the remaining records within one read.
		total, j := sizes[i], i+1
		for j < len(sizes) && total+sizes[j] <= maxRunBytes {
			total += sizes[j]
			j++
		}
		var err error
		if buf, scratch, err = l.readRunOnce(p, sizes[i:j], total, buf, scratch, i, fn); err != nil {
			return buf, err
		}
		p += Pos(total)
		i = j
	}
	return buf, nil
}

func (l *Log) readRunOnce(p Pos, sizes []int, total int, buf, scratch []byte, base int,
	fn func(i int, typ RecordType, payload []byte)) ([]byte, []byte, error) {
	if l.closed.Load() {
		return buf, scratch, ErrClosed
	}
	if p%recordAlign != 0 {
		return buf, scratch, fmt.Errorf("%w: pos %d is not 4-byte aligned", ErrOutOfRange, p)
	}
	s := l.segs.Load().find(p)
	if s == nil || s.removed.Load() {
		if p >= l.End() {
			return buf, scratch, fmt.Errorf("%w: pos %d, end is %d", ErrOutOfRange, p, l.End())
		}
		return buf, scratch, fmt.Errorf("%w: pos %d", ErrSegmentRemoved, p)
	}
	if end := s.endPos(l.WrittenEnd()); end < p || Pos(total) > end-p || p >= l.ringLow() {
		// In the ring (a memory copy beats a system call), not all in the
		// file yet, or not all in this segment: record by record.
		for k, n := range sizes {
			typ, payload, framed, err := l.readAt(p, n, buf)
			if err != nil {
				return buf, scratch, err
			}
			if framed != n {
				seg, off := l.locate(p)
				return buf, scratch, &CorruptionError{Segment: seg, Offset: off, Pos: p,
					Reason: fmt.Sprintf("framed size %d, expected %d", framed, n)}
			}
			fn(base+k, typ, payload)
			p += Pos(n)
		}
		return buf, scratch, nil
	}
	sf, err := s.acquire()
	if err != nil {
		return buf, scratch, fmt.Errorf("read pos %d: %w", p, err)
	}
	defer sf.unref()
	l.stats.fileReads.Add(1)
	off := int64(p - s.start)
	buf = growBuf(buf, total, 0)
	got, err := readFull(sf.f, buf[:total], off)
	if err != nil {
		return buf, scratch, fmt.Errorf("wal: read %s at %d: %w", sf.name, off, err)
	}
	if got < total {
		return buf, scratch, &CorruptionError{Segment: s.start, Offset: off + int64(got), Pos: p + Pos(got), Reason: "truncated"}
	}
	o := 0
	for k, n := range sizes {
		rec := buf[o : o+n]
		rp := p + Pos(o)
		hi, stored, framed, reason := decodeRecord(rp, rec)
		if reason == "" && hi.isSkip() {
			return buf, scratch, skipped(s.start, off+int64(o), rp, framed)
		}
		if reason == "" && framed != n {
			reason = fmt.Sprintf("framed size %d, expected %d", framed, n)
		}
		if reason == "" && hi.flags&flagCompressed != 0 {
			// Decompress into scratch, not after the record (where the next
			// record is).
			var out []byte
			if out, reason = decodePayload(hi, stored, scratch); reason == "" {
				if cap(out) > cap(scratch) {
					scratch = out[:0]
				}
				fn(base+k, hi.typ, out)
				o += n
				continue
			}
		}
		if reason != "" {
			return buf, scratch, &CorruptionError{Segment: s.start, Offset: off + int64(o), Pos: rp, Reason: reason}
		}
		fn(base+k, hi.typ, stored)
		o += n
	}
	return buf, scratch, nil
}

// ringLow is the lowest position the ring still holds (ReadAt serves
// positions from there to the end from memory).
func (l *Log) ringLow() Pos {
	l.mu.RLock()
	defer l.mu.RUnlock()
	low := l.mu.openEnd
	if sz := Pos(l.ring.size()); l.mu.end > sz && l.mu.end-sz > low {
		low = l.mu.end - sz
	}
	return low
}
