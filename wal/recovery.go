package wal

// recovery.go owns Open: listing the directory, checking that the segments
// tile the position space, and finding the end of the log by scanning the
// last segment only (old segments are not read at Open, so a large log opens
// in milliseconds; their records are verified when they are read), or every
// segment with Options.Repair (repair.go).
//
// The end of the last segment is the first position holding no valid record
// with no valid record after it. Where the walk of valid records stops:
//   - zero header and zeros to the end of the file: the clean end;
//   - zero header, then non-zero bytes but no valid record: a recycled
//     file's end mark before an older segment's stale bytes: the clean end;
//   - otherwise, if no valid record follows at any 4-byte aligned offset: a
//     torn tail (a write cut by a crash). It is cut: truncate at the cut,
//     preallocate again, fsync; reported in RecoveryInfo and at Warn level;
//   - otherwise a valid record follows the bad one: mid-log damage. Open
//     fails with *CorruptionError, unless Options.Repair, which covers the
//     range with skip records, reports it, and walks on from the valid one.
//   - a record whose header is whole but whose length runs past the end of
//     the file is not a crash's: every segment file is preallocated to its
//     capacity and synced before a record is written into it (createFirst,
//     makeSpare, prepareTail), and a torn tail is cut only at a record
//     boundary, so no crash shortens a file below a record it holds. The
//     file was cut short from outside (a copy, a tool, a file system
//     repair), and every record after the cut, acknowledged ones too, is
//     gone: Open fails with *CorruptionError unless Options.Repair, which
//     cuts it as a torn tail. (Until 2026-12-07 it was cut without
//     Repair, and a segment cut 4,054 acknowledged messages back was
//     reported as one lost record: recovery audit.) A cut at a record
//     boundary, or inside the last record's header, cannot be told from
//     the log's end.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// RecoveryInfo is what Open found and did.
type RecoveryInfo struct {
	Segments int      // live segments found (or created)
	Holes    int      // hole markers of removed segments
	Created  bool     // the log was empty: the first segment was created
	End      Pos      // end of the log after recovery
	Ignored  []string // unknown files left in the directory
	// Scanned counts the segments whose records Open verified: the last
	// one, or all with Options.Repair.
	Scanned int
	// TornTail is set when an incomplete tail was cut at CutAt.
	TornTail bool
	// Repaired is set when Options.Repair covered at least one damaged
	// range with skip records (listed in Repairs).
	Repaired bool
	// CutAt is where the log was cut (TornTail).
	CutAt Pos
	// DroppedBytes counts the bytes from CutAt to the last non-zero byte
	// of the segment file that were dropped by the cut.
	DroppedBytes int64
	// Corruption describes the first damaged record found, if any.
	Corruption *CorruptionError
	// Repairs lists every damaged range, oldest first: those skipped by
	// Options.Repair and the cut torn tail (Cut set). Positions of a
	// skipped range are never reused; a checkpoint inside or beyond one
	// is not an error for the log (see Log.ReplayStart and Log.SkipTo).
	Repairs []RepairedRange
}

// dirEntry is a segment or hole marker found in the directory.
type dirEntry struct {
	start Pos
	hole  bool
}

