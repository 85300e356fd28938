package wal

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// buildLog appends n records to a fresh MemFS log and returns the image
// after a clean Close, or (crash) the power-loss image taken before Close
// (every record was acknowledged: SyncAlways). Sizes vary so that the log
// spans several segments; some records are compressed.
func buildLog(t *testing.T, n int, crash bool, size func(i int) int) (*MemFS, written) {
	t.Helper()
	fs := NewMemFS()
	l := mustOpen(t, crashDir, testOptions(t, fs))
	w := written{payload: map[Pos][]byte{}}
	for i := range n {
		body := testPayload(uint64(i), size(i), i%5 == 0)
		r := appendWait(t, l, RecordType(1+i%7), body)
		w.payload[r.Pos] = body
		w.recs = append(w.recs, r)
	}
	img := fs
	if crash {
		img = fs.CrashClone(nil)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return img, w
}

func repairOptions(t testing.TB, fs FS) Options {
	o := testOptions(t, fs)
	o.Repair = true
	return o
}

// segOf returns the start of the segment holding p, from the image's files.
func segOf(t *testing.T, fs *MemFS, p Pos) Pos {
	t.Helper()
	var start Pos
	for _, name := range fs.Files(crashDir) {
		if q, hole, ok := parseName(name); ok && !hole && q <= p {
			start = q
		}
	}
	return start
}

// flipByte xors one byte of the image at log position p.
func flipByte(t *testing.T, fs *MemFS, p Pos) {
	t.Helper()
	seg := segOf(t, fs, p)
	editFile(t, fs, segName(crashDir, seg), func(f File) {
		b := make([]byte, 1)
		_, _ = f.ReadAt(b, int64(p-seg))
		b[0] ^= 0xff
		_, _ = f.WriteAt(b, int64(p-seg))
	})
}

// reopenClean closes l, reopens the image with and without Repair and
// checks that no damage is found again and that the records are as before
// (invariant 11: a repair is durable).
func reopenClean(t *testing.T, l *Log, fs *MemFS, w written, ranges []RepairedRange) {
	t.Helper()
	end := l.End()
	if err := l.Close(); err != nil {
		t.Fatalf("Close after repair: %v", err)
	}
	for _, repair := range []bool{false, true} {
		o := testOptions(t, fs)
		o.Repair = repair
		l2 := mustOpen(t, crashDir, o)
		rec := l2.Recovery()
		if len(rec.Repairs) != 0 || rec.Corruption != nil || rec.TornTail || rec.Repaired || l2.End() != end {
			t.Fatalf("reopen (repair %v) after repair found damage or moved the end (%d, was %d): %+v", repair, l2.End(), end, rec)
		}
		checkSkipped(t, l2, w, ranges)
		_ = l2.Close()
	}
}

// TestRepairFlipEveryRecord (invariants 7 and 11) flips one byte in each
// record in turn (in its header, its payload middle, its last byte; with
// -short one of the three per record), in an image after a clean close and
// after a crash. Without Repair, damage in
// the last segment fails Open with an error naming the option, damage in an
// older one fails the replay there, and the last record is a torn tail.
// With Repair, Open loses exactly the damaged record: every other record
// keeps its position and payload, the damaged one is reported (with its
// header and payload prefix when they are intact) and never served, appends
// continue at the old end, and a reopen finds nothing more to repair.
func TestRepairFlipEveryRecord(t *testing.T) {
	const n = 70
	size := func(i int) int { return 300 + (i*1777)%4200 }
	for _, crash := range []bool{false, true} {
		fs, w := buildLog(t, n, crash, size)
		if segs := segmentStarts(w); len(segs) < 3 {
			t.Fatalf("want >= 3 segments, got %v", segs)
		}
		lastSeg := segmentStarts(w)[len(segmentStarts(w))-1]
		for i, r := range w.recs {
			for k, where := range []string{"header", "middle", "last"} {
				if testing.Short() && k != i%3 {
					continue // -short: one site per record, in turn
				}
				name := fmt.Sprintf("crash=%v/record%d/%s", crash, i, where)
				off := map[string]int{"header": i % headerSize, "middle": r.Size / 2, "last": r.Size - 1}[where]
				c := fs.CrashClone(nil)
				flipByte(t, c, r.Pos+Pos(off))
				tail := i == n-1
				flipRun(t, name, c, w, r, tail, r.Pos >= lastSeg, where)
			}
		}
	}
}

// asFound reports whether prefix is the start of payload as found on disk
// with the byte at damaged flipped: equal to it but there.
func asFound(payload, prefix []byte, damaged int) bool {
	if len(prefix) > len(payload) {
		return false
	}
	for i := range prefix {
		if (prefix[i] == payload[i]) == (i == damaged) {
			return false
		}
	}
	return true
}

func flipRun(t *testing.T, name string, c *MemFS, w written, r Record, tail, inLast bool, where string) {
	// Without Repair.
	l, err := Open(crashDir, testOptions(t, c.CrashClone(nil)))
	var ce *CorruptionError
	switch {
	case tail:
		if err != nil || !l.Recovery().TornTail || l.Recovery().CutAt != r.Pos {
			t.Fatalf("%s: a damaged last record is a torn tail: %v %+v", name, err, l.Recovery())
		}
	case inLast:
		if !errors.As(err, &ce) || ce.Pos != r.Pos || !strings.Contains(err.Error(), "Options.Repair") ||
			!strings.Contains(err.Error(), "--wal-repair") {
			t.Fatalf("%s: Open without Repair: %v, want *CorruptionError at %d naming the Repair option", name, err, r.Pos)
		}
	default:
		if err != nil {
			t.Fatalf("%s: Open without Repair (old segments are not scanned): %v", name, err)
		}
		if _, _, err := readAll(t, l, 0); !errors.As(err, &ce) || ce.Pos != r.Pos {
			t.Fatalf("%s: replay without Repair: %v, want *CorruptionError at %d", name, err, r.Pos)
		}
	}
	if l != nil {
		_ = l.Close()
	}

	// With Repair.
	l = mustOpen(t, crashDir, repairOptions(t, c))
	rec := l.Recovery()
	if len(rec.Repairs) != 1 {
		t.Fatalf("%s: %d ranges reported, want 1: %+v", name, len(rec.Repairs), rec)
	}
	rr := rec.Repairs[0]
	switch {
	case rr.Start != r.Pos || rr.Cut != tail || rr.Reason == "" || rr.Bytes != int64(rr.End-rr.Start):
		t.Fatalf("%s: range %+v, want start %d cut %v", name, rr, r.Pos, tail)
	case !tail && (rr.End != r.Pos+Pos(r.Size) || !rec.Repaired):
		t.Fatalf("%s: skipped range %+v, want [%d, %d)", name, rr, r.Pos, r.Pos+Pos(r.Size))
	case tail && (l.End() != r.Pos || rr.End > r.Pos+Pos(r.Size)):
		t.Fatalf("%s: cut range %+v, end %d", name, rr, l.End())
	case rec.Corruption == nil || rec.Corruption.Pos != r.Pos:
		t.Fatalf("%s: Corruption %+v", name, rec.Corruption)
	}
	if where == "middle" {
		// The header is intact: the report names the record and gives the
		// start of its stored payload as found.
		stored := w.payload[r.Pos]
		if r.Size != framedSize(len(stored)) {
			stored = nil // compressed: the prefix is s2 bytes
		}
		if len(rr.Lost) == 0 || rr.Lost[0].Pos != r.Pos || rr.Lost[0].Type != r.Type || rr.Lost[0].Size != r.Size ||
			(stored != nil && !asFound(stored, rr.Lost[0].Prefix, r.Size/2-headerSize)) || len(rr.Lost[0].Prefix) == 0 {
			t.Fatalf("%s: lost records %+v, want the record at %d", name, rr.Lost, r.Pos)
		}
	}
	checkSkipped(t, l, w, rec.Repairs)
	if !tail {
		if _, _, err := l.ReadAt(r.Pos, 0, nil); !errors.Is(err, ErrRepaired) || !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: ReadAt of the skipped record: %v", name, err)
		}
	}
	// Appends continue at the end (the old end, unless the tail was cut).
	wantEnd := w.recs[len(w.recs)-1].Pos + Pos(w.recs[len(w.recs)-1].Size)
	if tail {
		wantEnd = r.Pos
	}
	body := []byte("after repair")
	a := appendWait(t, l, 9, body)
	if a.Pos != wantEnd {
		t.Fatalf("%s: append after repair at %d, want %d", name, a.Pos, wantEnd)
	}
	w2 := written{payload: maps(w.payload, a.Pos, body), recs: append(slices.Clone(w.recs), a)}
	ranges := rec.Repairs
	if tail {
		// The cut range's positions were reused by the append.
		w2.recs, ranges = append(slices.Clone(w.recs[:len(w.recs)-1]), a), nil
	}
	reopenClean(t, l, c, w2, ranges)
}

