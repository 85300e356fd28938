package wal

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// frame returns the framed bytes of a record for tests.
func frame(p Pos, typ RecordType, flags uint8, payload []byte) []byte {
	b := make([]byte, framedSize(len(payload)))
	encodeRecord(b, p, typ, flags, payload, nil)
	return b
}

func TestRecordRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pos     Pos
		typ     RecordType
		payload []byte
		framed  int
	}{
		{"empty", 0, 1, nil, 12},
		{"one byte", 4, 2, []byte{7}, 16},
		{"three bytes", 8, 3, []byte{1, 2, 3}, 16},
		{"four bytes", 12, 4, []byte{1, 2, 3, 4}, 16},
		{"five bytes", 1 << 40, 5, []byte{1, 2, 3, 4, 5}, 20},
		{"type 255", 64, 255, bytes.Repeat([]byte{0xab}, 100), 112},
		{"zeros", 128, 9, make([]byte, 33), 48},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := frame(tc.pos, tc.typ, 0, tc.payload)
			if len(b) != tc.framed {
				t.Fatalf("framed size %d, want %d", len(b), tc.framed)
			}
			if binary.LittleEndian.Uint16(b[6:8]) != recordMagic || b[6] != 'S' || b[7] != 'Q' {
				t.Fatalf("magic bytes %x", b[6:8])
			}
			// Extra bytes after the record must not matter.
			hi, stored, framed, reason := decodeRecord(tc.pos, append(b, 1, 2, 3, 4))
			if reason != "" || framed != tc.framed || hi.typ != tc.typ || !bytes.Equal(stored, tc.payload) {
				t.Fatalf("decode: reason %q framed %d typ %d", reason, framed, hi.typ)
			}
		})
	}
}

// TestRecordGolden pins the byte layout (part of the on-disk format).
func TestRecordGolden(t *testing.T) {
	b := frame(8, 7, 0, []byte("hi"))
	want := []byte{2, 0, 0, 0, 7, 0, 0x53, 0x51}
	if !bytes.Equal(b[:8], want) {
		t.Fatalf("header % x, want % x", b[:8], want)
	}
	if sum := binary.LittleEndian.Uint32(b[8:12]); sum != recordChecksum(8, b, []byte("hi"), nil) {
		t.Fatalf("checksum %x", sum)
	}
	if !bytes.Equal(b[12:], []byte{'h', 'i', 0, 0}) {
		t.Fatalf("payload+pad % x", b[12:])
	}
}

func TestRecordCorruption(t *testing.T) {
	good := frame(100, 3, 0, []byte("hello, world")) // 12 + 12 bytes
	for _, tc := range []struct {
		name   string
		pos    Pos
		mutate func(b []byte) []byte
		reason string
	}{
		{"wrong position", 104, func(b []byte) []byte { return b }, "checksum mismatch"},
		{"payload bit", 100, func(b []byte) []byte { b[14] ^= 1; return b }, "checksum mismatch"},
		{"checksum bit", 100, func(b []byte) []byte { b[9] ^= 0x80; return b }, "checksum mismatch"},
		{"type bit", 100, func(b []byte) []byte { b[4] ^= 4; return b }, "checksum mismatch"},
		{"type zero", 100, func(b []byte) []byte { b[4] = 0; return b }, "record type 0"},
		{"unknown flag", 100, func(b []byte) []byte { b[5] = 4; return b }, "unknown flags"},
		{"skip flag bit", 100, func(b []byte) []byte { b[5] = flagSkip; return b }, "checksum mismatch"},
		{"skip and compressed", 100, func(b []byte) []byte { b[5] = flagSkip | flagCompressed; return b }, "skip record with other flags"},
		{"bad magic", 100, func(b []byte) []byte { b[7] = 0; return b }, "bad magic"},
		{"length over limit", 100, func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b, MaxPayload+1)
			return b
		}, "length over limit"},
		{"length bit", 100, func(b []byte) []byte { b[0] ^= 4; return b }, "checksum mismatch"},
		{"truncated payload", 100, func(b []byte) []byte { return b[:20] }, "truncated"},
		{"truncated header", 100, func(b []byte) []byte { return b[:11] }, "truncated"},
		{"zero header", 100, func(b []byte) []byte { return make([]byte, 24) }, "bad magic"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.mutate(bytes.Clone(good))
			_, stored, _, reason := decodeRecord(tc.pos, b)
			if reason != tc.reason || stored != nil {
				t.Fatalf("reason %q (stored %v), want %q", reason, stored != nil, tc.reason)
			}
		})
	}
	t.Run("nonzero padding", func(t *testing.T) {
		b := frame(0, 1, 0, []byte{1})
		b[15] = 9
		if _, _, _, reason := decodeRecord(0, b); reason != "nonzero padding" {
			t.Fatalf("reason %q", reason)
		}
	})
}

func TestCompression(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  []byte
		want bool
	}{
		{"repetitive", bytes.Repeat([]byte("queue message body "), 400), true},
		{"random", testPayload(1, 8192, false), false},
		// Barely compressible: half random, half zeros saves ~50%, kept;
		// 7/8 random saves less than 1/8, dropped.
		{"half random", append(testPayload(2, 4096, false), make([]byte, 4096)...), true},
		{"mostly random", append(testPayload(3, 7680, false), make([]byte, 512)...), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, ok := compressInto(nil, tc.src)
			if ok != tc.want {
				t.Fatalf("compressed=%v (len %d of %d), want %v", ok, len(out), len(tc.src), tc.want)
			}
			if !ok {
				return
			}
			if len(out) > len(tc.src)-len(tc.src)/8 {
				t.Fatalf("kept a compression that saves less than 1/8")
			}
			b := frame(40, 2, flagCompressed, out)
			hi, stored, _, reason := decodeRecord(40, b)
			if reason != "" {
				t.Fatal(reason)
			}
			got, reason := decodePayload(hi, stored, nil)
			if reason != "" || !bytes.Equal(got, tc.src) {
				t.Fatalf("decompress: %q", reason)
			}
		})
	}
	t.Run("garbage compressed payload", func(t *testing.T) {
		b := frame(0, 1, flagCompressed, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
		hi, stored, _, reason := decodeRecord(0, b)
		if reason != "" {
			t.Fatal(reason)
		}
		if _, reason := decodePayload(hi, stored, nil); reason == "" {
			t.Fatal("garbage s2 block decoded")
		}
	})
}

func TestSegmentNames(t *testing.T) {
	for _, tc := range []struct {
		name     string
		p        Pos
		hole, ok bool
	}{
		{"0000000000000000.wal", 0, false, true},
		{"0000000000010000.wal", 0x10000, false, true},
		{"00000000000100a0.hole", 0x100a0, true, true},
		{"00000000000100A0.wal", 0, false, false},
		{"000000000001000.wal", 0, false, false},
		{"0000000000000003.wal", 0, false, false}, // unaligned
		{"0.spare", 0, false, false},
		{"notes.txt", 0, false, false},
		{"zzzzzzzzzzzzzzzz.wal", 0, false, false},
	} {
		p, hole, ok := parseName(tc.name)
		if ok != tc.ok || (ok && (p != tc.p || hole != tc.hole)) {
			t.Errorf("parseName(%q) = %d %v %v", tc.name, p, hole, ok)
		}
	}
	if got := segName("/d", 0x10000); got != "/d/0000000000010000.wal" {
		t.Errorf("segName: %s", got)
	}
}