// Open opens (or creates) the log in dir and recovers its end. It starts the
// writer and spare goroutines only after recovery succeeded.
func Open(dir string, opts Options) (*Log, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	l := &Log{
		dir:         filepath.Clean(dir),
		fs:          opts.FS,
		opts:        opts,
		log:         opts.Logger.With("wal", filepath.Clean(dir)),
		maxPayload:  int(min(int64(MaxPayload), opts.SegmentBytes-headerSize)),
		deferWrites: opts.DeferWrites && opts.Sync == SyncAlways,
		kick:        make(chan struct{}, 1),
		stop:        make(chan struct{}),
		writerDone:  make(chan struct{}),
		spares:      make(chan spareFile),
		spareNote:   make(chan struct{}, 1),
		spareStop:   make(chan struct{}),
		spareDone:   make(chan struct{}),
	}
	l.spaceCond = sync.NewCond(&l.mu)
	l.ack.written.L = &l.ack.Mutex
	l.ack.synced.L = &l.ack.Mutex
	l.stats.init()

	start := time.Now()
	segs, err := l.recover()
	if err != nil {
		for _, s := range segs {
			if sf := s.file.Load(); sf != nil {
				sf.unref()
			}
		}
		return nil, err
	}
	// Recovery succeeded: publish the state and only now start goroutines.
	// Everything before End is written and (after prepareTail) synced.
	l.segs.Store(&segList{segs: segs})
	end := l.recovery.End
	l.mu.end, l.mu.openEnd = end, end
	l.endPos.Store(uint64(end))
	l.written.Store(uint64(end))
	l.synced.Store(uint64(end))
	l.syncWant.Store(uint64(end))
	l.w.wseg = segs[len(segs)-1]
	l.w.lastSync = time.Now()
	l.ring = newRing(opts.BufferBytes)
	l.startBackground()
	l.log.Info("wal opened", "end", uint64(end), "segments", len(segs),
		"sync", opts.Sync.String(), "took", time.Since(start))
	return l, nil
}

// recover lists dir, opens the segments and finds the end of the log. It
// returns the opened segments even on error, so the caller can close them.
func (l *Log) recover() ([]*segment, error) {
	if err := l.fs.MkdirAll(l.dir, dirPerm); err != nil {
		return nil, fmt.Errorf("wal: create dir: %w", err)
	}
	entries, err := l.listDir()
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		s, err := l.createFirst()
		if err != nil {
			return nil, err
		}
		l.recovery.Created, l.recovery.Segments = true, 1
		return []*segment{s}, nil
	}
	if entries[len(entries)-1].hole {
		return nil, fmt.Errorf("%w: the newest entry of %s is a hole marker, the active segment is missing",
			ErrCorrupt, l.dir)
	}

	// Open every live segment (cheap: no reads) and give each non-last one
	// its end, the start of the next entry (segment or hole). Only sizes
	// are checked here; the records of old segments are verified when read.
	var segs []*segment
	for i, e := range entries {
		if e.hole {
			l.recovery.Holes++
			l.holes = append(l.holes, e.start)
			continue
		}
		last := i == len(entries)-1
		s, err := l.openSegment(e.start, last || l.opts.Repair)
		if err != nil {
			return segs, err
		}
		segs = append(segs, s)
		if last {
			break
		}
		end := entries[i+1].start
		s.end.Store(uint64(end))
		if size := s.size.Load(); size < int64(end-s.start) {
			if !l.opts.Repair {
				return segs, &CorruptionError{Segment: s.start, Offset: size, Pos: s.start + Pos(size),
					Reason: fmt.Sprintf("segment file has %d bytes, its range [%d, %d) needs %d; %s",
						size, s.start, end, end-s.start, repairHint)}
			}
			// The missing bytes read as zeros: the scan reports them as a
			// damaged range and skip records cover it.
			if err := s.file.Load().f.Truncate(int64(end - s.start)); err != nil {
				return segs, fmt.Errorf("wal: extend short segment %016x: %w", uint64(s.start), err)
			}
			s.size.Store(int64(end - s.start))
		}
	}
	l.recovery.Segments = len(segs)
	if l.opts.Repair {
		for _, s := range segs[:len(segs)-1] {
			if err := l.repairSegment(s); err != nil {
				return segs, err
			}
		}
	}
	return segs, l.recoverTail(segs[len(segs)-1])
}

// repairHint ends the message of a *CorruptionError that Repair would fix.
const repairHint = "open with Options.Repair (smqd --wal-repair) to skip the damaged bytes and keep every valid record after them"

