package wal

import (
	"bytes"
	"errors"
	"os"
	"testing"
	"time"
)

// appendMixed appends batches of records of varied sizes, types and
// compressibility and returns them with their positions and sizes.
func appendMixed(t *testing.T, l *Log, batches int) []Record {
	t.Helper()
	var all []Record
	seed := uint64(1)
	for b := 0; b < batches; b++ {
		batch := make([]Record, 1+b%16)
		for i := range batch {
			n := 1 + (b*131+i*977)%3000
			batch[i] = Record{Type: RecordType(1 + i%5), Body: testPayload(seed, n, i%3 == 0)}
			seed++
		}
		if err := l.Append(batch); err != nil {
			t.Fatal(err)
		}
		all = append(all, batch...)
	}
	return all
}

// runs splits recs into runs of back-to-back records of at most max each.
func runs(recs []Record, max int) [][2]int {
	var out [][2]int
	for start := 0; start < len(recs); {
		end := start + 1
		for end < len(recs) && end-start < max && recs[end].Pos == recs[end-1].Pos+Pos(recs[end-1].Size) {
			end++
		}
		out = append(out, [2]int{start, end})
		start = end
	}
	return out
}

func sizesOf(recs []Record) []int {
	s := make([]int, len(recs))
	for i := range recs {
		s[i] = recs[i].Size
	}
	return s
}

// TestReadRun: every run of back-to-back records reads back exactly, whether
// it is still only in the ring, in the files, compressed or not, and with
// runs longer than one read.
func TestReadRun(t *testing.T) {
	opts := testOptions(t, OSFS())
	opts.SegmentBytes = 256 << 10
	opts.CompressMinBytes = 512
	l := mustOpen(t, t.TempDir(), opts)
	defer l.Close()
	recs := appendMixed(t, l, 120)
	check := func(max int) {
		t.Helper()
		var buf []byte
		for _, r := range runs(recs, max) {
			run := recs[r[0]:r[1]]
			seen := 0
			var err error
			buf, err = l.ReadRun(run[0].Pos, sizesOf(run), buf, func(i int, typ RecordType, payload []byte) {
				if i != seen || typ != run[i].Type || !bytes.Equal(payload, run[i].Body) {
					t.Fatalf("run at %d, record %d (call %d): type %d, %d bytes; want type %d, %d bytes",
						run[0].Pos, i, seen, typ, len(payload), run[i].Type, len(run[i].Body))
				}
				seen++
			})
			if err != nil || seen != len(run) {
				t.Fatalf("run at %d of %d records: %d read, %v", run[0].Pos, len(run), seen, err)
			}
		}
	}
	check(16) // right after the append: partly from the ring
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	check(16)
	check(1 << 20) // runs above maxRunBytes are split
	if n := len(runs(recs, 1<<20)); n >= len(recs)/4 {
		t.Fatalf("%d runs for %d records: the test does not exercise long runs", n, len(recs))
	}
}

