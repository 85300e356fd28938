package wal

import (
	"bytes"
	"testing"
)

// holeFiles returns the hole markers in dir.
func holeFiles(t *testing.T, fs FS, dir string) []string {
	t.Helper()
	names, err := fs.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, name := range names {
		if _, hole, _ := parseName(name); hole {
			out = append(out, name)
		}
	}
	return out
}

// TestHoleMarkersStayBounded: a running log keeps only the hole markers a
// reopening needs. The oldest segment stays live (a message nobody
// receives) while rounds of churn fill segments that are removed behind
// it: one marker, at its end, stays; once it is removed too, none. They
// used to pile up, one per removed segment, until the next Open (edge
// audit, 2026-12-07). The log reopens to the same segments either way.
func TestHoleMarkersStayBounded(t *testing.T) {
	for _, fsName := range []string{"mem", "os"} {
		t.Run(fsName, func(t *testing.T) {
			var fs FS = NewMemFS()
			dir := crashDir
			if fsName == "os" {
				fs, dir = OSFS(), t.TempDir()
			}
			opts := testOptions(t, fs)
			l := mustOpen(t, dir, opts)
			appendMany(t, l, 30, 3000)
			first := l.Segments()[0]
			var recs []Record
			var bodies [][]byte
			for round := range 6 {
				recs, bodies = appendMany(t, l, 30, 3000)
				segs := l.Segments()
				for _, s := range segs[1 : len(segs)-1] {
					if err := l.RemoveSegment(s.Start); err != nil {
						t.Fatal(err)
					}
				}
				if got := holeFiles(t, fs, dir); len(got) != 1 || got[0] != holeName("", first.End) {
					t.Fatalf("round %d: hole markers %v, want only the one at the oldest segment's end %016x", round, got, uint64(first.End))
				}
			}
			l = reopenSameSegments(t, l, dir, opts, 1)
			after := l.Segments()
			for i, r := range recs {
				if r.Pos < after[len(after)-1].Start {
					continue // in a removed segment
				}
				if _, got, err := l.ReadAt(r.Pos, r.Size, nil); err != nil || !bytes.Equal(got, bodies[i]) {
					t.Fatalf("record %d after reopen: %v", i, err)
				}
			}
			// The oldest segment removed, no marker is needed.
			appendMany(t, l, 30, 3000)
			if err := l.RemoveSegment(first.Start); err != nil {
				t.Fatal(err)
			}
			if got := holeFiles(t, fs, dir); len(got) != 0 {
				t.Fatalf("hole markers %v after the oldest segment went", got)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// reopenSameSegments closes l and opens dir again, and fails unless the
// reopened log has the same segments and holes hole markers.
func reopenSameSegments(t *testing.T, l *Log, dir string, opts Options, holes int) *Log {
	t.Helper()
	before := l.Segments()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, opts)
	after := l.Segments()
	if len(after) != len(before) || l.Recovery().Holes != holes {
		t.Fatalf("reopen: %+v (holes %d), want %+v", after, l.Recovery().Holes, before)
	}
	for i := range after {
		if after[i].Start != before[i].Start || after[i].End != before[i].End {
			t.Fatalf("reopen segment %d: %+v, want %+v", i, after[i], before[i])
		}
	}
	return l
}
