package wal

// reader.go owns the read side: ReadAt (random reads of one record, from the
// ring when the record is still there, else with one pread) and Reader
// (sequential replay: from the ring when the records it reads next are all
// still there, else from the files). Both verify every record (invariant 7)
// and hold a reference on the segment file for the duration of the read, so
// RemoveSegment never closes a file under a reader (invariant 9).

import (
	"errors"
	"fmt"
	"io"
)

// speculativeRead is how much ReadAt reads when it has no size hint: one
// pread that covers most records whole (queue bodies are mostly small).
const speculativeRead = 1024

// ReadAt reads and verifies the record at p and returns its type and
// (decompressed) payload. The payload may alias buf, which is grown if too
// small. sizeHint, if > 0, is an upper bound of the framed size: the record
// is read in one pread of that size (it may read past the record). Records
// still in the in-memory ring are copied from memory without a syscall.
// A record that fails verification returns *CorruptionError; a position in
// a removed segment returns ErrSegmentRemoved.
func (l *Log) ReadAt(p Pos, sizeHint int, buf []byte) (RecordType, []byte, error) {
	typ, payload, _, err := l.readAt(p, sizeHint, buf)
	return typ, payload, err
}

// readAt is ReadAt, also returning the record's framed size.
func (l *Log) readAt(p Pos, sizeHint int, buf []byte) (RecordType, []byte, int, error) {
	if l.closed.Load() {
		return 0, nil, 0, ErrClosed
	}
	if p%recordAlign != 0 {
		return 0, nil, 0, fmt.Errorf("%w: pos %d is not 4-byte aligned", ErrOutOfRange, p)
	}
	s := l.segs.Load().find(p)
	if s == nil || s.removed.Load() {
		if p >= l.End() {
			return 0, nil, 0, fmt.Errorf("%w: pos %d, end is %d", ErrOutOfRange, p, l.End())
		}
		return 0, nil, 0, fmt.Errorf("%w: pos %d", ErrSegmentRemoved, p)
	}
	if typ, payload, framed, ok, err := l.readRing(p, buf); ok {
		return typ, payload, framed, err
	}
	return l.readFile(s, p, sizeHint, buf)
}

// readRing serves p from the ring; ok is false if p is no longer (or was
// never, before Open) in it.
func (l *Log) readRing(p Pos, buf []byte) (RecordType, []byte, int, bool, error) {
	l.mu.RLock()
	end := l.mu.end
	low := l.mu.openEnd
	if sz := Pos(l.ring.size()); end > sz && end-sz > low {
		low = end - sz
	}
	if p >= end {
		l.mu.RUnlock()
		return 0, nil, 0, true, fmt.Errorf("%w: pos %d, end is %d", ErrOutOfRange, p, end)
	}
	if p < low || end-p < headerSize {
		l.mu.RUnlock()
		return 0, nil, 0, false, nil
	}
	// Copy out under the shared lock (an appender could otherwise overwrite
	// the bytes once they fall out of the ring), verify after releasing it.
	var h [headerSize]byte
	l.ring.read(p, h[:])
	hi, reason := parseHeader(h[:])
	framed := framedSize(hi.n)
	if reason == "" && Pos(framed) > end-p {
		reason = "record crosses the end of the log"
	}
	if reason != "" {
		l.mu.RUnlock()
		seg, off := l.locate(p)
		return 0, nil, 0, true, &CorruptionError{Segment: seg, Offset: off, Pos: p, Reason: reason}
	}
	buf = growBuf(buf, framed, 0)
	l.ring.read(p, buf[:framed])
	l.mu.RUnlock()
	l.stats.ringReads.Add(1)
	typ, payload, err := l.finishRead(p, buf, framed)
	return typ, payload, framed, true, err
}

