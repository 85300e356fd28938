package engine

import (
	"encoding/binary"
	"testing"
)

// TestFoldStateWithoutBodyKeepsTheSendsBody: a state record that names no
// body location (a replica's record about a message whose send it had not
// applied when it persisted the record) must not make the fold forget the
// body of the send it folded before: live apply keeps the body too
// (apply.go installLocked), and a message folded without one is skipped at
// the next start ("skipping a message of no known queue ... size=0").
func TestFoldStateWithoutBodyKeepsTheSendsBody(t *testing.T) {
	snap := func(dequeues uint32) []byte {
		p := make([]byte, snapLen+16)
		binary.LittleEndian.PutUint64(p[0:], 1) // queue
		binary.LittleEndian.PutUint64(p[8:], 7) // seq
		binary.LittleEndian.PutUint32(p[36:], dequeues)
		p[49] = MinPriority
		return p
	}
	f := newFold(^uint64(0))
	if err := f.apply(100, 92, recSend, snap(0)); err != nil {
		t.Fatal(err)
	}
	if err := f.apply(200, 76, recState, snap(1)[:snapLen]); err != nil {
		t.Fatal(err)
	}
	refs := f.sorted()
	if len(refs) != 1 {
		t.Fatalf("folded %d messages, want 1", len(refs))
	}
	s, err := decodeSnap(f.ent(int(refs[0].i)).snap[:])
	if err != nil {
		t.Fatal(err)
	}
	if s.bodyPos != 100 || s.recSize != 92 || s.dequeues != 1 {
		t.Fatalf("folded body %d size %d dequeues %d, want body 100 size 92 dequeues 1", s.bodyPos, s.recSize, s.dequeues)
	}
}
