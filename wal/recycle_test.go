package wal

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

// fillAndRemove appends records over several segments, then removes every
// inactive segment (they hold nothing live), so their files are recycled.
func fillAndRemove(t *testing.T, l *Log, n int, seed uint64) {
	t.Helper()
	for i := 0; i < n; i++ {
		appendWait(t, l, 1, testPayload(seed+uint64(i), 900, false))
	}
	for _, s := range l.Segments() {
		if !s.Active {
			if _, err := l.RemoveSegmentIfDead(s.Start); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func recycledSegments(l *Log) int {
	n := 0
	for _, s := range l.segs.Load().segs {
		if s.recycled.Load() {
			n++
		}
	}
	return n
}

// TestRecycledSegments: removed segment files are reused as new segments;
// their stale bytes are never served, recovery sees a clean end (no torn
// tail), and a crash at any moment leaves a log that replays exactly what
// was acknowledged.
func TestRecycledSegments(t *testing.T) {
	fs := NewMemFS()
	opts := testOptions(t, fs)
	l := mustOpen(t, "log", opts)
	fillAndRemove(t, l, 300, 1)
	var want []Record
	for i := 0; i < 200; i++ {
		want = append(want, appendWait(t, l, 2, testPayload(1000+uint64(i), 700, false)))
	}
	if recycledSegments(l) == 0 {
		t.Fatal("no segment was recycled")
	}
	check := func(l *Log) {
		t.Helper()
		got, order, err := readAll(t, l, firstStart(l))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range want {
			if !bytes.Equal(got[r.Pos], r.Body) {
				t.Fatalf("record at %d wrong after recycling", r.Pos)
			}
		}
		n := 0
		for _, p := range order {
			if p >= want[0].Pos {
				n++
			}
		}
		if n != len(want) {
			t.Fatalf("%d records replayed after the first wanted one, want %d", n, len(want))
		}
	}
	check(l)
	img := fs.CrashClone(nil)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]FS{"clean": fs, "crash": img} {
		o := opts
		o.FS = f
		l2 := mustOpen(t, "log", o)
		ri := l2.Recovery()
		if ri.TornTail || ri.Corruption != nil {
			t.Fatalf("%s reopen of recycled segments reported damage: %+v", name, ri)
		}
		check(l2)
		// Appending after the reopen keeps ending writes with a mark.
		extra := appendWait(t, l2, 3, []byte("after reopen"))
		l2.Close()
		l3 := mustOpen(t, "log", o)
		if ri := l3.Recovery(); ri.TornTail || ri.Corruption != nil {
			t.Fatalf("%s second reopen: %+v", name, ri)
		}
		if _, p, err := l3.ReadAt(extra.Pos, 0, nil); err != nil || string(p) != "after reopen" {
			t.Fatalf("%s: %q %v", name, p, err)
		}
		l3.Close()
	}
}

// TestRecycledSegmentZeroedSectorIsCorruption: zeros in the middle of the
// data of a recycled segment are still reported, not taken for its end.
func TestRecycledSegmentZeroedSectorIsCorruption(t *testing.T) {
	fs := NewMemFS()
	opts := testOptions(t, fs)
	l := mustOpen(t, "log", opts)
	fillAndRemove(t, l, 300, 2)
	for i := 0; i < 300 && !l.segs.Load().last().recycled.Load(); i++ {
		appendWait(t, l, 2, testPayload(500+uint64(i), 500, false))
	}
	for i := 0; i < 20; i++ {
		appendWait(t, l, 2, testPayload(900+uint64(i), 500, false))
	}
	segs := l.Segments()
	last := segs[len(segs)-1]
	if !l.segs.Load().last().recycled.Load() {
		t.Skip("the active segment is not a recycled one")
	}
	l.Close()
	name := segName("log", last.Start)
	f, err := fs.OpenFile(name, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(make([]byte, 512), 4096)
	f.Close()
	_, err = Open("log", opts)
	var ce *CorruptionError
	if !errors.As(err, &ce) {
		t.Fatalf("zeroed sector in a recycled segment: %v", err)
	}
}

// TestRecycleCrashFuzz: random appends, removals and crash images; every
// image replays a gap-free prefix with the right payloads.
func TestRecycleCrashFuzz(t *testing.T) {
	rnd := rand.New(rand.NewPCG(9, 9))
	fs := NewMemFS()
	opts := testOptions(t, fs)
	l := mustOpen(t, "log", opts)
	defer l.Close()
	payloads := map[Pos][]byte{}
	for round := 0; round < 30; round++ {
		for i := 0; i < 40; i++ {
			p := testPayload(rnd.Uint64(), 200+rnd.IntN(1500), false)
			r := appendWait(t, l, 1, p)
			payloads[r.Pos] = p
		}
		if rnd.IntN(2) == 0 {
			// Remove a prefix of the inactive segments (replay starts at
			// the oldest one left, so no hole is crossed).
			for _, s := range l.Segments() {
				if s.Active || rnd.IntN(3) == 0 {
					break
				}
				l.RemoveSegmentIfDead(s.Start)
			}
		}
		img := fs.CrashClone(rand.New(rand.NewPCG(uint64(round), 1)))
		o := opts
		o.FS = img
		l2, err := Open("log", o)
		if err != nil {
			t.Fatalf("round %d: open crash image: %v", round, err)
		}
		got, _, err := readAll(t, l2, firstStart(l2))
		if err != nil {
			t.Fatalf("round %d: replay: %v", round, err)
		}
		for p, b := range got {
			if !bytes.Equal(payloads[p], b) {
				t.Fatalf("round %d: record at %d is not what was appended there", round, p)
			}
		}
		l2.Close()
	}
}
