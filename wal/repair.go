package wal

// repair.go owns what Open does with damaged records, and the skip record
// that makes a repair durable.
//
// Damage is a byte range [a, b) of one segment: a is the first position
// where no valid record starts although data continues (a record boundary:
// every record before it verified), b is the first aligned position after
// a where a valid record starts, or the segment's end. Two cases:
//
//   - Torn tail: the last segment holds no valid record after a. The log is
//     cut at a (truncated, preallocated again, fsynced) with or without
//     Options.Repair: a crash leaves that, and positions from a are reused.
//   - Mid-log damage: a valid record follows. Without Options.Repair, Open
//     fails with a *CorruptionError (for the last segment; older segments
//     are not scanned then and their damage surfaces on read). With Repair
//     every segment is scanned and each range is covered by skip records,
//     so that the records after it keep their positions.
//
// A skip record is an ordinary record (doc.go, "Record framing") with flags
// 0x02 and type 0xff whose stored payload is whatever bytes lie in the
// range after its header: Repair overwrites only the 12 bytes at a with the
// header (length b-a-12, checksum over the bytes found there), so the
// damaged bytes stay on disk for inspection, and a range longer than
// MaxPayload+12 becomes a chain of skip records. Readers never serve a skip
// record: Reader passes over it, ReadAt and ReadRun return a
// *CorruptionError with Skipped set. SkipTo appends skip records with zero
// payloads to move the end of the log forward.
//
// Each range is reported in RecoveryInfo.Repairs with what can still be
// read of the records that were there (LostRecord: their headers and
// payload prefixes, unverified), so the engine can name what it lost; the
// log itself does not interpret payloads.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
)

// RepairedRange is one damaged range Open found, in positions.
type RepairedRange struct {
	Segment Pos    // start of the segment holding the range
	Start   Pos    // first damaged position (a record boundary)
	End     Pos    // first position after the range: the next valid record, the segment's end, or (Cut) the end of the garbage
	Bytes   int64  // End - Start
	Reason  string // why no valid record starts at Start: "checksum mismatch", "bad magic", "truncated", ...
	// Cut: a torn tail; the log was cut at Start, the range is gone and
	// later appends reuse its positions. Otherwise skip records cover
	// [Start, End) and every position after it is kept.
	Cut bool
	// Lost lists the records that were in the range as far as their
	// headers can still be read (best effort; empty if the headers are
	// destroyed). At most maxLostRecords entries.
	Lost []LostRecord
}

// String summarizes r in one line (the lost records by position only).
func (r RepairedRange) String() string {
	how := "skipped"
	if r.Cut {
		how = "cut"
	}
	lost := make([]Pos, 0, len(r.Lost))
	for _, x := range r.Lost {
		lost = append(lost, x.Pos)
	}
	return fmt.Sprintf("%s [%d, %d) of segment %016x (%d bytes, %s), lost records at %v",
		how, r.Start, r.End, uint64(r.Segment), r.Bytes, r.Reason, lost)
}

// LostRecord is what remains readable of one record in a damaged range.
// Nothing in it is verified: any byte may be damaged.
type LostRecord struct {
	Pos   Pos        // where its header was found
	Type  RecordType // the header's type byte
	Flags uint8      // the header's flags; bit 0 set: Prefix is s2-compressed bytes, not the payload's start
	Size  int        // framed size its header claims
	// Prefix is up to LostPrefixBytes of the stored payload as found on
	// disk (shorter if the range or the file ends first).
	Prefix []byte
}

// LostPrefixBytes bounds LostRecord.Prefix: enough for the fixed part of
// the engine's message and queue records and a queue name of the longest
// kind, so that a report can say what a lost record was about.
const LostPrefixBytes = 384

// maxLostRecords bounds RepairedRange.Lost.
const maxLostRecords = 4096

// damage is a damaged range of one segment, in file offsets.
type damage struct {
	from, to int64
	reason   string
}

// maxSkipFramed is the largest framed size of one skip record.
const maxSkipFramed = MaxPayload + headerSize

// skipPieces splits the aligned range [from, to), at least headerSize long,
// into the framed sizes of a chain of skip records.
func skipPieces(from, to int64) []int64 {
	var out []int64
	for from < to {
		n := min(to-from, maxSkipFramed)
		if rest := to - from - n; rest > 0 && rest < headerSize {
			n -= headerSize // leave the last piece room for its header
		}
		out = append(out, n)
		from += n
	}
	return out
}

