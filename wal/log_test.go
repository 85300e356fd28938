package wal

import (
	"bytes"
	"errors"
	"math"
	"os"
	"slices"
	"testing"
	"time"
)

func TestSmoke(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncInterval, SyncNone} {
		t.Run(mode.String(), func(t *testing.T) {
			for _, fsName := range []string{"mem", "os"} {
				t.Run(fsName, func(t *testing.T) {
					var fs FS = NewMemFS()
					if fsName == "os" {
						fs = OSFS()
					}
					dir := t.TempDir()
					opts := testOptions(t, fs)
					opts.Sync = mode
					l := mustOpen(t, dir, opts)
					var recs []Record
					for i := range 200 {
						n := (i * 37) % 3000
						recs = append(recs, appendWait(t, l, RecordType(1+i%200), testPayload(uint64(i), n, i%3 == 0)))
					}
					for i, r := range recs {
						typ, got, err := l.ReadAt(r.Pos, 0, nil)
						if err != nil || typ != RecordType(1+i%200) || !bytes.Equal(got, testPayload(uint64(i), (i*37)%3000, i%3 == 0)) {
							t.Fatalf("ReadAt %d: typ %d err %v", i, typ, err)
						}
					}
					if err := l.Close(); err != nil {
						t.Fatal(err)
					}
					if err := l.Close(); !errors.Is(err, ErrClosed) {
						t.Fatalf("second close: %v", err)
					}
					l = mustOpen(t, dir, opts)
					defer l.Close()
					for i, r := range recs {
						typ, got, err := l.ReadAt(r.Pos, r.Size, nil)
						if err != nil || typ != RecordType(1+i%200) || !bytes.Equal(got, testPayload(uint64(i), (i*37)%3000, i%3 == 0)) {
							t.Fatalf("ReadAt after reopen %d: typ %d err %v", i, typ, err)
						}
					}
					m, order, err := readAll(t, l, 0)
					if err != nil || len(m) != len(recs) || len(order) != len(recs) {
						t.Fatalf("readAll: %d records, err %v", len(m), err)
					}
					t.Logf("segments %+v stats %+v", l.Segments(), l.Stats())
				})
			}
		})
	}
}

func TestOptions(t *testing.T) {
	d := DefaultOptions()
	if d.SegmentBytes != 64<<20 || d.SyncInterval != time.Second || d.BufferBytes != 32<<20 ||
		d.CompressMinBytes != 4096 || d.Sync != SyncAlways || d.FS == nil || d.Logger == nil {
		t.Fatalf("defaults: %+v", d)
	}
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"small segment", Options{SegmentBytes: 4096}},
		{"unaligned segment", Options{SegmentBytes: MinSegmentBytes + 100}},
		{"bad mode", Options{Sync: 7}},
		{"negative interval", Options{SyncInterval: -1}},
		{"small buffer", Options{BufferBytes: 1000}},
	} {
		if err := tc.o.Validate(); !errors.Is(err, ErrBadOptions) {
			t.Errorf("%s: Validate() = %v", tc.name, err)
		}
		if _, err := Open(t.TempDir(), tc.o); !errors.Is(err, ErrBadOptions) {
			t.Errorf("%s: Open() = %v", tc.name, err)
		}
	}
	for _, m := range []SyncMode{SyncAlways, SyncInterval, SyncNone} {
		if got, err := ParseSyncMode(m.String()); err != nil || got != m {
			t.Errorf("ParseSyncMode(%q) = %v, %v", m.String(), got, err)
		}
	}
	if _, err := ParseSyncMode("sometimes"); !errors.Is(err, ErrBadOptions) {
		t.Errorf("ParseSyncMode(sometimes) = %v", err)
	}
}

// MaxRecord is the largest payload Append takes, whichever of the segment
// and the ring bounds it: one byte more is ErrRecordTooLarge. The engine
// refuses a message that would need more (engine Queue.Send).
func TestMaxRecord(t *testing.T) {
	for _, c := range []struct {
		segment int64
		ring    int
	}{{MinSegmentBytes, 1 << 20}, {1 << 20, minBufferBytes}, {1 << 20, minBufferBytes + 2}} {
		o := testOptions(t, NewMemFS())
		o.SegmentBytes, o.BufferBytes, o.CompressMinBytes = c.segment, c.ring, -1
		l := mustOpen(t, crashDir, o)
		max := l.MaxRecord()
		if err := l.Append([]Record{{Type: 1, Body: make([]byte, max+1)}}); !errors.Is(err, ErrRecordTooLarge) {
			t.Errorf("segment %d, ring %d: a record of MaxRecord+1 = %d bytes: %v", c.segment, c.ring, max+1, err)
		}
		r := appendWait(t, l, 1, testPayload(1, max, false))
		if _, got, err := l.ReadAt(r.Pos, 0, nil); err != nil || len(got) != max {
			t.Errorf("segment %d, ring %d: a record of MaxRecord = %d bytes: %d read, %v", c.segment, c.ring, max, len(got), err)
		}
		l.Close()
	}
}

