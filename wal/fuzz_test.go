package wal

import (
	"encoding/binary"
	"errors"
	"io"
	"testing"
)

// FuzzDecodeRecord feeds arbitrary bytes at arbitrary positions to the
// record decoder: it must never panic, and it must never accept a record
// whose checksum does not verify (invariant 7).
func FuzzDecodeRecord(f *testing.F) {
	f.Add(uint64(0), frame(0, 1, 0, []byte("hello")))
	f.Add(uint64(4096), frame(4096, 255, 0, make([]byte, 100)))
	if out, ok := compressInto(nil, make([]byte, 5000)); ok {
		f.Add(uint64(8), frame(8, 2, flagCompressed, out))
	}
	f.Add(uint64(0), make([]byte, 12))
	f.Add(uint64(12), []byte{0xff, 0xff, 0xff, 0xff, 1, 0, 0x53, 0x51, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, pos uint64, b []byte) {
		p := Pos(pos &^ 3)
		hi, stored, framed, reason := decodeRecord(p, b)
		if reason != "" {
			if stored != nil {
				t.Fatalf("rejected record returned a payload")
			}
			return
		}
		if framed > len(b) || framed != framedSize(hi.n) || len(stored) != hi.n {
			t.Fatalf("bad sizes: framed %d len %d n %d", framed, len(b), hi.n)
		}
		want := binary.LittleEndian.Uint32(b[8:12])
		if recordChecksum(p, b, stored, nil) != want || hi.typ == 0 || hi.flags&^knownFlags != 0 {
			t.Fatalf("accepted a record that does not verify")
		}
		// Decompression of an accepted record must not panic either.
		_, _ = decodePayload(hi, stored, nil)
	})
}

// FuzzRecoverSegment opens a log whose only segment holds arbitrary bytes:
// Open must not panic; it either fails with a *CorruptionError or recovers
// a prefix of valid records that replays cleanly and accepts appends. With
// Repair it must always open (invariant 11), keep every record the plain
// Open kept, replay cleanly, accept appends, and reopen without damage.
func FuzzRecoverSegment(f *testing.F) {
	var seg []byte
	for i, n := range []int{5, 0, 40, 3} {
		seg = append(seg, frame(Pos(len(seg)), RecordType(i+1), 0, make([]byte, n))...)
	}
	f.Add(seg)
	f.Add(append(append([]byte{}, seg...), 0xde, 0xad))
	f.Add(append(append([]byte{}, seg[:30]...), seg[40:]...))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		fs := NewMemFS()
		_ = fs.MkdirAll(crashDir, 0o755)
		file, err := fs.OpenFile(segName(crashDir, 0), osCreateRW, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = file.WriteAt(data, 0)
		_ = file.Sync()
		_ = file.Close()
		_ = fs.SyncDir(crashDir)
		repaired := fuzzRepair(t, fs.CrashClone(nil))
		opts := Options{FS: fs, SegmentBytes: MinSegmentBytes, BufferBytes: MinSegmentBytes}
		l, err := Open(crashDir, opts)
		if err != nil {
			var ce *CorruptionError
			if !errors.As(err, &ce) {
				t.Fatalf("Open: %v", err)
			}
			return
		}
		defer l.Close()
		r, err := l.NewReader(0, l.End())
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for {
			_, _, _, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("replay of a recovered log: %v", err)
			}
			n++
		}
		if repaired != n {
			// Without mid-log damage both opens keep the same records.
			t.Fatalf("Repair kept %d records, the plain Open %d", repaired, n)
		}
		recs := []Record{{Type: 1, Body: []byte("after")}}
		if err := l.Append(recs); err != nil {
			t.Fatal(err)
		}
		if err := l.WaitDurable(recs[0].Pos); err != nil || recs[0].Pos != Pos(align4(int(recs[0].Pos))) {
			t.Fatal(err)
		}
	})
}

// fuzzRepair opens fs with Repair: it must open, replay cleanly (every
// record a valid one of the input, at its place), accept an append and
// reopen without damage.
func fuzzRepair(t *testing.T, fs *MemFS) int {
	opts := Options{FS: fs, SegmentBytes: MinSegmentBytes, BufferBytes: MinSegmentBytes, Repair: true}
	l, err := Open(crashDir, opts)
	if err != nil {
		t.Fatalf("Open with Repair: %v", err)
	}
	replay := func(l *Log) int {
		r, err := l.NewReader(0, l.End())
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		n := 0
		for {
			_, _, _, err := r.Next()
			if errors.Is(err, io.EOF) {
				return n
			}
			if err != nil {
				t.Fatalf("replay of a repaired log: %v", err)
			}
			n++
		}
	}
	n := replay(l)
	recs := []Record{{Type: 1, Body: []byte("after")}}
	if err := l.Append(recs); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Open(crashDir, opts)
	if err != nil {
		t.Fatalf("reopen after repair: %v", err)
	}
	defer l.Close()
	if rec := l.Recovery(); len(rec.Repairs) != 0 {
		t.Fatalf("reopen after repair found damage: %+v", rec.Repairs)
	}
	if m := replay(l); m != n+1 {
		t.Fatalf("reopen replays %d records, want %d", m, n+1)
	}
	return n
}