// writeSkips covers [d.from, d.to) of f with skip records: it computes each
// header from the bytes now in the range (read through w, which must not
// have seen a write to the range) and then writes the headers.
func writeSkips(f File, w *fileWindow, start Pos, d damage) error {
	type hdr struct {
		off int64
		h   [headerSize]byte
	}
	var hs []hdr
	off := d.from
	for _, n := range skipPieces(d.from, d.to) {
		var x hdr
		x.off = off
		putHeader(x.h[:], int(n)-headerSize, skipType, flagSkip)
		payload, err := w.get(off+headerSize, int(n)-headerSize)
		if err != nil {
			return err
		}
		sum := recordChecksum(start+Pos(off), x.h[:], payload, nil)
		x.h[8], x.h[9], x.h[10], x.h[11] = byte(sum), byte(sum>>8), byte(sum>>16), byte(sum>>24)
		hs = append(hs, x)
		off += n
	}
	for _, x := range hs {
		if _, err := f.WriteAt(x.h[:], x.off); err != nil {
			return err
		}
	}
	return nil
}

// lostRecords returns what can be read of the records in [from, to): it
// walks plausible headers and, past an implausible one, resynchronizes at
// the next aligned plausible header.
func lostRecords(w *fileWindow, start Pos, from, to int64) []LostRecord {
	var out []LostRecord
	for off := from; off+headerSize <= to && len(out) < maxLostRecords; {
		h, err := w.get(off, headerSize)
		if err != nil {
			break
		}
		hi, reason := parseHeader(h)
		if reason != "" || hi.isSkip() {
			off += recordAlign
			continue
		}
		framed := int64(framedSize(hi.n))
		n := min(int64(hi.n), LostPrefixBytes, to-off-headerSize, w.size-off-headerSize)
		var prefix []byte
		if n > 0 {
			if b, err := w.get(off+headerSize, int(n)); err == nil {
				prefix = bytes.Clone(b)
			}
		}
		out = append(out, LostRecord{Pos: start + Pos(off), Type: hi.typ, Flags: hi.flags, Size: int(framed), Prefix: prefix})
		if off+framed <= to {
			off += framed
		} else {
			off += recordAlign
		}
	}
	return out
}

// nextValid returns the offset of the first valid record after the damage
// at stop, at most upTo, or -1. A record closer than headerSize to stop
// cannot be right (the damaged record had at least a header) and would
// leave no room for a skip record: the search then starts after it.
func nextValid(w *fileWindow, start Pos, stop, upTo int64) (int64, error) {
	later, err := findValidRecord(w, start, stop+recordAlign, upTo)
	if err == nil && later >= 0 && later-stop < headerSize {
		later, err = findValidRecord(w, start, stop+headerSize, upTo)
	}
	return later, err
}

// report records a damaged range in RecoveryInfo (and the first damaged
// record as its Corruption) and logs it.
func (l *Log) report(s *segment, w *fileWindow, d damage, cut bool) {
	lost := lostRecords(w, s.start, d.from, d.to)
	r := RepairedRange{Segment: s.start, Start: s.start + Pos(d.from), End: s.start + Pos(d.to),
		Bytes: d.to - d.from, Reason: d.reason, Cut: cut, Lost: lost}
	l.recovery.Repairs = append(l.recovery.Repairs, r)
	if l.recovery.Corruption == nil {
		l.recovery.Corruption = &CorruptionError{Segment: s.start, Offset: d.from, Pos: r.Start, Reason: d.reason}
	}
	seg := filepath.Base(segName(l.dir, s.start))
	if cut {
		l.log.Warn("wal cut a torn tail", "segment", seg, "offset", d.from, "pos", uint64(r.Start),
			"dropped_bytes", r.Bytes, "lost_records", len(lost), "reason", d.reason)
		return
	}
	l.recovery.Repaired = true
	l.log.Warn("wal repair skipped a damaged range; the records after it are kept", "segment", seg,
		"offset", d.from, "pos", uint64(r.Start), "end", uint64(r.End), "bytes", r.Bytes,
		"lost_records", len(lost), "reason", d.reason)
}

// repairSegment scans a non-active segment (Options.Repair) and covers
// every damaged range with skip records; its records must tile
// [start, end).
func (l *Log) repairSegment(s *segment) error {
	sf := s.file.Load()
	limit := int64(Pos(s.end.Load()) - s.start)
	w := &fileWindow{f: sf.f, size: limit}
	var dmg []damage
	for off := int64(0); off < limit; {
		stop, bad := scanRecords(w, s.start, off)
		if stop >= limit {
			break
		}
		switch {
		case bad != "":
		case stop+headerSize > limit:
			bad = "truncated"
		default:
			bad = "zeroed bytes in the middle of the data"
		}
		next, err := nextValid(w, s.start, stop, limit-headerSize)
		if err != nil {
			return fmt.Errorf("wal: scan segment %s: %w", sf.name, err)
		}
		to := limit
		if next >= 0 {
			to = next
		}
		if to-stop < headerSize {
			return &CorruptionError{Segment: s.start, Offset: stop, Pos: s.start + Pos(stop),
				Reason: fmt.Sprintf("%s; the %d bytes before the segment's end are too few for a skip record", bad, to-stop)}
		}
		dmg = append(dmg, damage{from: stop, to: to, reason: bad})
		off = to
	}
	l.recovery.Scanned++
	if len(dmg) == 0 {
		return nil
	}
	if err := l.applyRepairs(s, w, dmg); err != nil {
		return err
	}
	if err := sf.f.Sync(); err != nil {
		return fmt.Errorf("wal: sync repaired segment %s: %w", sf.name, err)
	}
	return nil
}