// TestRepairTruncateEveryOffset cuts the last segment at every byte (with
// -short every third byte) of the last records, in an image after a clean close and after a crash, and
// opens it with Repair: exactly the records before the cut survive with
// their positions and payloads, a cut through a record is reported (a torn
// tail, with what is left of its header), appends continue at the cut, and
// a reopen is clean.
func TestRepairTruncateEveryOffset(t *testing.T) {
	size := func(i int) int {
		if i >= 36 {
			return 20 + i
		}
		return 300 + 97*i
	}
	for _, crash := range []bool{false, true} {
		fs, w := buildLog(t, 40, crash, size)
		starts := segmentStarts(w)
		segStart := starts[len(starts)-1]
		last := w.recs[len(w.recs)-1]
		from, to := w.recs[len(w.recs)-4].Pos, last.Pos+Pos(last.Size)
		step := Pos(1)
		if testing.Short() {
			step = 3 // every third offset: still every offset class mod 4
		}
		for cut := from; cut <= to; cut += step {
			c := fs.CrashClone(nil)
			editFile(t, c, segName(crashDir, segStart), func(f File) { _ = f.Truncate(int64(cut - segStart)) })
			// The surviving end is the last record boundary at or before
			// the cut; the record cut through (if any bytes of it remain)
			// is reported.
			end := Pos(0)
			for _, r := range w.recs {
				if r.Pos+Pos(r.Size) <= cut {
					end = r.Pos + Pos(r.Size)
				}
			}
			var remain []byte
			if end < cut {
				editFile(t, c, segName(crashDir, segStart), func(f File) {
					remain = make([]byte, cut-end)
					_, _ = f.ReadAt(remain, int64(end-segStart))
				})
			}
			torn := slices.ContainsFunc(remain, func(b byte) bool { return b != 0 })
			name := fmt.Sprintf("crash=%v/cut%d", crash, cut)

			l := mustOpen(t, crashDir, repairOptions(t, c))
			rec := l.Recovery()
			if torn != (len(rec.Repairs) == 1) || len(rec.Repairs) > 1 || rec.Repaired {
				t.Fatalf("%s: recovery %+v, want torn=%v", name, rec, torn)
			}
			if torn {
				rr := rec.Repairs[0]
				if !rr.Cut || rr.Start != end || !rec.TornTail || rec.CutAt != end {
					t.Fatalf("%s: range %+v, want a cut at %d", name, rr, end)
				}
				// With the whole header left, the report names the record.
				if cut-end >= headerSize && (len(rr.Lost) == 0 || rr.Lost[0].Pos != end || rr.Lost[0].Size != recordAt(w, end).Size) {
					t.Fatalf("%s: lost %+v, want the record at %d", name, rr.Lost, end)
				}
			}
			checkPrefix(t, l, w, end)
			body := testPayload(999, 33, false)
			a := appendWait(t, l, 9, body)
			if a.Pos != end {
				t.Fatalf("%s: append after the cut at %d, want %d", name, a.Pos, end)
			}
			w2 := written{payload: maps(w.payload, a.Pos, body), recs: append(prefixRecs(w.recs, end), a)}
			reopenClean(t, l, c, w2, nil)
		}
	}
}

