package wal

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

const crashDir = "/wal"

// written is what a test appended: payload by position, positions in order.
type written struct {
	payload map[Pos][]byte
	recs    []Record
}

// fillLog appends n records of the given sizes to a fresh MemFS log, closes
// it and returns the FS and what was written.
func fillLog(t *testing.T, n int, size func(i int) int) (*MemFS, written) {
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
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return fs, w
}

// editFile applies fn to a file of fs and syncs it.
func editFile(t *testing.T, fs *MemFS, name string, fn func(f File)) {
	t.Helper()
	f, err := fs.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fn(f)
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// checkPrefix asserts that the log holds exactly the records of w that end
// at or before end, with their payloads, and nothing else.
func checkPrefix(t *testing.T, l *Log, w written, end Pos) {
	t.Helper()
	if l.End() != end {
		t.Fatalf("End() = %d, want %d", l.End(), end)
	}
	got, order, err := readAll(t, l, firstStart(l))
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	var want []Pos
	for _, r := range w.recs {
		if r.Pos+Pos(r.Size) <= end && r.Pos >= firstStart(l) {
			want = append(want, r.Pos)
		}
	}
	if !slices.Equal(order, want) {
		t.Fatalf("replayed %d records %v..., want %d", len(order), head(order), len(want))
	}
	for _, p := range order {
		if !bytes.Equal(got[p], w.payload[p]) {
			t.Fatalf("record at %d has the wrong payload", p)
		}
	}
}

func head(ps []Pos) []Pos { return ps[:min(len(ps), 5)] }

// TestCrashTruncateEveryOffset cuts the last segment at every byte offset of
// the last records in two shapes, and checks that exactly the records before
// the cut survive and that the cut is reported. Zeroed (the file keeping its
// preallocation) is what a torn write leaves. Truncated (the file cut short)
// is not a crash's (recovery.go): where it leaves a record's whole header
// with its length past the end of the file, Open refuses without
// Options.Repair, and cuts the tail with it.
func TestCrashTruncateEveryOffset(t *testing.T) {
	fs, w := fillLog(t, 40, func(i int) int {
		if i >= 36 {
			return 20 + i // the last few are small: every offset is tried
		}
		return 300 + 97*i
	})
	last := w.recs[len(w.recs)-1]
	starts := segmentStarts(w)
	segStart := starts[len(starts)-1]
	from := w.recs[len(w.recs)-4].Pos
	to := last.Pos + Pos(last.Size)
	name := segName(crashDir, segStart)
	for _, shape := range []string{"truncated", "zeroed"} {
		for cut := from; cut <= to; cut++ {
			c := fs.CrashClone(nil)
			var orig []byte // the bytes from cut to the end of the data
			editFile(t, c, name, func(f File) {
				size, _ := f.Size()
				orig = make([]byte, int64(to-cut))
				_, _ = f.ReadAt(orig, int64(cut-segStart))
				if shape == "truncated" {
					_ = f.Truncate(int64(cut - segStart))
				} else {
					_, _ = f.WriteAt(make([]byte, size-int64(cut-segStart)), int64(cut-segStart))
				}
			})
			// The surviving end is the last record boundary at or before cut.
			end := Pos(0)
			for _, r := range w.recs {
				rend := r.Pos + Pos(r.Size)
				// Zeroing bytes that were zero (padding) changes nothing.
				intact := shape == "zeroed" && rend > cut && isZeroHeader(orig[:rend-cut])
				if rend <= cut || (intact && r.Pos <= cut) {
					end = rend
				}
			}
			// Bytes of the cut record that remain on disk are garbage;
			// only all-zero ones are a clean end.
			var remain []byte
			if end < cut {
				editFile(t, c, name, func(f File) {
					remain = make([]byte, int64(cut-end))
					_, _ = f.ReadAt(remain, int64(end-segStart))
				})
			}
			opts := testOptions(t, c)
			if shape == "truncated" && cut-end >= headerSize {
				// A whole header is left: its record runs past the end.
				_, err := Open(crashDir, opts)
				var ce *CorruptionError
				if !errors.As(err, &ce) || ce.Pos != end || !strings.Contains(ce.Reason, "cut short") {
					t.Fatalf("%s cut %d: Open without Repair: %v, want a CorruptionError at %d", shape, cut, err, end)
				}
				opts.Repair = true
			}
			l, err := Open(crashDir, opts)
			if err != nil {
				t.Fatalf("%s cut %d: Open: %v", shape, cut, err)
			}
			rec := l.Recovery()
			wantTorn := slices.ContainsFunc(remain, func(b byte) bool { return b != 0 })
			if rec.TornTail != wantTorn || (wantTorn && rec.CutAt != end) {
				t.Fatalf("%s cut %d: recovery %+v, want torn=%v at %d", shape, cut, rec, wantTorn, end)
			}
			checkPrefix(t, l, w, end)

			// Append after the cut, reopen: everything is consistent.
			body := testPayload(999, 33, false)
			r := appendWait(t, l, 9, body)
			if r.Pos != end {
				t.Fatalf("append after cut at %d, want %d", r.Pos, end)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = mustOpen(t, crashDir, testOptions(t, c))
			if rec := l.Recovery(); rec.TornTail || rec.Repaired {
				t.Fatalf("second reopen found damage: %+v", rec)
			}
			w2 := written{payload: maps(w.payload, r.Pos, body), recs: append(prefixRecs(w.recs, end), r)}
			checkPrefix(t, l, w2, end+Pos(r.Size))
			_ = l.Close()
		}
	}
}

func prefixRecs(recs []Record, end Pos) []Record {
	var out []Record
	for _, r := range recs {
		if r.Pos+Pos(r.Size) <= end {
			out = append(out, r)
		}
	}
	return out
}

func maps(m map[Pos][]byte, p Pos, b []byte) map[Pos][]byte {
	out := make(map[Pos][]byte, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	out[p] = b
	return out
}

// damageCase damages a closed log and says where the first bad record is.
type damageCase struct {
	name   string
	damage func(t *testing.T, fs *MemFS, w written) (bad Pos, segStart Pos)
}

// recordAt returns the record of w that holds offset p.
func recordAt(w written, p Pos) Record {
	for _, r := range w.recs {
		if p >= r.Pos && p < r.Pos+Pos(r.Size) {
			return r
		}
	}
	panic(fmt.Sprintf("no record holds %d", p))
}

// TestCrashCorruption (invariant 7) zeroes a 512-byte sector or flips single bits in the
// middle of the log: a corruption in the last segment fails Open (or is
// skipped with Repair, invariant 11); one in an older segment is returned
// by Reader and ReadAt. It is never skipped without Repair.
func TestCrashCorruption(t *testing.T) {
	// ~3.3 segments of records of 200..2000 bytes.
	fs, w := fillLog(t, 200, func(i int) int { return 200 + (i*131)%1800 })
	segs := segmentStarts(w)
	if len(segs) < 3 {
		t.Fatalf("want >= 3 segments, got %v", segs)
	}
	lastSeg := segs[len(segs)-1]
	lastRec := w.recs[len(w.recs)-1]
	rnd := rand.New(rand.NewPCG(1, 2))

	var cases []damageCase
	zeroSector := func(segStart Pos, sector int64) damageCase {
		return damageCase{fmt.Sprintf("zero sector %d of segment %x", sector, segStart),
			func(t *testing.T, fs *MemFS, w written) (Pos, Pos) {
				editFile(t, fs, segName(crashDir, segStart), func(f File) {
					_, _ = f.WriteAt(make([]byte, 512), sector*512)
				})
				return recordAt(w, segStart+Pos(sector*512)).Pos, segStart
			}}
	}
	cases = append(cases, zeroSector(segs[0], 64), zeroSector(segs[1], 3), zeroSector(lastSeg, 2))
	for range 12 {
		// A random bit of a record before the last one (a flip in the very
		// last record is indistinguishable from a torn write).
		var p Pos
		for {
			p = Pos(rnd.Uint64N(uint64(lastRec.Pos)))
			if r := recordAt(w, p); r.Pos != lastRec.Pos {
				break
			}
		}
		seg := segs[0]
		for _, s := range segs {
			if s <= p {
				seg = s
			}
		}
		bit := byte(1) << rnd.IntN(8)
		cases = append(cases, damageCase{fmt.Sprintf("flip bit %d at %d", bit, p),
			func(t *testing.T, fs *MemFS, w written) (Pos, Pos) {
				editFile(t, fs, segName(crashDir, seg), func(f File) {
					b := make([]byte, 1)
					_, _ = f.ReadAt(b, int64(p-seg))
					b[0] ^= bit
					_, _ = f.WriteAt(b, int64(p-seg))
				})
				return recordAt(w, p).Pos, seg
			}})
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := fs.CrashClone(nil)
			bad, seg := tc.damage(t, c, w)
			l, err := Open(crashDir, testOptions(t, c))
			var ce *CorruptionError
			if seg == lastSeg {
				if !errors.As(err, &ce) || ce.Pos != bad || ce.Segment != seg {
					t.Fatalf("Open: %v, want *CorruptionError at %d", err, bad)
				}
				// Repair skips the damaged range, loudly, keeps every record
				// after it, and the log is usable.
				opts := testOptions(t, c)
				opts.Repair = true
				l = mustOpen(t, crashDir, opts)
				defer l.Close()
				rec := l.Recovery()
				if !rec.Repaired || len(rec.Repairs) != 1 || rec.Repairs[0].Start != bad || rec.Repairs[0].Cut ||
					rec.Corruption == nil || rec.Corruption.Pos != bad {
					t.Fatalf("repair: %+v", rec)
				}
				checkSkipped(t, l, w, rec.Repairs)
				appendWait(t, l, 1, []byte("after repair"))
				return
			}
			if err != nil {
				t.Fatalf("Open: %v (old segments are not scanned at Open)", err)
			}
			defer l.Close()
			got, order, err := readAll(t, l, 0)
			if !errors.As(err, &ce) || ce.Pos != bad {
				t.Fatalf("replay: %v, want *CorruptionError at %d", err, bad)
			}
			if len(order) > 0 && order[len(order)-1] >= bad {
				t.Fatalf("replay served a record at or after the bad one")
			}
			for _, p := range order {
				if !bytes.Equal(got[p], w.payload[p]) {
					t.Fatalf("record %d served with wrong payload", p)
				}
			}
			if _, _, err := l.ReadAt(bad, 0, nil); !errors.As(err, &ce) {
				t.Fatalf("ReadAt(%d): %v, want *CorruptionError", bad, err)
			}
		})
	}
}

// segmentStarts derives the segment starts from the record positions.
func segmentStarts(w written) []Pos {
	starts := []Pos{0}
	for _, r := range w.recs {
		if r.Pos+Pos(r.Size) > starts[len(starts)-1]+MinSegmentBytes {
			starts = append(starts, r.Pos)
		}
	}
	return starts
}

// TestCrashCloneConcurrent (invariants 4, 6, 7) appends from several goroutines, takes a power
// loss snapshot (MemFS.CrashClone) while they run, and checks the snapshot:
// it opens, holds a gap-free prefix of what was appended with the right
// payloads, holds every record whose WaitDurable returned before the
// snapshot (SyncAlways), and accepts appends after reopening.
func TestCrashCloneConcurrent(t *testing.T) {
	seeds := []uint64{1, 2, 3, 4}
	if testing.Short() {
		seeds = seeds[:2]
	}
	for _, mode := range []SyncMode{SyncAlways, SyncInterval, SyncNone} {
		for _, seed := range seeds {
			t.Run(fmt.Sprintf("%s/seed%d", mode, seed), func(t *testing.T) {
				crashCloneRun(t, mode, seed)
			})
		}
	}
}

func crashCloneRun(t *testing.T, mode SyncMode, seed uint64) {
	fs := NewMemFS()
	opts := testOptions(t, fs)
	opts.Sync = mode
	opts.SyncInterval = 2 * time.Millisecond
	opts.CompressMinBytes = 1024
	l := mustOpen(t, crashDir, opts)

	var (
		mu      sync.Mutex
		payload = map[Pos][]byte{}
		acked   []Pos // WaitDurable returned nil
	)
	const writers, perWriter = 4, 120
	crashAt := make(chan struct{})
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(seed, uint64(g)))
			for i := 0; i < perWriter; {
				n := 1 + rnd.IntN(3)
				recs := make([]Record, n)
				for j := range recs {
					id := seed<<32 | uint64(g)<<20 | uint64(i+j)
					recs[j] = Record{Type: 1 + RecordType(rnd.IntN(9)), Head: []byte{byte(g)},
						Body: testPayload(id, rnd.IntN(3000), rnd.IntN(3) == 0)}
				}
				if err := l.Append(recs); err != nil {
					t.Errorf("Append: %v", err)
					return
				}
				mu.Lock()
				for _, r := range recs {
					payload[r.Pos] = append(slices.Clone(r.Head), r.Body...)
				}
				mu.Unlock()
				if err := l.WaitDurable(recs[n-1].Pos); err != nil {
					t.Errorf("WaitDurable: %v", err)
					return
				}
				mu.Lock()
				for _, r := range recs {
					acked = append(acked, r.Pos)
				}
				mu.Unlock()
				i += n
				if g == 0 && i-n < perWriter/2 && i >= perWriter/2 {
					close(crashAt)
				}
			}
		}()
	}
	select {
	case <-crashAt:
	case <-done(&wg):
		t.Fatal("writers ended before the crash point")
	}
	mu.Lock()
	ackedBefore := slices.Clone(acked)
	mu.Unlock()
	clone := fs.CrashClone(rand.New(rand.NewPCG(seed, 99)))
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	copts := opts
	copts.FS = clone
	cl := mustOpen(t, crashDir, copts)
	t.Logf("crash image: end %d of %d, recovery %+v", cl.End(), l.End(), cl.Recovery())
	got, order, err := readAll(t, cl, 0)
	if err != nil {
		t.Fatalf("replay of crash image: %v", err)
	}
	var want []Pos
	for p := range payload {
		if p < cl.End() {
			want = append(want, p)
		}
	}
	slices.Sort(want)
	if !slices.Equal(order, want) {
		t.Fatalf("crash image holds %d records, want the %d appended below its end", len(order), len(want))
	}
	for _, p := range order {
		if !bytes.Equal(got[p], payload[p]) {
			t.Fatalf("record at %d has the wrong payload", p)
		}
	}
	if mode == SyncAlways {
		for _, p := range ackedBefore {
			if p >= cl.End() {
				t.Fatalf("acknowledged record at %d lost (crash image ends at %d)", p, cl.End())
			}
		}
	}
	// The image accepts appends and reopens consistently.
	r := appendWait(t, cl, 1, []byte("after crash"))
	if err := cl.Close(); err != nil {
		t.Fatal(err)
	}
	cl = mustOpen(t, crashDir, copts)
	defer cl.Close()
	if rec := cl.Recovery(); rec.TornTail || rec.Repaired {
		t.Fatalf("second reopen found damage: %+v", rec)
	}
	_, order2, err := readAll(t, cl, 0)
	if err != nil || len(order2) != len(order)+1 || order2[len(order2)-1] != r.Pos {
		t.Fatalf("after reopen: %d records (want %d), err %v", len(order2), len(order)+1, err)
	}
}

// done returns a channel closed when wg is done.
func done(wg *sync.WaitGroup) <-chan struct{} {
	c := make(chan struct{})
	go func() { wg.Wait(); close(c) }()
	return c
}
