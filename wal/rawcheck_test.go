package wal

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"sort"
	"testing"
)

// rawSegments writes n records of seeded sizes (some compressible, some
// larger than a read chunk) into a log of 64 KiB segments and returns each
// segment's raw bytes as ReadRaw gives them, with the records' positions.
func rawSegments(t *testing.T, seed uint64, n int) ([]SegmentInfo, [][]byte, []Pos) {
	t.Helper()
	l := mustOpen(t, "log", testOptions(t, NewMemFS()))
	defer l.Close()
	rng := rand.New(rand.NewPCG(seed, 1))
	var pos []Pos
	for i := 0; i < n; i++ {
		body := make([]byte, rng.IntN(9000))
		if rng.IntN(2) == 0 {
			for j := range body {
				body[j] = byte(rng.Uint32())
			}
		}
		recs := []Record{{Type: RecordType(1 + rng.IntN(200)), Head: []byte{byte(i)}, Body: body}}
		if err := l.Append(recs); err != nil {
			t.Fatal(err)
		}
		pos = append(pos, recs[0].Pos)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	segs := l.Segments()
	raws := make([][]byte, len(segs))
	for i, s := range segs {
		buf := make([]byte, 1000)
		for p := s.Start; p < s.End; {
			k, err := l.ReadRaw(p, buf)
			if err != nil || k == 0 {
				t.Fatalf("ReadRaw(%d): %d, %v", p, k, err)
			}
			raws[i] = append(raws[i], buf[:k]...)
			p += Pos(k)
		}
	}
	return segs, raws, pos
}

// feed gives raw to a checker in seeded chunks of 1 byte to 20 KiB.
func feed(seg Pos, raw []byte, rng *rand.Rand) (*RawChecker, error) {
	c := NewRawChecker(seg, seg)
	for len(raw) > 0 {
		k := min(len(raw), 1+rng.IntN([]int{3, 13, 700, 20 << 10}[rng.IntN(4)]))
		if err := c.Write(raw[:k]); err != nil {
			return c, err
		}
		raw = raw[k:]
	}
	return c, c.Close()
}

// TestRawCheckerPassesAWholeLog: every segment of a sound log verifies,
// however its bytes are cut, up to the segment's end.
func TestRawCheckerPassesAWholeLog(t *testing.T) {
	segs, raws, _ := rawSegments(t, 1, 300)
	if len(segs) < 3 {
		t.Fatalf("%d segments; the test wants several", len(segs))
	}
	rng := rand.New(rand.NewPCG(2, 2))
	for i, s := range segs {
		for round := 0; round < 5; round++ {
			c, err := feed(s.Start, raws[i], rng)
			if err != nil {
				t.Fatalf("segment %d round %d: %v", i, round, err)
			}
			if c.Pos() != s.End {
				t.Fatalf("segment %d: verified up to %d, the segment ends at %d", i, c.Pos(), s.End)
			}
		}
	}
}

// TestRawCheckerFindsDamage: a flipped bit anywhere in a record, or a cut
// inside one, fails at that record's position.
func TestRawCheckerFindsDamage(t *testing.T) {
	segs, raws, pos := rawSegments(t, 3, 300)
	sort.Slice(pos, func(i, j int) bool { return pos[i] < pos[j] })
	recordAt := func(p Pos) Pos { // the start of the record holding p
		i := sort.Search(len(pos), func(i int) bool { return pos[i] > p })
		return pos[i-1]
	}
	rng := rand.New(rand.NewPCG(4, 4))
	for round := 0; round < 200; round++ {
		i := rng.IntN(len(segs))
		raw := bytes.Clone(raws[i])
		off := rng.IntN(len(raw))
		raw[off] ^= 1 << rng.IntN(8)
		at := recordAt(segs[i].Start + Pos(off))
		_, err := feed(segs[i].Start, raw, rng)
		var ce *CorruptionError
		if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
			t.Fatalf("round %d: a bit flipped at %d: %v", round, segs[i].Start+Pos(off), err)
		}
		// A flipped length can make the record look longer than the
		// segment: then it fails as truncated, still at its start.
		if ce.Pos != at || ce.Segment != segs[i].Start || ce.Offset != int64(at-segs[i].Start) {
			t.Fatalf("round %d: a bit flipped at %d (record %d) failed at %+v", round, segs[i].Start+Pos(off), at, ce)
		}
	}
	for round := 0; round < 50; round++ {
		i := rng.IntN(len(segs))
		cut := 1 + rng.IntN(len(raws[i])-1)
		end := segs[i].Start + Pos(cut)
		_, err := feed(segs[i].Start, raws[i][:cut], rng)
		at := recordAt(end - 1)
		if k := sort.Search(len(pos), func(k int) bool { return pos[k] >= end }); k < len(pos) && pos[k] == end {
			if err != nil { // cut at a record boundary: what is there is whole
				t.Fatalf("round %d: cut at the boundary %d: %v", round, end, err)
			}
			continue
		}
		var ce *CorruptionError
		if !errors.As(err, &ce) || ce.Pos != at || ce.Reason != "truncated" {
			t.Fatalf("round %d: cut at %d (record %d): %v", round, end, at, err)
		}
	}
}

// BenchmarkRawChecker verifies a log of 1 KiB records as a backup reads
// it, in 256 KiB chunks (archive.MaxData's order).
func BenchmarkRawChecker(b *testing.B) {
	const recs = 16384
	body := make([]byte, 1024)
	raw := make([]byte, 0, recs*framedSize(1024))
	for i := 0; i < recs; i++ {
		body[0] = byte(i)
		f := make([]byte, framedSize(len(body)))
		encodeRecord(f, Pos(len(raw)), 7, 0, body, nil)
		raw = append(raw, f...)
	}
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		c := NewRawChecker(0, 0)
		for off := 0; off < len(raw); off += 256 << 10 {
			if err := c.Write(raw[off:min(len(raw), off+256<<10)]); err != nil {
				b.Fatal(err)
			}
		}
		if err := c.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// A skip record of no payload is a header alone (SkipTo by 12 bytes, or a
// 12-byte damaged range covered by a repair): cut anywhere, its bytes
// verify, and a write that ends inside its header does not spin.
func TestRawCheckerHeaderOnlyRecord(t *testing.T) {
	l := mustOpen(t, "log", testOptions(t, NewMemFS()))
	defer l.Close()
	if err := l.Append([]Record{{Type: 1, Body: []byte("before")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.SkipTo(l.End() + headerSize); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := l.Append([]Record{{Type: 2, Body: []byte("after")}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	s := l.Segments()[0]
	raw := make([]byte, s.End-s.Start)
	if n, err := l.ReadRaw(s.Start, raw); err != nil || n != len(raw) {
		t.Fatalf("ReadRaw: %d of %d, %v", n, len(raw), err)
	}
	for cut := 1; cut < len(raw); cut++ {
		for cut2 := cut; cut2 < len(raw); cut2++ {
			c := NewRawChecker(s.Start, s.Start)
			for _, part := range [][]byte{raw[:cut], raw[cut:cut2], raw[cut2:]} {
				if err := c.Write(part); err != nil {
					t.Fatalf("cut at %d and %d: %v", cut, cut2, err)
				}
			}
			if err := c.Close(); err != nil || c.Pos() != s.End {
				t.Fatalf("cut at %d and %d: %v, verified to %d of %d", cut, cut2, err, c.Pos(), s.End)
			}
		}
	}
}