// TestRepairManyRanges damages several segments at once (a flipped byte in
// the oldest, a zeroed 512-byte sector across records in a middle one, two
// flips in the last one) and a short (cut) older segment file: one Open
// with Repair skips every range, keeps every other record, and reports
// each range in order.
func TestRepairManyRanges(t *testing.T) {
	fs, w := buildLog(t, 200, false, func(i int) int { return 200 + (i*131)%1800 })
	segs := segmentStarts(w)
	if len(segs) < 4 {
		t.Fatalf("want >= 4 segments, got %v", segs)
	}
	c := fs.CrashClone(nil)
	flipByte(t, c, w.recs[3].Pos+20)
	editFile(t, c, segName(crashDir, segs[1]), func(f File) { _, _ = f.WriteAt(make([]byte, 512), 4096) })
	// Segment 2 loses its last 100 bytes.
	editFile(t, c, segName(crashDir, segs[2]), func(f File) { _ = f.Truncate(int64(segs[3]-segs[2]) - 100) })
	n := len(w.recs)
	flipByte(t, c, w.recs[n-5].Pos+15)
	flipByte(t, c, w.recs[n-3].Pos+3)

	if _, err := Open(crashDir, testOptions(t, c.CrashClone(nil))); err == nil {
		t.Fatal("Open without Repair of a log with a short older segment succeeded")
	}
	l := mustOpen(t, crashDir, repairOptions(t, c))
	rec := l.Recovery()
	if rec.Scanned != len(segs) {
		t.Fatalf("scanned %d segments, want %d", rec.Scanned, len(segs))
	}
	var starts []Pos
	for _, r := range rec.Repairs {
		if r.Cut {
			t.Fatalf("range %+v cut", r)
		}
		starts = append(starts, r.Start)
	}
	want := []Pos{w.recs[3].Pos, recordAt(w, segs[1]+4096).Pos, recordAt(w, segs[3]-100).Pos, w.recs[n-5].Pos, w.recs[n-3].Pos}
	if !slices.Equal(starts, want) {
		t.Fatalf("ranges start at %v, want %v", starts, want)
	}
	// The zeroed sector's range ends after the record holding its last byte.
	if r := rec.Repairs[1]; r.End != recordAt(w, segs[1]+4096+511).Pos+Pos(recordAt(w, segs[1]+4096+511).Size) {
		t.Fatalf("zeroed sector range %+v", r)
	}
	checkSkipped(t, l, w, rec.Repairs)
	a := appendWait(t, l, 9, []byte("after"))
	w2 := written{payload: maps(w.payload, a.Pos, []byte("after")), recs: append(slices.Clone(w.recs), a)}
	reopenClean(t, l, c, w2, rec.Repairs)
}

