package server

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
)

// TestMessagesDocSize: messagesDocSize bounds the receive and peek answers
// with every field at its longest, so the handler allocates their buffer
// once (receiveOrPeek) instead of growing it; only escapes may go past it,
// by at most the headroom before the buffer grows.
func TestMessagesDocSize(t *testing.T) {
	longest := time.UnixMilli(math.MinInt64 + 1) // 20 characters
	m := engine.Message{
		Body:             bytes.Repeat([]byte("x"), 1024),
		EnqueueTime:      longest,
		NextVisibleTime:  longest,
		FirstDequeueTime: longest,
		DequeueCount:     math.MinInt,
		Priority:         math.MinInt,
	}
	for i := range m.ID {
		m.ID[i] = 0xff
	}
	withProps := m
	for _, system := range []bool{false, true} {
		for _, typ := range []engine.PropertyType{engine.PropString, engine.PropNumber, engine.PropBoolean, engine.PropBinary, 99} {
			withProps.Properties = append(withProps.Properties, engine.Property{Name: []byte("n"), Value: []byte("v"), Type: typ, System: system})
		}
	}
	for _, tc := range []struct {
		name string
		msgs []engine.Message
	}{
		{"one", []engine.Message{m}},
		{"sixteen", sixteen(m)},
		{"empty bodies", []engine.Message{{}, {}}},
		{"properties", sixteen(withProps)},
	} {
		for _, batch := range []bool{false, true} {
			for _, received := range []bool{false, true} {
				doc := appendMessagesDoc(nil, tc.msgs, batch, received)
				if bound := messagesDocSize(tc.msgs) - escapeHeadroom; len(doc) > bound {
					t.Errorf("%s (batch %v, received %v): %d bytes, bound %d", tc.name, batch, received, len(doc), bound)
				}
			}
		}
	}

	// The handler's buffer does not grow: one allocation per answer, at most.
	msgs := sixteen(m)
	allocs := testing.AllocsPerRun(100, func() {
		b := make([]byte, 0, messagesDocSize(msgs))
		if doc := appendMessagesDoc(b, msgs, true, true); cap(doc) != cap(b) {
			t.Fatalf("the buffer grew from %d to %d", cap(b), cap(doc))
		}
	})
	if allocs > 1 {
		t.Errorf("%v allocations per answer, want 1", allocs)
	}
}

func sixteen(m engine.Message) []engine.Message {
	out := make([]engine.Message, 16)
	for i := range out {
		out[i] = m
	}
	return out
}