func TestAppendErrors(t *testing.T) {
	l := mustOpen(t, crashDir, testOptions(t, NewMemFS()))
	defer l.Close()
	if err := l.Append([]Record{{Type: 0, Body: []byte("x")}}); !errors.Is(err, ErrInvalidType) {
		t.Errorf("type 0: %v", err)
	}
	big := make([]byte, MinSegmentBytes-headerSize+1)
	if err := l.Append([]Record{{Type: 1, Body: big}}); !errors.Is(err, ErrRecordTooLarge) {
		t.Errorf("over SegmentBytes-12: %v", err)
	}
	// The largest record fits in an (empty) segment.
	max := testPayload(1, MinSegmentBytes-headerSize, false)
	r := appendWait(t, l, 1, max)
	if _, got, err := l.ReadAt(r.Pos, 0, nil); err != nil || !bytes.Equal(got, max) {
		t.Errorf("largest record: %v", err)
	}
	// A batch larger than the ring (256 KiB) is appended whole, its
	// records back to back (invariant 12; large_test.go).
	batch := make([]Record, 5)
	for i := range batch {
		batch[i] = Record{Type: 1, Body: testPayload(uint64(i), 60000, false)}
	}
	if err := l.Append(batch); err != nil || l.End() != batch[4].Pos+Pos(batch[4].Size) {
		t.Errorf("batch over the buffer: %v", err)
	}
	if err := l.Append(nil); err != nil {
		t.Errorf("empty append: %v", err)
	}
	if err := l.WaitDurable(l.End() + 100); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("WaitDurable beyond end: %v", err)
	}
	if _, _, err := l.ReadAt(l.End(), 0, nil); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("ReadAt at end: %v", err)
	}
	if _, err := l.NewReader(0, l.End()+4); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("NewReader beyond end: %v", err)
	}
}

func TestClosed(t *testing.T) {
	l := mustOpen(t, crashDir, testOptions(t, NewMemFS()))
	r := appendWait(t, l, 1, []byte("x"))
	rd, _ := l.NewReader(0, l.WrittenEnd())
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	checks := map[string]error{
		"Append":      l.Append([]Record{{Type: 1}}),
		"WaitDurable": l.WaitDurable(r.Pos),
		"Sync":        l.Sync(),
		"RemoveSeg":   l.RemoveSegment(0),
		"Close":       l.Close(),
		"ReaderNext":  func() error { _, _, _, err := rd.Next(); return err }(),
		"ReadAt":      func() error { _, _, err := l.ReadAt(r.Pos, 0, nil); return err }(),
		"NewReader":   func() error { _, err := l.NewReader(0, 0); return err }(),
	}
	for name, err := range checks {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v", name, err)
		}
	}
}

// gateFS blocks WriteAt on segment files while the gate is closed.
type gateFS struct {
	FS
	gate chan struct{}
}

type gateFile struct {
	File
	gate chan struct{}
}

func (g *gateFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := g.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &gateFile{File: f, gate: g.gate}, nil
}

func (g *gateFile) WriteAt(p []byte, off int64) (int, error) {
	<-g.gate
	return g.File.WriteAt(p, off)
}

// TestBackPressure checks invariant 5: unwritten bytes stay in the ring
// and Append waits instead of overwriting them.
func TestBackPressure(t *testing.T) {
	gfs := &gateFS{FS: NewMemFS(), gate: make(chan struct{})}
	opts := testOptions(t, gfs)
	opts.SegmentBytes = 1 << 20
	l := mustOpen(t, crashDir, opts)
	defer l.Close()
	// 256 KiB ring: 60 records of 4 KiB fit, the 70th must wait.
	var recs []Record
	for i := range 60 {
		rs := []Record{{Type: 1, Body: testPayload(uint64(i), 4000, false)}}
		if err := l.Append(rs); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rs[0])
	}
	// Unwritten records are served from the ring.
	if _, got, err := l.ReadAt(recs[10].Pos, 0, nil); err != nil || !bytes.Equal(got, recs[10].Body) {
		t.Fatalf("ring read of an unwritten record: %v", err)
	}
	if l.WrittenEnd() != 0 {
		t.Fatalf("written %d with the gate closed", l.WrittenEnd())
	}
	blocked := make(chan error)
	go func() {
		var err error
		for i := 60; i < 70 && err == nil; i++ {
			err = l.Append([]Record{{Type: 1, Body: testPayload(uint64(i), 4000, false)}})
		}
		blocked <- err
	}()
	waitUntil(t, 10*time.Second, "an append to stall", func() bool { return l.Stats().AppendStalls > 0 })
	if l.End()-l.WrittenEnd() > Pos(opts.BufferBytes) {
		t.Fatalf("unwritten span %d exceeds the buffer", l.End()-l.WrittenEnd())
	}
	close(gfs.gate)
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil || l.SyncedEnd() != l.End() {
		t.Fatalf("Sync: %v (synced %d end %d)", err, l.SyncedEnd(), l.End())
	}
}