// TestSkipPieces: a damaged range of any length >= 12 is covered exactly by
// skip records of 12..MaxPayload+12 bytes.
func TestSkipPieces(t *testing.T) {
	for _, n := range []int64{12, 16, 4096, maxSkipFramed - 4, maxSkipFramed, maxSkipFramed + 4, maxSkipFramed + 8,
		maxSkipFramed + 12, 2*maxSkipFramed + 4, 3*maxSkipFramed + 100} {
		var sum int64
		for _, p := range skipPieces(1000, 1000+n) {
			if p < headerSize || p > maxSkipFramed || p%recordAlign != 0 {
				t.Fatalf("range %d: piece %d", n, p)
			}
			sum += p
		}
		if sum != n {
			t.Fatalf("range %d: pieces sum to %d", n, sum)
		}
	}
}

// TestSkipToAndReplayStart: SkipTo moves the end past a position with skip
// records (across a segment roll), which readers pass over and ReadAt
// reports as lost; ReplayStart maps a position inside a skipped range to
// the first record after it, and keeps record boundaries as they are.
func TestSkipToAndReplayStart(t *testing.T) {
	fs := NewMemFS()
	l := mustOpen(t, crashDir, testOptions(t, fs))
	w := written{payload: map[Pos][]byte{}}
	add := func(i int) {
		body := testPayload(uint64(i), 700, false)
		r := appendWait(t, l, 1, body)
		w.payload[r.Pos] = body
		w.recs = append(w.recs, r)
	}
	for i := range 60 {
		add(i)
	}
	skipFrom := l.End()
	target := skipFrom + MinSegmentBytes + 6 // crosses a roll; not aligned
	end, err := l.SkipTo(target)
	if err != nil || end < target || end > target+headerSize {
		t.Fatalf("SkipTo(%d) = %d, %v", target, end, err)
	}
	if got, err := l.SkipTo(skipFrom); err != nil || got != end {
		t.Fatalf("SkipTo backwards = %d, %v", got, err)
	}
	add(60)
	if w.recs[60].Pos != end {
		t.Fatalf("append after SkipTo at %d, want %d", w.recs[60].Pos, end)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	skipped := []RepairedRange{{Start: skipFrom, End: end}}
	checkSkipped(t, l, w, skipped)
	if _, _, err := l.ReadAt(skipFrom, 0, nil); !errors.Is(err, ErrRepaired) {
		t.Fatalf("ReadAt of a skip record: %v", err)
	}
	check := func(l *Log) {
		t.Helper()
		for _, tc := range []struct{ p, want Pos }{
			{w.recs[10].Pos, w.recs[10].Pos},
			{skipFrom, end},
			{skipFrom + 100, end},
			{target, end},
			{end, end},
			{l.WrittenEnd(), l.WrittenEnd()},
		} {
			// got is a boundary in [p, want] from which a replay's first
			// record is the one at want (skip records lie in between).
			got, err := l.ReplayStart(tc.p)
			if err != nil || got < tc.p || got > tc.want {
				t.Fatalf("ReplayStart(%d) = %d, %v; want at most %d", tc.p, got, err, tc.want)
			}
			_, order, err := readAll(t, l, got)
			if err != nil || (tc.want < l.WrittenEnd() && (len(order) == 0 || order[0] != tc.want)) {
				t.Fatalf("replay from ReplayStart(%d) = %d starts at %v (%v), want %d", tc.p, got, head(order), err, tc.want)
			}
		}
		var ce *CorruptionError
		if _, err := l.ReplayStart(w.recs[10].Pos + 8); !errors.As(err, &ce) {
			t.Fatalf("ReplayStart inside a record: %v", err)
		}
		if _, err := l.ReplayStart(l.WrittenEnd() + 4); !errors.Is(err, ErrOutOfRange) {
			t.Fatalf("ReplayStart beyond the end: %v", err)
		}
	}
	check(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, crashDir, repairOptions(t, fs))
	defer l.Close()
	if rec := l.Recovery(); len(rec.Repairs) != 0 {
		t.Fatalf("skip records reported as damage: %+v", rec)
	}
	checkSkipped(t, l, w, skipped)
	check(l)
}
