package wal

import (
	"bytes"
	"errors"
	"io"
	"os"
	"slices"
	"testing"
)

// appendMany appends n records of size bytes and returns them and the bodies.
func appendMany(t *testing.T, l *Log, n, size int) ([]Record, [][]byte) {
	t.Helper()
	var recs []Record
	var bodies [][]byte
	for i := range n {
		b := testPayload(uint64(len(recs)+i*7919), size, false)
		recs = append(recs, appendWait(t, l, 3, b))
		bodies = append(bodies, b)
	}
	return recs, bodies
}

// checkSegments checks invariant 1 on Segments(): contiguous, the last one
// active, records inside their segment, rolls only when a record did not fit.
func checkSegments(t *testing.T, l *Log, recs []Record) []SegmentInfo {
	t.Helper()
	segs := l.Segments()
	for i, s := range segs {
		if s.Active != (i == len(segs)-1) {
			t.Fatalf("segment %d active=%v", i, s.Active)
		}
		if i > 0 && segs[i-1].End != s.Start {
			t.Fatalf("segments not contiguous: %+v then %+v", segs[i-1], s)
		}
	}
	if last := segs[len(segs)-1]; last.End != l.End() {
		t.Fatalf("active segment ends at %d, log at %d", last.End, l.End())
	}
	for _, r := range recs {
		i := slices.IndexFunc(segs, func(s SegmentInfo) bool { return r.Pos >= s.Start && r.Pos < s.End })
		if i < 0 {
			continue // removed
		}
		if r.Pos+Pos(r.Size) > segs[i].End || int64(r.Pos-segs[i].Start)+int64(r.Size) > segs[i].FileBytes {
			t.Fatalf("record [%d,+%d) spans past segment %+v", r.Pos, r.Size, segs[i])
		}
		if next := r.Pos + Pos(r.Size); i+1 < len(segs) && next == segs[i].End {
			// The next record went to a new segment only if it did not fit.
			for _, r2 := range recs {
				if r2.Pos == next && int64(next-segs[i].Start)+int64(r2.Size) <= segs[i].FileBytes {
					t.Fatalf("rolled at %d although the next record fit", next)
				}
			}
		}
	}
	return segs
}