// listDir returns the segments and holes of dir in position order, after
// deleting leftover spare files, hole markers shadowed by a segment and
// leading hole markers (nothing older remains to need them).
func (l *Log) listDir() ([]dirEntry, error) {
	names, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return nil, fmt.Errorf("wal: list dir: %w", err)
	}
	var entries []dirEntry
	for _, name := range names {
		if filepath.Ext(name) == spareSuffix {
			if err := l.fs.Remove(filepath.Join(l.dir, name)); err != nil {
				return nil, fmt.Errorf("wal: remove leftover spare: %w", err)
			}
			continue
		}
		p, hole, ok := parseName(name)
		if !ok {
			l.recovery.Ignored = append(l.recovery.Ignored, name)
			l.log.Warn("wal ignores unknown file in its directory", "file", name)
			continue
		}
		entries = append(entries, dirEntry{start: p, hole: hole})
	}
	slices.SortFunc(entries, func(a, b dirEntry) int {
		switch {
		case a.start != b.start:
			return cmpPos(a.start, b.start)
		case a.hole == b.hole:
			return 0
		case a.hole:
			return 1 // the segment first
		}
		return -1
	})
	var out []dirEntry
	for _, e := range entries {
		shadowed := len(out) > 0 && out[len(out)-1].start == e.start
		leading := e.hole && len(out) == 0
		if e.hole && (shadowed || leading) {
			// A crash during RemoveSegment, or an oldest segment removed
			// after a middle one: the marker is not needed.
			if err := l.fs.Remove(holeName(l.dir, e.start)); err != nil {
				return nil, fmt.Errorf("wal: remove stale hole marker: %w", err)
			}
			continue
		}
		out = append(out, e) // consecutive holes are fine too

	}
	return out, nil
}

func cmpPos(a, b Pos) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// createFirst creates the segment at Pos 0 of an empty log.
func (l *Log) createFirst() (*segment, error) {
	name := segName(l.dir, 0)
	f, err := l.fs.OpenFile(name, osCreateRW, filePerm)
	if err != nil {
		return nil, fmt.Errorf("wal: create first segment: %w", err)
	}
	err = f.Preallocate(l.opts.SegmentBytes)
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = l.fs.SyncDir(l.dir)
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("wal: create first segment: %w", err)
	}
	s := &segment{start: 0, capacity: l.opts.SegmentBytes}
	s.end.Store(openEnded)
	s.size.Store(l.opts.SegmentBytes)
	s.file.Store(newSegFile(f, name))
	l.recovery.End = 0
	return s, nil
}

// openSegment opens the segment file starting at p: read-only unless it is
// the last one, which the writer appends to.
func (l *Log) openSegment(p Pos, last bool) (*segment, error) {
	name := segName(l.dir, p)
	flag := os.O_RDONLY
	if last {
		flag = os.O_RDWR
	}
	f, err := l.fs.OpenFile(name, flag, 0)
	if err != nil {
		return nil, fmt.Errorf("wal: open segment: %w", err)
	}
	size, err := f.Size()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("wal: stat segment %s: %w", name, err)
	}
	s := &segment{start: p, capacity: max(size, l.opts.SegmentBytes)}
	s.end.Store(openEnded)
	s.size.Store(size)
	s.file.Store(newSegFile(f, name))
	return s, nil
}