func TestSyncModes(t *testing.T) {
	t.Run("none", func(t *testing.T) {
		opts := testOptions(t, NewMemFS())
		opts.Sync = SyncNone
		l := mustOpen(t, crashDir, opts)
		defer l.Close()
		r := appendWait(t, l, 1, []byte("x"))
		if l.WrittenEnd() <= r.Pos {
			t.Fatal("WaitDurable returned before the write")
		}
		if err := l.Sync(); err != nil || l.SyncedEnd() != l.End() {
			t.Fatalf("Sync: %v", err)
		}
	})
	t.Run("interval", func(t *testing.T) {
		opts := testOptions(t, NewMemFS())
		opts.Sync = SyncInterval
		opts.SyncInterval = 5 * time.Millisecond
		l := mustOpen(t, crashDir, opts)
		defer l.Close()
		appendWait(t, l, 1, []byte("x"))
		// No further append: the timer must fsync on its own.
		waitUntil(t, 10*time.Second, "the interval fsync", func() bool { return l.SyncedEnd() == l.End() })
	})
	t.Run("always", func(t *testing.T) {
		l := mustOpen(t, crashDir, testOptions(t, NewMemFS()))
		defer l.Close()
		r := appendWait(t, l, 1, []byte("x"))
		if l.SyncedEnd() <= r.Pos {
			t.Fatal("WaitDurable returned before the fsync")
		}
	})
	t.Run("always/nobody-waits", func(t *testing.T) {
		// Records nobody waits for (receives) are written and fsynced by
		// the writer on its own, within lazySyncDelay of the first.
		l := mustOpen(t, crashDir, testOptions(t, NewMemFS()))
		defer l.Close()
		for i := range 3 {
			if err := l.Append([]Record{{Type: 1, Body: []byte{byte(i)}}}); err != nil {
				t.Fatal(err)
			}
		}
		waitUntil(t, 10*time.Second, "the lazy fsync", func() bool { return l.SyncedEnd() == l.End() })
	})
}

func TestCompressionEndToEnd(t *testing.T) {
	for _, min := range []int{0, -1} {
		fs := NewMemFS()
		opts := testOptions(t, fs)
		opts.CompressMinBytes = min
		l := mustOpen(t, crashDir, opts)
		body := bytes.Repeat([]byte("a queue message that compresses well. "), 300)
		head := []byte("head:")
		recs := []Record{{Type: 4, Head: head, Body: body}, {Type: 5, Body: testPayload(1, 9000, false)}}
		if err := l.Append(recs); err != nil {
			t.Fatal(err)
		}
		want := append(slices.Clone(head), body...)
		compressed := recs[0].Size < len(want)/2
		if compressed != (min == 0) || recs[1].Size != framedSize(9000) {
			t.Fatalf("min %d: sizes %d %d", min, recs[0].Size, recs[1].Size)
		}
		if _, got, err := l.ReadAt(recs[0].Pos, 0, nil); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("ring read: %v", err)
		}
		_ = l.Close()
		l = mustOpen(t, crashDir, opts)
		for _, hint := range []int{0, recs[0].Size, 20} {
			buf := make([]byte, 0, 10)
			if typ, got, err := l.ReadAt(recs[0].Pos, hint, buf); err != nil || typ != 4 || !bytes.Equal(got, want) {
				t.Fatalf("file read (hint %d): %v", hint, err)
			}
		}
		m, _, err := readAll(t, l, 0)
		if err != nil || !bytes.Equal(m[recs[0].Pos], want) || !bytes.Equal(m[recs[1].Pos], recs[1].Body) {
			t.Fatalf("replay: %v", err)
		}
		if st := l.Stats(); st.FileReads == 0 {
			t.Fatalf("stats: %+v", st)
		}
		_ = l.Close()
	}
}

func TestStats(t *testing.T) {
	l := mustOpen(t, crashDir, testOptions(t, NewMemFS()))
	defer l.Close()
	for i := range 20 {
		appendWait(t, l, 1, testPayload(uint64(i), 100, false))
	}
	st := l.Stats()
	if st.Records != 20 || st.PayloadBytes != 2000 || st.Bytes != 20*uint64(framedSize(100)) ||
		st.Writes == 0 || st.Fsyncs == 0 || st.WriteCalls < st.Writes {
		t.Fatalf("stats %+v", st)
	}
	for _, h := range []Histogram{st.FsyncSeconds, st.BatchRecords} {
		var n uint64
		for _, c := range h.Counts {
			n += c
		}
		if n != h.Count || len(h.Counts) != len(h.Bounds) || !math.IsInf(h.Bounds[len(h.Bounds)-1], 1) {
			t.Fatalf("histogram %+v", h)
		}
	}
	if st.BatchRecords.Sum != 20 {
		t.Fatalf("batch histogram sums to %v records", st.BatchRecords.Sum)
	}
}