// readFile serves p from its segment file.
func (l *Log) readFile(s *segment, p Pos, sizeHint int, buf []byte) (RecordType, []byte, int, error) {
	sf, err := s.acquire()
	if err != nil {
		return 0, nil, 0, fmt.Errorf("read pos %d: %w", p, err)
	}
	defer sf.unref()
	l.stats.fileReads.Add(1)

	off := int64(p - s.start)
	// Everything readable lies before the segment's end (or WrittenEnd for
	// the active one; anything after it was served from the ring).
	avail := int64(s.endPos(l.WrittenEnd()) - p)
	corrupt := func(reason string) error {
		return &CorruptionError{Segment: s.start, Offset: off, Pos: p, Reason: reason}
	}
	if avail < headerSize {
		return 0, nil, 0, corrupt("truncated")
	}
	// One pread of the hinted (or speculative) size; a second one only if
	// the record turns out larger.
	want := sizeHint
	if want <= 0 {
		want = speculativeRead
	}
	want = int(min(int64(max(want, headerSize)), avail))
	buf = growBuf(buf, want, 0)
	got, err := readFull(sf.f, buf[:want], off)
	if err != nil {
		return 0, nil, 0, fmt.Errorf("wal: read %s at %d: %w", sf.name, off, err)
	}
	hi, reason := parseHeader(buf[:headerSize])
	if reason != "" {
		return 0, nil, 0, corrupt(reason)
	}
	framed := framedSize(hi.n)
	if int64(framed) > avail {
		return 0, nil, 0, corrupt("record crosses the end of its segment")
	}
	if framed > got {
		buf = growBuf(buf, framed, got)
		if _, err := readFull(sf.f, buf[got:framed], off+int64(got)); err != nil {
			return 0, nil, 0, fmt.Errorf("wal: read %s at %d: %w", sf.name, off, err)
		}
	}
	typ, payload, err := l.finishRead(p, buf, framed)
	if ce := (*CorruptionError)(nil); errors.As(err, &ce) && !ce.Skipped {
		l.log.Error("wal read a corrupt record", "segment", sf.name, "offset", off, "err", err)
	}
	return typ, payload, framed, err
}

// skipped is the error of a read at a skip record of framed size n.
func skipped(seg Pos, off int64, p Pos, n int) error {
	return &CorruptionError{Segment: seg, Offset: off, Pos: p, Skipped: true, End: p + Pos(n),
		Reason: fmt.Sprintf("skip record of %d bytes: the record here was lost to damage", n)}
}

// finishRead verifies the framed record in buf[:framed] and returns its
// payload, decompressed into buf[framed:] if needed.
func (l *Log) finishRead(p Pos, buf []byte, framed int) (RecordType, []byte, error) {
	hi, stored, _, reason := decodeRecord(p, buf[:framed])
	if reason == "" && hi.isSkip() {
		seg, off := l.locate(p)
		return 0, nil, skipped(seg, off, p, framed)
	}
	if reason == "" && hi.flags&flagCompressed != 0 {
		var out []byte
		n, err := s2DecodedLen(stored)
		if err != nil || n > MaxPayload {
			reason = "bad compressed length"
		} else {
			if cap(buf)-framed < n {
				buf = growBuf(buf, framed+n, framed)
				stored = buf[headerSize : headerSize+len(stored)]
			}
			out, reason = decodePayload(hi, stored, buf[framed:framed+n])
		}
		stored = out
	}
	if reason != "" {
		seg, off := l.locate(p)
		return 0, nil, &CorruptionError{Segment: seg, Offset: off, Pos: p, Reason: reason}
	}
	return hi.typ, stored, nil
}

// locate returns the segment start and file offset of p, for error reports.
func (l *Log) locate(p Pos) (Pos, int64) {
	if s := l.segs.Load().find(p); s != nil {
		return s.start, int64(p - s.start)
	}
	return 0, int64(p)
}

// growBuf returns a slice of at least n bytes, keeping buf[:keep].
func growBuf(buf []byte, n, keep int) []byte {
	if cap(buf) >= n {
		return buf[:n]
	}
	nb := make([]byte, n, max(n, 2*cap(buf)))
	copy(nb, buf[:keep])
	return nb
}

// readFull reads len(b) bytes at off; a short read at the end of the file
// is returned as the count read with no error (the caller checks what it
// needs).
func readFull(f File, b []byte, off int64) (int, error) {
	n, err := f.ReadAt(b, off)
	if err != nil && !(errors.Is(err, io.EOF) && n > 0) {
		if errors.Is(err, io.EOF) {
			return n, io.ErrUnexpectedEOF
		}
		return n, err
	}
	if n < len(b) {
		clear(b[n:])
	}
	return n, nil
}

// Reader replays records sequentially from the segment files. It is not
// safe for concurrent use; appends may continue while it reads.
type Reader struct {
	l       *Log
	pos, to Pos
	seg     *segment
	sf      *segFile // reference held while reading seg
	win     fileWindow
	out     []byte // decompression buffer
	err     error  // sticky error (corruption, removal, Close)
}

// NewReader returns a Reader of the records with from <= Pos < to. from must
// be a record boundary or a segment start, to at most WrittenEnd.
func (l *Log) NewReader(from, to Pos) (*Reader, error) {
	if l.closed.Load() {
		return nil, ErrClosed
	}
	if from > to || to > l.WrittenEnd() || from%recordAlign != 0 {
		return nil, fmt.Errorf("%w: reader [%d, %d), written end %d", ErrOutOfRange, from, to, l.WrittenEnd())
	}
	return &Reader{l: l, pos: from, to: to}, nil
}