// recoverTail scans the last segment, finds the end of the log, cuts a torn
// tail, covers mid-log damage with skip records (Repair) and preallocates
// the file again.
func (l *Log) recoverTail(s *segment) error {
	// Walk the valid records, then look at what follows each stop: only
	// zeros means the clean end; anything else is a torn tail or damage.
	sf := s.file.Load()
	size := s.size.Load()
	w := &fileWindow{f: sf.f, size: size}
	l.recovery.Scanned++
	var (
		dmg    []damage
		tail   *damage // the torn tail, if any
		end    int64   // offset of the end of the data
		lastNZ = int64(-2)
	)
	for off := int64(0); ; {
		stop, bad := scanRecords(w, s.start, off)
		end = stop
		if lastNZ == -2 {
			// The last non-zero byte of the file is the same for every
			// later stop, so it is looked for once.
			var err error
			if lastNZ, err = w.lastNonZero(stop); err != nil {
				return fmt.Errorf("wal: scan segment %s: %w", sf.name, err)
			}
		}
		if lastNZ < stop {
			break // clean end
		}
		if bad == "truncated" && !l.opts.Repair {
			// scanRecords: a whole header whose record runs past the
			// end of the file, which no crash leaves (above).
			cerr := &CorruptionError{Segment: s.start, Offset: stop, Pos: s.start + Pos(stop),
				Reason: fmt.Sprintf("truncated: the file ends at offset %d, inside the record at offset %d; a crash does not shorten a "+
					"preallocated segment, so the file was cut short after it was written and the records after the cut are gone; %s",
					size, stop, repairHint)}
			l.recovery.Corruption = cerr
			return cerr
		}
		if bad == "" && stop+headerSize > size {
			bad = "truncated"
		}
		later, err := nextValid(w, s.start, stop, lastNZ)
		if err != nil {
			return fmt.Errorf("wal: scan segment %s: %w", sf.name, err)
		}
		if later < 0 {
			if bad == "" {
				// A zero header, then a recycled file's stale bytes (their
				// checksums are seeded with other positions and never
				// validate): the clean end.
				s.recycled.Store(true) // keep ending writes with a zero header
				break
			}
			tail = &damage{from: stop, to: min(int64(align4(int(lastNZ+1))), size), reason: bad}
			break
		}
		if bad == "" {
			bad = "zeroed bytes in the middle of the data"
		}
		if !l.opts.Repair {
			cerr := &CorruptionError{Segment: s.start, Offset: stop, Pos: s.start + Pos(stop),
				Reason: fmt.Sprintf("%s; a valid record follows at offset %d; %s", bad, later, repairHint)}
			l.recovery.Corruption = cerr
			return cerr
		}
		dmg = append(dmg, damage{from: stop, to: later, reason: bad})
		off = later
	}
	if err := l.applyRepairs(s, w, dmg); err != nil {
		return err
	}
	l.recovery.End = s.start + Pos(end)
	if tail == nil {
		return l.prepareTail(s, size)
	}
	// Cut: truncating drops the garbage; prepareTail then preallocates the
	// file again (zeros from the cut on) and fsyncs, so the cut (and any
	// skip records) are durable before anything new is appended after it.
	l.report(s, w, *tail, true)
	l.recovery.TornTail = true
	l.recovery.CutAt, l.recovery.DroppedBytes = s.start+Pos(end), lastNZ+1-end
	if err := sf.f.Truncate(end); err != nil {
		return fmt.Errorf("wal: cut segment %s: %w", sf.name, err)
	}
	return l.prepareTail(s, end)
}

// prepareTail makes sure the active segment is preallocated and its data
// (including data a crashed process left in the page cache) is durable, so
// that SyncedEnd starts at End.
func (l *Log) prepareTail(s *segment, size int64) error {
	sf := s.file.Load()
	if size < s.capacity {
		if err := sf.f.Preallocate(s.capacity); err != nil {
			return fmt.Errorf("wal: preallocate segment %s: %w", sf.name, err)
		}
	}
	s.size.Store(s.capacity)
	if err := sf.f.Sync(); err != nil {
		return fmt.Errorf("wal: sync segment %s: %w", sf.name, err)
	}
	return nil
}

