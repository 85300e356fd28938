package engine

import (
	"errors"
	"testing"
)

// queueReplica accepts every proposal and commits none.
type queueReplica struct{ n int }

func (q *queueReplica) Propose([]byte) error { q.n++; return nil }

// A leader that steps down settles its pending proposals with ErrNotLeader
// (SetLeader). An operation that appended its records before that and
// comes to wait for them only after must be told they failed, not that
// they are durable: otherwise a send or delete that never committed is
// acknowledged (the fault harness saw deleted messages come back).
func TestReplicaWaitAfterStepDown(t *testing.T) {
	rep := &queueReplica{}
	b, err := Open(Options{Dir: t.TempDir(), Replica: rep, FreeSpaceReserve: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.CloseForRebuild()
	if err := b.SetLeader(true, 1); err != nil {
		t.Fatal(err)
	}
	r := b.store.(*replStore)
	recs := []logRec{{typ: recQueueCreate, head: []byte("not folded: never committed")}}
	if err := r.append(recs); err != nil {
		t.Fatal(err)
	}
	if rep.n != 1 {
		t.Fatalf("%d proposals, want 1", rep.n)
	}
	if err := b.SetLeader(false, 0); err != nil {
		t.Fatal(err)
	}
	if err := r.waitDurable(recs[0].pos); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("waiting after the step-down: %v, want ErrNotLeader", err)
	}
}