func TestSegmentRoll(t *testing.T) {
	fs := NewMemFS()
	l := mustOpen(t, crashDir, testOptions(t, fs))
	recs, bodies := appendMany(t, l, 100, 3000) // ~4.7 segments
	segs := checkSegments(t, l, recs)
	if len(segs) < 4 {
		t.Fatalf("want >= 4 segments, got %d", len(segs))
	}
	// Every rolled segment has a file named by its start; the spare is there.
	files := fs.Files(crashDir)
	for _, s := range segs {
		if !slices.Contains(files, segName("", s.Start)) {
			t.Fatalf("no file for segment %x in %v", s.Start, files)
		}
		if s.FileBytes != MinSegmentBytes {
			t.Fatalf("segment %x is %d bytes, want preallocated %d", s.Start, s.FileBytes, MinSegmentBytes)
		}
	}
	if st := l.Stats(); st.Rolls != uint64(len(segs)-1) {
		t.Fatalf("%d rolls, %d segments", st.Rolls, len(segs))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, f := range fs.Files(crashDir) {
		if _, _, ok := parseName(f); !ok {
			t.Fatalf("file %s left after Close", f)
		}
	}
	l = mustOpen(t, crashDir, testOptions(t, fs))
	defer l.Close()
	if got := l.Segments(); len(got) != len(segs) || got[len(got)-1].Start != segs[len(segs)-1].Start {
		t.Fatalf("after reopen: %+v, want %+v", got, segs)
	}
	m, _, err := readAll(t, l, 0)
	if err != nil || len(m) != len(recs) {
		t.Fatalf("replay: %d records, %v", len(m), err)
	}
	for i, r := range recs {
		if !bytes.Equal(m[r.Pos], bodies[i]) {
			t.Fatalf("record %d differs", i)
		}
	}
	// Appends continue in the last segment and roll again.
	more, _ := appendMany(t, l, 40, 3000)
	checkSegments(t, l, append(recs, more...))
}

func TestAddLive(t *testing.T) {
	l := mustOpen(t, crashDir, testOptions(t, NewMemFS()))
	defer l.Close()
	recs, _ := appendMany(t, l, 60, 3000)
	segs := l.Segments()
	want := make([]int64, len(segs))
	for _, r := range recs {
		l.AddLive(r.Pos, int64(r.Size))
		for i, s := range segs {
			if r.Pos >= s.Start && r.Pos < s.End {
				want[i] += int64(r.Size)
			}
		}
	}
	l.AddLive(recs[0].Pos, -10)
	want[0] -= 10
	for i, s := range l.Segments() {
		if s.Live != want[i] {
			t.Fatalf("segment %d live %d, want %d", i, s.Live, want[i])
		}
	}
	if err := l.RemoveSegment(segs[0].Start); err != nil {
		t.Fatal(err)
	}
	l.AddLive(recs[0].Pos, 1000) // removed: ignored
	if got := l.Segments(); got[0].Start != segs[1].Start || got[0].Live != want[1] {
		t.Fatalf("after removal: %+v", got[0])
	}
}

func TestRemoveSegment(t *testing.T) {
	for _, fsName := range []string{"mem", "os"} {
		t.Run(fsName, func(t *testing.T) {
			var fs FS = NewMemFS()
			dir := crashDir
			if fsName == "os" {
				fs, dir = OSFS(), t.TempDir()
			}
			opts := testOptions(t, fs)
			l := mustOpen(t, dir, opts)
			recs, bodies := appendMany(t, l, 100, 3000)
			segs := l.Segments()

			// Invariant 9. A read in flight: a Reader that has started on
			// segment 0.
			rd, err := l.NewReader(0, segs[1].Start)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, _, err := rd.Next(); err != nil {
				t.Fatal(err)
			}
			if err := l.RemoveSegment(segs[0].Start); err != nil {
				t.Fatal(err)
			}
			n := 1
			for {
				_, _, _, err := rd.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("read in flight failed after removal: %v", err)
				}
				n++
			}
			_ = rd.Close()
			if n < 10 {
				t.Fatalf("in-flight reader read only %d records", n)
			}
			// Later reads of the removed segment fail.
			if _, _, err := l.ReadAt(recs[0].Pos, 0, nil); !errors.Is(err, ErrSegmentRemoved) {
				t.Fatalf("ReadAt removed: %v", err)
			}
			if r, err := l.NewReader(0, l.WrittenEnd()); err != nil {
				t.Fatal(err)
			} else if _, _, _, err := r.Next(); !errors.Is(err, ErrSegmentRemoved) {
				t.Fatalf("Reader on removed: %v", err)
			}
			if err := l.RemoveSegment(segs[len(segs)-1].Start); !errors.Is(err, ErrActiveSegment) {
				t.Fatalf("remove active: %v", err)
			}
			if err := l.RemoveSegment(segs[0].Start); !errors.Is(err, ErrNoSegment) {
				t.Fatalf("remove twice: %v", err)
			}
			// Remove a middle segment: a hole.
			if err := l.RemoveSegment(segs[2].Start); err != nil {
				t.Fatal(err)
			}
			if _, _, err := l.ReadAt(segs[2].Start, 0, nil); !errors.Is(err, ErrSegmentRemoved) {
				t.Fatalf("ReadAt in hole: %v", err)
			}
			l.AddLive(segs[2].Start, 5) // in the hole: ignored
			l = reopenSameSegments(t, l, dir, opts, 1)
			// Everything outside the removed segments reads back.
			for i, r := range recs {
				_, got, err := l.ReadAt(r.Pos, r.Size, nil)
				removed := r.Pos < segs[1].Start || (r.Pos >= segs[2].Start && r.Pos < segs[2].End)
				switch {
				case removed && !errors.Is(err, ErrSegmentRemoved):
					t.Fatalf("record %d in a removed segment: %v", i, err)
				case !removed && (err != nil || !bytes.Equal(got, bodies[i])):
					t.Fatalf("record %d: %v", i, err)
				}
			}
			// Removing the oldest segment makes the hole marker useless:
			// it is deleted at the next Open.
			if err := l.RemoveSegment(segs[1].Start); err != nil {
				t.Fatal(err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = mustOpen(t, dir, opts)
			defer l.Close()
			if got := l.Segments(); got[0].Start != segs[3].Start {
				t.Fatalf("oldest after removals: %+v", got[0])
			}
			names, _ := fs.ReadDir(dir)
			for _, name := range names {
				if _, hole, _ := parseName(name); hole {
					t.Fatalf("stale hole marker %s", name)
				}
			}
			if _, _, err := readAll(t, l, segs[3].Start); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestOpenShortSegment: a non-last segment shorter than its range is corruption.
func TestOpenShortSegment(t *testing.T) {
	fs := NewMemFS()
	l := mustOpen(t, crashDir, testOptions(t, fs))
	appendMany(t, l, 50, 3000)
	segs := l.Segments()
	_ = l.Close()
	f, err := fs.OpenFile(segName(crashDir, segs[0].Start), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Truncate(int64(segs[0].End-segs[0].Start) - 100)
	_ = f.Sync()
	_ = f.Close()
	var ce *CorruptionError
	if _, err := Open(crashDir, testOptions(t, fs)); !errors.As(err, &ce) || ce.Segment != segs[0].Start {
		t.Fatalf("Open: %v, want *CorruptionError in segment 0", err)
	}
}

// TestOpenDirectory: unknown files are ignored (and reported), leftover
// spares deleted.
func TestOpenDirectory(t *testing.T) {
	fs := NewMemFS()
	l := mustOpen(t, crashDir, testOptions(t, fs))
	if !l.Recovery().Created {
		t.Fatal("empty dir: first segment not reported as created")
	}
	appendMany(t, l, 3, 10)
	_ = l.Close()
	for _, name := range []string{"notes.txt", "7.spare", "0000000000000000.wal.bak"} {
		f, err := fs.OpenFile(crashDir+"/"+name, osCreateRW, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
	}
	_ = fs.SyncDir(crashDir)
	l = mustOpen(t, crashDir, testOptions(t, fs))
	defer l.Close()
	if got := l.Recovery().Ignored; !slices.Equal(got, []string{"0000000000000000.wal.bak", "notes.txt"}) {
		t.Fatalf("ignored %v", got)
	}
	if slices.Contains(fs.Files(crashDir), "7.spare") {
		t.Fatal("leftover spare not deleted")
	}
}
