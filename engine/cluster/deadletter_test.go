package cluster

import (
	"bytes"
	"testing"

	"github.com/smqd/smqd/engine"
)

// parseMove takes any bytes without panicking; what it accepts encodes
// back to the same bytes, and what appendMove writes it reads back.
func FuzzParseMove(f *testing.F) {
	f.Add(appendMove(nil, "dlq", []engine.MovedMessage{{Body: []byte("x"), Props: []byte{1, 2}, EnqueueMs: 1, ExpireMs: 2, Priority: 8}}))
	f.Add(appendMove(nil, "q", []engine.MovedMessage{{Body: []byte("a")}, {Body: []byte("bb"), Priority: 16}}))
	f.Add([]byte{3, 0, 'd', 'l', 'q', 0})
	f.Add([]byte{0, 0, 1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		target, ms, err := parseMove(b)
		if err != nil {
			return
		}
		if target == "" || len(ms) < 1 || len(ms) > engine.MaxBatch {
			t.Fatalf("accepted target %q with %d messages", target, len(ms))
		}
		if again := appendMove(nil, target, ms); !bytes.Equal(again, b) {
			t.Fatalf("accepted %x, which encodes back as %x", b, again)
		}
	})
}
