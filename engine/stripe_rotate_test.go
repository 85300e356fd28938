package engine

import (
	"context"
	"testing"
)

// TestReceiveTiesBetweenStripesRotate: docs/architecture.md ("Priority
// lanes and receive"): when several stripes' best lanes have the same
// priority, receives take turns among them, so that a stripe kept busy by
// sends does not leave the others' messages waiting behind its own. No
// test caught receives that always started at stripe 0 (enginearch audit).
func TestReceiveTiesBetweenStripesRotate(t *testing.T) {
	b, _ := openTest(t, Options{Stripes: 4})
	q := mustQueue(t, b, "q", DefaultQueueConfig())
	for range 2 * len(q.stripes) { // sends take the stripes in turn: two each
		if _, err := q.SendOne(context.Background(), SendEntry{Body: []byte("m")}); err != nil {
			t.Fatal(err)
		}
	}
	seen := make(map[uint8]bool)
	for k := range len(q.stripes) {
		m, err := q.ReceiveOne(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if seen[m.Handle.stripe] {
			t.Fatalf("receive %d took a second message from stripe %d while other stripes held messages of the same priority: ties between stripes do not rotate", k, m.Handle.stripe)
		}
		seen[m.Handle.stripe] = true
	}
}