// Next returns the next record: its position, type and payload (valid until
// the next call). It returns io.EOF at the end of the range and a
// *CorruptionError for a bad record, which is never skipped. Skip records
// (damage covered by Options.Repair, or SkipTo) are passed over silently.
func (r *Reader) Next() (Pos, RecordType, []byte, error) {
	for {
		if r.err != nil {
			return 0, 0, nil, r.err
		}
		if r.pos >= r.to {
			return 0, 0, nil, io.EOF
		}
		p, typ, payload, err := r.next()
		if err != nil {
			r.err = err
			return 0, 0, nil, err
		}
		if typ != 0 {
			return p, typ, payload, nil
		}
	}
}

// next reads the record at r.pos and moves past it; for a skip record it
// returns type 0 and no payload.
func (r *Reader) next() (Pos, RecordType, []byte, error) {
	if r.l.closed.Load() {
		return 0, 0, nil, ErrClosed
	}
	// Crossing a segment end: the next segment starts exactly there
	// (invariant 1), unless it was removed (a hole), which is an error.
	if r.seg == nil || r.pos >= r.seg.endPos(r.to) {
		if err := r.switchSegment(); err != nil {
			return 0, 0, nil, err
		}
	}
	s, p := r.seg, r.pos
	off := int64(p - s.start)
	limit := int64(min(r.to, s.endPos(r.to)) - p)
	corrupt := func(reason string) error {
		return &CorruptionError{Segment: s.start, Offset: off, Pos: p, Reason: reason}
	}
	if limit < headerSize {
		return 0, 0, nil, corrupt("truncated")
	}
	if !r.win.covers(off, headerSize) && !r.fillFromRing(off, min(limit, ringFillBytes)) {
		r.l.stats.readerFile.Add(1)
	}
	h, err := r.win.get(off, headerSize)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("wal: read %s at %d: %w", r.sf.name, off, err)
	}
	hi, reason := parseHeader(h)
	if reason != "" {
		return 0, 0, nil, corrupt(reason)
	}
	framed := framedSize(hi.n)
	if int64(framed) > limit {
		return 0, 0, nil, corrupt("record crosses the end of the range")
	}
	b, err := r.win.get(off, framed)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("wal: read %s at %d: %w", r.sf.name, off, err)
	}
	hi, stored, _, reason := decodeRecord(p, b)
	if reason == "" && hi.isSkip() {
		r.pos += Pos(framed)
		return p, 0, nil, nil
	}
	if reason == "" {
		stored, reason = decodePayload(hi, stored, r.out)
		if hi.flags&flagCompressed != 0 && reason == "" {
			r.out = stored[:0]
		}
	}
	if reason != "" {
		return 0, 0, nil, corrupt(reason)
	}
	r.pos += Pos(framed)
	return p, hi.typ, stored, nil
}

// switchSegment moves the reader to the segment holding r.pos.
func (r *Reader) switchSegment() error {
	r.release()
	s := r.l.segs.Load().find(r.pos)
	if s == nil {
		return fmt.Errorf("%w: pos %d", ErrSegmentRemoved, r.pos)
	}
	sf, err := s.acquire()
	if err != nil {
		return fmt.Errorf("read pos %d: %w", r.pos, err)
	}
	r.seg, r.sf = s, sf
	// Never read beyond what was written when the reader was created.
	size := int64(min(r.to, s.endPos(r.to)) - s.start)
	r.win = fileWindow{f: sf.f, size: size, buf: r.win.buf[:0]}
	return nil
}

// ringFillBytes bounds one copy from the ring: it is made under the log's
// shared lock, which appenders wait for.
const ringFillBytes = 256 << 10

// fillFromRing loads the window with the n bytes at off in the reader's
// segment from the in-memory ring, if the ring still holds them all, and
// reports whether it did. A replica applying the records it has just
// appended, or a checkpoint close behind the appenders, then reads them
// with no system call. The bytes are copied under the shared lock, as
// readRing does: an appender could otherwise overwrite them once they fall
// out of the ring. They are the file's bytes (the writer writes the ring
// out as it is), and next verifies every record read from them.
func (r *Reader) fillFromRing(off int64, n int64) bool {
	l, p := r.l, r.seg.start+Pos(off)
	l.mu.RLock()
	defer l.mu.RUnlock()
	low, end := l.mu.openEnd, l.mu.end
	if sz := Pos(l.ring.size()); end > sz && end-sz > low {
		low = end - sz
	}
	if p < low || p+Pos(n) > end {
		return false
	}
	r.win.buf = growBuf(r.win.buf, int(n), 0)
	l.ring.read(p, r.win.buf)
	r.win.off = off
	l.stats.readerRing.Add(1)
	return true
}

func (r *Reader) release() {
	if r.sf != nil {
		r.sf.unref()
		r.sf, r.seg = nil, nil
	}
}

// Close releases the reader's segment reference.
func (r *Reader) Close() error {
	r.release()
	if r.err == nil {
		r.err = ErrClosed
	}
	return nil
}