// applyRepairs reports and covers each damaged range of s with skip records.
func (l *Log) applyRepairs(s *segment, w *fileWindow, dmg []damage) error {
	sf := s.file.Load()
	for _, d := range dmg {
		l.report(s, w, d, false)
		if err := writeSkips(sf.f, w, s.start, d); err != nil {
			return fmt.Errorf("wal: repair segment %s: %w", sf.name, err)
		}
	}
	return nil
}

// SkipTo moves the end of the log to at least p by appending skip records
// (zero payloads; readers pass over them) and returns the new End: p, or up
// to 8 bytes more, since a skip record has at least a 12-byte header. It
// does nothing if End is already at or past p. It rolls to a new segment
// where the active one is full, like Append, and returns like Append after
// a failure; the skip records are durable after a later WaitDurable or Sync.
//
// For the engine after a repair: when Open cut a torn tail below the
// position the index has checkpointed, new records must not be given
// positions the checkpoint already claims; SkipTo(checkpoint) prevents that.
func (l *Log) SkipTo(p Pos) (Pos, error) {
	chunk := int64(min(maxSkipFramed, l.maxPayload+headerSize, l.ring.size()/2)) &^ (recordAlign - 1)
	p = Pos(align4(int(p)))
	var appended int64
	l.mu.Lock()
	for {
		end := l.mu.end
		if end >= p {
			break
		}
		active := l.segs.Load().last()
		room := active.capacity - int64(end-active.start)
		if room < headerSize {
			l.rollLocked(end) // invariant 1: the new segment starts at end
			continue
		}
		n := max(min(int64(p-end), room, chunk), headerSize)
		if err := l.waitRoomLocked(int(n), false); err != nil {
			l.mu.Unlock()
			return l.End(), err
		}
		if l.mu.end != end {
			continue // waiting let others append: measure again
		}
		var h [headerSize]byte
		putHeader(h[:], int(n)-headerSize, skipType, flagSkip)
		sum := skipChecksum(end, h[:], int(n)-headerSize)
		h[8], h[9], h[10], h[11] = byte(sum), byte(sum>>8), byte(sum>>16), byte(sum>>24)
		l.ring.write(end, h[:])
		l.ring.zero(end+headerSize, int(n)-headerSize)
		l.mu.end = end + Pos(n)
		l.endPos.Store(uint64(l.mu.end))
		appended += n
	}
	end := l.mu.end
	l.mu.Unlock()
	if appended > 0 {
		l.kickWriter()
		l.stats.bytes.Add(uint64(appended))
		l.log.Warn("wal skipped positions to move its end", "to", uint64(p), "end", uint64(end), "bytes", appended)
	}
	return end, nil
}

// ReplayStart returns where a replay meant to start at p must start: p if
// a record starts there or p is the written end; if p lies inside a range
// covered by skip records (damage skipped by Options.Repair, or SkipTo),
// the first record after it (or the segment's end). It reads p's segment
// from its start when p is not a record boundary, which costs one pass
// over that segment: meant for start-up, when a checkpoint position may lie
// inside a repaired range. A p inside an ordinary record or damaged bytes
// returns a *CorruptionError; a p beyond the written end ErrOutOfRange.
func (l *Log) ReplayStart(p Pos) (Pos, error) {
	written := l.WrittenEnd()
	switch {
	case p == written:
		return p, nil
	case p > written:
		return 0, fmt.Errorf("%w: replay start %d, written end %d", ErrOutOfRange, p, written)
	}
	if p%recordAlign == 0 {
		_, _, err := l.ReadAt(p, 0, nil)
		var ce *CorruptionError
		switch {
		case err == nil:
			return p, nil // the common case: a record starts at p
		case errors.As(err, &ce) && ce.Skipped:
			return ce.End, nil // a skip record starts at p
		}
	}
	s := l.segs.Load().find(p)
	if s == nil {
		return 0, fmt.Errorf("%w: pos %d", ErrSegmentRemoved, p)
	}
	to := min(s.endPos(written), written)
	r, err := l.NewReader(s.start, to)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	for {
		prev := r.NextPos() // skip records lie in [prev, q)
		q, _, _, err := r.Next()
		if err == io.EOF {
			q = to
		} else if err != nil {
			return 0, err
		}
		switch {
		case p == q:
			return p, nil
		case p >= prev && p < q:
			return q, nil // inside skip records
		case q == to:
			return 0, fmt.Errorf("wal: replay start %d not found in segment %016x", p, uint64(s.start))
		case p < r.NextPos():
			return 0, &CorruptionError{Segment: s.start, Offset: int64(p - s.start), Pos: p,
				Reason: fmt.Sprintf("replay start inside the record at %d", q)}
		}
	}
}
