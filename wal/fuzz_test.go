package wal

import (
	"encoding/binary"
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
