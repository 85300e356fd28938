package index

import (
	"bytes"
	"encoding/hex"
	"math"
	"sort"
	"testing"
)

// TestKeyEncoding pins the key layout, which is part of the on-disk format.
func TestKeyEncoding(t *testing.T) {
	tests := []struct {
		name string
		key  []byte
		hex  string
	}{
		{"meta", appendMetaKey(nil, "rh-key"), "6d" + hex.EncodeToString([]byte("rh-key"))},
		{"meta empty name", appendMetaKey(nil, ""), "6d"},
		{"position", positionKey(), "70"},
		{"queue 0", appendQueueKey(nil, 0), "71" + "0000000000000000"},
		{"queue 1", appendQueueKey(nil, 1), "71" + "0000000000000001"},
		{"queue max", appendQueueKey(nil, math.MaxUint64), "71" + "ffffffffffffffff"},
		{"message 1/2", appendMessageKey(nil, 1, 2), "73" + "0000000000000001" + "0000000000000002"},
		{"message 0x0102/0xff", appendMessageKey(nil, 0x0102, 0xff), "73" + "0000000000000102" + "00000000000000ff"},
		{"message max/max", appendMessageKey(nil, math.MaxUint64, math.MaxUint64), "73" + "ffffffffffffffff" + "ffffffffffffffff"},
		{"message prefix 7", appendMessagePrefix(nil, 7), "73" + "0000000000000007"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := hex.EncodeToString(tt.key); got != tt.hex {
				t.Fatalf("key = %s, want %s", got, tt.hex)
			}
		})
	}
}

func TestKeyParse(t *testing.T) {
	tests := []struct {
		name    string
		key     []byte
		queue   bool
		message bool
		q, seq  uint64
	}{
		{"queue", appendQueueKey(nil, 42), true, false, 42, 0},
		{"queue max", appendQueueKey(nil, math.MaxUint64), true, false, math.MaxUint64, 0},
		{"message", appendMessageKey(nil, 42, 7), false, true, 42, 7},
		{"message zero", appendMessageKey(nil, 0, 0), false, true, 0, 0},
		{"short queue", []byte{prefixQueue, 1, 2}, false, false, 0, 0},
		{"long queue", append(appendQueueKey(nil, 1), 0), false, false, 0, 0},
		{"short message", appendMessagePrefix(nil, 1), false, false, 0, 0},
		{"long message", append(appendMessageKey(nil, 1, 2), 0), false, false, 0, 0},
		{"meta", appendMetaKey(nil, "12345678"), false, false, 0, 0},
		{"empty", nil, false, false, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, ok := parseQueueKey(tt.key)
			if ok != tt.queue || (ok && id != tt.q) {
				t.Errorf("parseQueueKey = %d, %v; want %d, %v", id, ok, tt.q, tt.queue)
			}
			q, seq, ok := parseMessageKey(tt.key)
			if ok != tt.message || (ok && (q != tt.q || seq != tt.seq)) {
				t.Errorf("parseMessageKey = %d, %d, %v; want %d, %d, %v", q, seq, ok, tt.q, tt.seq, tt.message)
			}
		})
	}
}

func TestPositionEncoding(t *testing.T) {
	for _, pos := range []uint64{0, 1, 255, 256, 1 << 40, math.MaxUint64} {
		v := encodePosition(pos)
		if len(v) != 8 {
			t.Fatalf("encodePosition(%d) has %d bytes", pos, len(v))
		}
		got, ok := decodePosition(v)
		if !ok || got != pos {
			t.Fatalf("decodePosition(encodePosition(%d)) = %d, %v", pos, got, ok)
		}
	}
	if hex.EncodeToString(encodePosition(0x0102)) != "0000000000000102" {
		t.Fatal("position is not 8 bytes big-endian")
	}
	for _, bad := range [][]byte{nil, {1}, make([]byte, 7), make([]byte, 9)} {
		if _, ok := decodePosition(bad); ok {
			t.Fatalf("decodePosition accepted %d bytes", len(bad))
		}
	}
}

// TestMessageKeyOrder checks the property the start-up scan relies on: byte
// order of message keys is (queue, seq) order, so one queue's messages are
// contiguous and sorted by seq.
func TestMessageKeyOrder(t *testing.T) {
	vals := []uint64{0, 1, 2, 255, 256, 257, 1 << 16, 1<<32 - 1, 1 << 32, 1 << 56, math.MaxUint64 - 1, math.MaxUint64}
	type qs struct{ q, seq uint64 }
	var all []qs
	for _, q := range vals {
		for _, s := range vals {
			all = append(all, qs{q, s})
		}
	}
	byBytes := append([]qs(nil), all...)
	sort.Slice(byBytes, func(i, j int) bool {
		return bytes.Compare(appendMessageKey(nil, byBytes[i].q, byBytes[i].seq), appendMessageKey(nil, byBytes[j].q, byBytes[j].seq)) < 0
	})
	byNum := append([]qs(nil), all...)
	sort.Slice(byNum, func(i, j int) bool {
		if byNum[i].q != byNum[j].q {
			return byNum[i].q < byNum[j].q
		}
		return byNum[i].seq < byNum[j].seq
	})
	for i := range byNum {
		if byNum[i] != byBytes[i] {
			t.Fatalf("order differs at %d: bytes %v, numbers %v", i, byBytes[i], byNum[i])
		}
	}
	// Every key of queue q lies strictly between queue q-1's and q+1's.
	for _, q := range []uint64{1, 255, 256, 1 << 32} {
		lo := appendMessageKey(nil, q-1, math.MaxUint64)
		hi := appendMessageKey(nil, q+1, 0)
		for _, s := range vals {
			k := appendMessageKey(nil, q, s)
			if bytes.Compare(lo, k) >= 0 || bytes.Compare(k, hi) >= 0 {
				t.Fatalf("message %d/%d not between its neighbours", q, s)
			}
			if !bytes.HasPrefix(k, appendMessagePrefix(nil, q)) || bytes.HasPrefix(k, appendMessagePrefix(nil, q+1)) {
				t.Fatalf("message %d/%d prefix", q, s)
			}
		}
	}
}