// scanRecords walks valid records (skip records included) from offset off
// of a segment and returns the offset of the first position that does not
// hold one, and why ("" for a zero header or the end of the window).
func scanRecords(w *fileWindow, start Pos, off int64) (int64, string) {
	for off+headerSize <= w.size {
		h, err := w.get(off, headerSize)
		if err != nil {
			return off, "read error: " + err.Error()
		}
		if isZeroHeader(h) {
			return off, ""
		}
		hi, reason := parseHeader(h)
		if reason != "" {
			return off, reason
		}
		framed := int64(framedSize(hi.n))
		if off+framed > w.size {
			return off, "truncated"
		}
		b, err := w.get(off, int(framed))
		if err != nil {
			return off, "read error: " + err.Error()
		}
		if _, _, _, reason := decodeRecord(start+Pos(off), b); reason != "" {
			return off, reason
		}
		off += framed
	}
	return off, ""
}

// findValidRecord returns the offset of the first valid record at an aligned
// offset in [from, upTo], or -1. The magic is checked before the checksum.
func findValidRecord(w *fileWindow, start Pos, from, upTo int64) (int64, error) {
	for off := from; off <= upTo && off+headerSize <= w.size; off += recordAlign {
		h, err := w.get(off, headerSize)
		if err != nil {
			return -1, err
		}
		if h[6] != recordMagic&0xff || h[7] != recordMagic>>8 {
			continue
		}
		hi, reason := parseHeader(h)
		if reason != "" {
			continue
		}
		framed := int64(framedSize(hi.n))
		if off+framed > w.size {
			continue
		}
		b, err := w.get(off, int(framed))
		if err != nil {
			return -1, err
		}
		if _, _, _, reason := decodeRecord(start+Pos(off), b); reason == "" {
			return off, nil
		}
	}
	return -1, nil
}

// fileWindow reads a file through a sliding buffer, so that a scan makes a
// few large reads instead of one per record.
type fileWindow struct {
	f    File
	size int64  // bytes of the file that may be read
	buf  []byte // file bytes [off, off+len(buf))
	off  int64
}

const windowBytes = 1 << 20

// covers reports whether the window holds the n bytes at off.
func (w *fileWindow) covers(off int64, n int) bool {
	return off >= w.off && off+int64(n) <= w.off+int64(len(w.buf))
}

// get returns n bytes at off, valid until the next call.
func (w *fileWindow) get(off int64, n int) ([]byte, error) {
	if w.covers(off, n) {
		return w.buf[off-w.off : off-w.off+int64(n)], nil
	}
	if off+int64(n) > w.size {
		return nil, io.ErrUnexpectedEOF
	}
	m := int(min(int64(max(n, windowBytes)), w.size-off))
	if cap(w.buf) < m {
		w.buf = make([]byte, m)
	}
	w.buf = w.buf[:m]
	got, err := w.f.ReadAt(w.buf, off)
	if got < m && err != nil && !errors.Is(err, io.EOF) {
		w.buf = w.buf[:0]
		return nil, err
	}
	w.buf, w.off = w.buf[:got], off
	if got < n {
		return nil, io.ErrUnexpectedEOF
	}
	return w.buf[:n], nil
}

// lastNonZero returns the offset of the last non-zero byte at or after from,
// or -1 if the rest of the file is zero.
func (w *fileWindow) lastNonZero(from int64) (int64, error) {
	last := int64(-1)
	for off := from; off < w.size; {
		n := int(min(windowBytes, w.size-off))
		b, err := w.get(off, n)
		if err != nil {
			return -1, err
		}
		if i := lastNonZeroByte(b); i >= 0 {
			last = off + int64(i)
		}
		off += int64(n)
	}
	return last, nil
}

// lastNonZeroByte returns the index of the last non-zero byte of b, or -1;
// it skips zero words eight bytes at a time (segments are mostly zeros).
func lastNonZeroByte(b []byte) int {
	i := len(b)
	for i >= 8 && binary.LittleEndian.Uint64(b[i-8:i]) == 0 {
		i -= 8
	}
	for i > 0 {
		if b[i-1] != 0 {
			return i - 1
		}
		i--
	}
	return -1
}