// TestReadRunCorruption: a damaged record in the middle of a run ends it
// with a CorruptionError: the records before it are delivered, it and those
// after it are not; a framed size that disagrees with the header is
// corruption too.
func TestReadRunCorruption(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions(t, OSFS())
	opts.SegmentBytes = 256 << 10
	l := mustOpen(t, dir, opts)
	defer l.Close()
	recs := appendMixed(t, l, 60)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	var run []Record
	for _, r := range runs(recs, 16) {
		if r[1]-r[0] >= 8 && l.Segments()[0].Start <= recs[r[0]].Pos {
			run = recs[r[0]:r[1]]
			break
		}
	}
	if run == nil {
		t.Fatal("no run of 8 records")
	}
	read := func(sizes []int) (int, error) {
		seen := 0
		_, err := l.ReadRun(run[0].Pos, sizes, nil, func(i int, _ RecordType, payload []byte) {
			if !bytes.Equal(payload, run[i].Body) {
				t.Fatalf("record %d: wrong payload", i)
			}
			seen++
		})
		return seen, err
	}

	// A size that disagrees with the record's header.
	sizes := sizesOf(run)
	sizes[3] += 4
	var ce *CorruptionError
	if seen, err := read(sizes); !errors.As(err, &ce) || seen != 3 {
		t.Fatalf("wrong size: %d delivered, %v", seen, err)
	}

	// A flipped bit in record 5's payload, on disk.
	seg := l.Segments()[0]
	for _, s := range l.Segments() {
		if s.Start <= run[5].Pos {
			seg = s
		}
	}
	f, err := os.OpenFile(segName(dir, seg.Start), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	off := int64(run[5].Pos-seg.Start) + headerSize + 1
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if seen, err := read(sizesOf(run)); !errors.As(err, &ce) || seen != 5 {
		t.Fatalf("flipped bit: %d delivered, %v", seen, err)
	}
}

// FuzzReadRun: ReadRun over a run of records whose segment bytes were
// patched and whose sizes may be wrong never panics, delivers records in
// order without gaps, and delivers every untouched record of the run before
// the first damaged one exactly as it was appended.
func FuzzReadRun(f *testing.F) {
	f.Add(uint16(0), []byte{}, uint8(0), int8(0))
	f.Add(uint16(100), []byte{0xff}, uint8(2), int8(0))
	f.Add(uint16(3000), []byte("garbage in the middle"), uint8(5), int8(4))
	f.Add(uint16(20), []byte{0, 0, 0, 0, 0, 0, 0, 0}, uint8(1), int8(-4))
	f.Fuzz(func(t *testing.T, at uint16, patch []byte, which uint8, delta int8) {
		if len(patch) > 4096 {
			return
		}
		fs := NewMemFS()
		opts := Options{FS: fs, SegmentBytes: MinSegmentBytes, BufferBytes: MinSegmentBytes}
		l, err := Open("/run", opts)
		if err != nil {
			t.Fatal(err)
		}
		recs := make([]Record, 8)
		for i := range recs {
			recs[i] = Record{Type: RecordType(1 + i), Body: testPayload(uint64(i), 100+i*700, i%2 == 0)}
		}
		if err := l.Append(recs); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		// Reopen: the ring starts empty, so ReadRun reads the file.
		if l, err = Open("/run", opts); err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		start := recs[0].Pos
		seg := l.Segments()[0].Start
		f, err := fs.OpenFile(segName("/run", seg), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		off := int64(start-seg) + int64(at)%8192
		if _, err := f.WriteAt(patch, off); err != nil {
			t.Fatal(err)
		}
		f.Close()
		sizes := sizesOf(recs)
		bad := int(which) % len(sizes)
		sizes[bad] = max(headerSize, sizes[bad]+int(delta)*4)
		next := 0
		_, err = l.ReadRun(start, sizes, nil, func(i int, typ RecordType, payload []byte) {
			if i != next {
				t.Fatalf("record %d delivered after %d", i, next-1)
			}
			next++
			r := recs[i]
			lo, hi := int64(r.Pos-seg), int64(r.Pos-seg)+int64(r.Size)
			touched := len(patch) > 0 && off < hi && off+int64(len(patch)) > lo
			if !touched && (typ != r.Type || !bytes.Equal(payload, r.Body)) {
				t.Fatalf("untouched record %d: type %d, %d bytes; want type %d, %d bytes", i, typ, len(payload), r.Type, len(r.Body))
			}
		})
		if err == nil && next != len(sizes) {
			t.Fatalf("no error, but %d of %d records delivered", next, len(sizes))
		}
		if delta != 0 && err == nil && sizes[bad] != recs[bad].Size {
			t.Fatalf("record %d read with a wrong size (%d, not %d) and no error", bad, sizes[bad], recs[bad].Size)
		}
	})
}

// TestReaderFromRing: a Reader serves the records it reads next from the
// ring when the ring still holds them all, and from the files otherwise,
// with the same records either way. Ranges start anywhere in a log four
// times the ring's size, across segments, compressed records included.
func TestReaderFromRing(t *testing.T) {
	opts := testOptions(t, OSFS())
	opts.CompressMinBytes = 512
	l := mustOpen(t, t.TempDir(), opts)
	defer l.Close()
	var recs []Record
	for len(recs) == 0 || int(l.End()) < 4*opts.BufferBytes {
		recs = append(recs, appendMixed(t, l, 40)...)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	low := l.ringLow()
	ringRange, fileRange := 0, 0
	for i := 0; i < len(recs); i += 1 + i%7 {
		j := min(len(recs), i+1+(i*37)%60)
		to := l.WrittenEnd()
		if j < len(recs) {
			to = recs[j].Pos
		}
		before := l.Stats().ReaderRingReads
		rd, err := l.NewReader(recs[i].Pos, to)
		if err != nil {
			t.Fatal(err)
		}
		for k := i; k < j; k++ {
			p, typ, payload, err := rd.Next()
			if err != nil {
				t.Fatalf("range from record %d: record %d at %d: %v", i, k, recs[k].Pos, err)
			}
			if p != recs[k].Pos || typ != recs[k].Type || !bytes.Equal(payload, recs[k].Body) {
				t.Fatalf("range from record %d: record %d read as pos %d type %d (%d bytes), want pos %d type %d (%d bytes)",
					i, k, p, typ, len(payload), recs[k].Pos, recs[k].Type, len(recs[k].Body))
			}
		}
		rd.Close()
		fromRing := l.Stats().ReaderRingReads > before
		switch {
		case recs[i].Pos >= low && !fromRing:
			t.Fatalf("range [%d, %d) is in the ring (from %d) but was read from the files", recs[i].Pos, to, low)
		case recs[i].Pos < low && fromRing && (j == len(recs) || recs[j-1].Pos < low):
			t.Fatalf("range [%d, %d) was served from the ring, which holds only from %d", recs[i].Pos, to, low)
		}
		if fromRing {
			ringRange++
		} else {
			fileRange++
		}
	}
	if ringRange == 0 || fileRange == 0 {
		t.Fatalf("%d ranges read from the ring and %d from the files: the test covers both", ringRange, fileRange)
	}
}

// TestWaitWrittenInEveryMode: WaitWritten returns once the record is
// written, in every sync mode; in SyncAlways the writer otherwise wakes
// only those who wait for an fsync.
func TestWaitWrittenInEveryMode(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncInterval, SyncNone} {
		opts := testOptions(t, OSFS())
		opts.Sync = mode
		l := mustOpen(t, t.TempDir(), opts)
		for i := range 200 {
			recs := []Record{{Type: 1, Body: testPayload(uint64(i), 100, false)}}
			if err := l.Append(recs); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- l.WaitWritten(recs[0].Pos) }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("%v: WaitWritten: %v", mode, err)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("%v: WaitWritten(%d) has not returned after 30 s (written end %d)", mode, recs[0].Pos, l.WrittenEnd())
			}
			if l.WrittenEnd() <= recs[0].Pos {
				t.Fatalf("%v: WaitWritten returned with the written end %d not past %d", mode, l.WrittenEnd(), recs[0].Pos)
			}
		}
		l.Close()
	}
}
