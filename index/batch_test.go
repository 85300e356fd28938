package index

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestBatchRoundTrip commits every kind of operation and reads it back, then
// reopens the store and reads it again.
func TestBatchRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, testOptions(t))
	want := newState()

	if pos, ok, err := s.Position(); err != nil || ok || pos != 0 {
		t.Fatalf("fresh Position = %d, %v, %v; want 0, false, nil", pos, ok, err)
	}
	if v, err := s.Meta("absent"); err != nil || v != nil {
		t.Fatalf("Meta(absent) = %q, %v; want nil, nil", v, err)
	}

	b := s.NewBatch()
	b.PutMeta("rh-key", []byte("secret"))
	b.PutMeta("empty", nil)
	b.PutQueue(1, []byte("queue one"))
	b.PutQueue(2, []byte("queue two"))
	b.PutQueue(3, []byte{}) // empty values are kept as empty, not absent
	want.queues[1], want.queues[2], want.queues[3] = "queue one", "queue two", ""
	for q := uint64(1); q <= 3; q++ {
		for seq := uint64(0); seq < 100; seq++ {
			v := msgVal(q, seq, 1)
			b.PutMessage(q, seq, v)
			want.messages[[2]uint64{q, seq}] = string(v)
		}
	}
	b.SetPosition(7)
	b.SetPosition(99) // the last one wins
	want.pos, want.hasPos = 99, true
	if got, wantLen := b.Len(), 5+300+1; got != wantLen {
		t.Fatalf("Len = %d, want %d", got, wantLen)
	}
	if err := s.Commit(b); err != nil {
		t.Fatal(err)
	}
	check := func(s *Store) {
		t.Helper()
		if d := diffState(readState(t, s), want); d != "" {
			t.Fatal(d)
		}
		if v, err := s.Meta("rh-key"); err != nil || string(v) != "secret" {
			t.Fatalf("Meta(rh-key) = %q, %v", v, err)
		}
		if v, err := s.Meta("empty"); err != nil || v == nil || len(v) != 0 {
			t.Fatalf("Meta(empty) = %#v, %v; want empty, non-nil", v, err)
		}
	}
	check(s)

	// Overwrite, delete single messages, delete a queue, in one batch.
	b.Reset()
	if b.Len() != 0 || b.Bytes() != 0 {
		t.Fatalf("after Reset: Len %d Bytes %d", b.Len(), b.Bytes())
	}
	b.PutQueue(1, []byte("queue one v2"))
	want.queues[1] = "queue one v2"
	for seq := uint64(0); seq < 100; seq += 2 {
		b.DeleteMessage(1, seq)
		delete(want.messages, [2]uint64{1, seq})
	}
	b.DeleteMessage(1, 5000) // absent: not an error
	v := msgVal(1, 1, 2)
	b.PutMessage(1, 1, v)
	want.messages[[2]uint64{1, 1}] = string(v)
	b.DeleteQueue(2)
	delete(want.queues, 2)
	for seq := uint64(0); seq < 100; seq++ {
		delete(want.messages, [2]uint64{2, seq})
	}
	if err := s.Commit(b); err != nil {
		t.Fatal(err)
	}
	check(s)

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	check(openT(t, dir, testOptions(t)))
}

// TestBatchCopiesValues checks that a batch keeps its own copy of every
// value and key.
func TestBatchCopiesValues(t *testing.T) {
	s := openT(t, t.TempDir(), testOptions(t))
	b := s.NewBatch()
	buf := []byte("original")
	name := []byte("name")
	b.PutMessage(1, 1, buf)
	b.PutQueue(1, buf)
	b.PutMeta(string(name), buf)
	copy(buf, "XXXXXXXX")
	copy(name, "XXXX")
	if err := s.Commit(b); err != nil {
		t.Fatal(err)
	}
	st := readState(t, s)
	if st.messages[[2]uint64{1, 1}] != "original" || st.queues[1] != "original" {
		t.Fatalf("values changed with the caller's buffer: %v %v", st.messages, st.queues)
	}
	if v, _ := s.Meta("name"); string(v) != "original" {
		t.Fatalf("Meta = %q", v)
	}
}

// TestDeleteQueueNeighbours checks that DeleteQueue removes exactly the
// messages of its queue: ids that share bytes with it, and the ids just
// below and above, keep theirs.
func TestDeleteQueueNeighbours(t *testing.T) {
	const victim = 0x0100
	ids := []uint64{0, 1, 0xff, victim - 1, victim, victim + 1, 0x010000, 0x01, 1 << 63}
	s := openT(t, t.TempDir(), testOptions(t))
	want := newState()
	b := s.NewBatch()
	for _, q := range ids {
		b.PutQueue(q, []byte(fmt.Sprint("queue", q)))
		want.queues[q] = fmt.Sprint("queue", q)
		for _, seq := range []uint64{0, 1, 0xff, 0x100, 1 << 40, ^uint64(0)} {
			v := msgVal(q, seq, 1)
			b.PutMessage(q, seq, v)
			want.messages[[2]uint64{q, seq}] = string(v)
		}
	}
	if err := s.Commit(b); err != nil {
		t.Fatal(err)
	}
	b.Reset()
	b.DeleteQueue(victim)
	if err := s.Commit(b); err != nil {
		t.Fatal(err)
	}
	delete(want.queues, victim)
	for k := range want.messages {
		if k[0] == victim {
			delete(want.messages, k)
		}
	}
	if d := diffState(readState(t, s), want); d != "" {
		t.Fatal(d)
	}
}

// TestDeleteQueueBatchOrder checks the in-batch semantics of DeleteQueue:
// messages put before it in the batch go, messages put after it stay; a
// large stored queue goes entirely.
func TestDeleteQueueBatchOrder(t *testing.T) {
	s := openT(t, t.TempDir(), testOptions(t))
	want := newState()
	commitMessages(t, s, &want, 5, 0, 20000, 1, 1) // stored before the batch
	commitMessages(t, s, &want, 6, 0, 10, 1, 2)

	b := s.NewBatch()
	b.PutQueue(5, []byte("q5"))
	b.PutMessage(5, 30000, []byte("before delete")) // void
	b.DeleteMessage(6, 3)                           // queue 6 is not deleted: applies
	delete(want.messages, [2]uint64{6, 3})
	b.DeleteQueue(5)
	b.PutMessage(5, 40000, []byte("after delete")) // survives
	b.PutQueue(5, []byte("q5 again"))              // survives
	b.SetPosition(3)
	if err := s.Commit(b); err != nil {
		t.Fatal(err)
	}
	for k := range want.messages {
		if k[0] == 5 {
			delete(want.messages, k)
		}
	}
	want.messages[[2]uint64{5, 40000}] = "after delete"
	want.queues[5] = "q5 again"
	want.pos = 3
	if d := diffState(readState(t, s), want); d != "" {
		t.Fatal(d)
	}

	// Deleting twice in a batch, with puts between, keeps only what follows
	// the last delete.
	b.Reset()
	b.DeleteQueue(6)
	b.PutMessage(6, 100, []byte("between"))
	b.DeleteQueue(6)
	b.PutMessage(6, 200, []byte("last"))
	if err := s.Commit(b); err != nil {
		t.Fatal(err)
	}
	for k := range want.messages {
		if k[0] == 6 {
			delete(want.messages, k)
		}
	}
	want.messages[[2]uint64{6, 200}] = "last"
	if d := diffState(readState(t, s), want); d != "" {
		t.Fatal(d)
	}
}

// TestBatchInvalid checks that an invalid batch is rejected whole, before
// anything is written.
func TestBatchInvalid(t *testing.T) {
	s := openT(t, t.TempDir(), testOptions(t))
	tests := []struct {
		name string
		fill func(b *Batch)
		want error
	}{
		{"value too large", func(b *Batch) { b.PutMessage(1, 1, make([]byte, s.maxValue+1)) }, ErrValueTooLarge},
		{"queue value too large", func(b *Batch) { b.PutQueue(1, make([]byte, s.maxValue+1)) }, ErrValueTooLarge},
		{"meta name too long", func(b *Batch) { b.PutMeta(strings.Repeat("n", MaxMetaNameBytes+1), nil) }, ErrKeyTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := s.NewBatch()
			b.PutMessage(9, 9, []byte("valid"))
			tt.fill(b)
			b.SetPosition(100)
			if err := s.Commit(b); !errors.Is(err, tt.want) {
				t.Fatalf("Commit = %v, want %v", err, tt.want)
			}
			if st := readState(t, s); len(st.messages) != 0 || st.hasPos {
				t.Fatalf("invalid batch wrote something: %+v", st)
			}
			b.Reset()
			b.PutMessage(9, 9, []byte("valid"))
			if err := s.Commit(b); err != nil {
				t.Fatalf("Commit after Reset: %v", err)
			}
			b.Reset()
			b.DeleteMessage(9, 9)
			if err := s.Commit(b); err != nil {
				t.Fatal(err)
			}
		})
	}
	// The largest allowed value works and stays inline (invariant 5).
	b := s.NewBatch()
	big := bytes.Repeat([]byte{7}, s.maxValue)
	b.PutMessage(1, 1, big)
	if err := s.Commit(b); err != nil {
		t.Fatal(err)
	}
	if st := readState(t, s); st.messages[[2]uint64{1, 1}] != string(big) {
		t.Fatal("largest value did not round-trip")
	}
}

// TestBatchAllocs checks that recording operations allocates nothing once a
// reused batch has grown to its working size.
func TestBatchAllocs(t *testing.T) {
	s := openT(t, t.TempDir(), testOptions(t))
	// AllocsPerRun counts the whole process's allocations: close the store
	// first, so that Badger's goroutines allocate nothing meanwhile (a
	// batch works without it).
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b := s.NewBatch()
	val := make([]byte, 60)
	fill := func() {
		b.Reset()
		for i := uint64(0); i < 1000; i++ {
			b.PutMessage(1, i, val)
			b.DeleteMessage(1, i)
		}
		b.PutQueue(1, val)
		b.PutMeta("m", val)
		b.SetPosition(1)
	}
	fill()
	if n := testing.AllocsPerRun(10, fill); n != 0 {
		t.Fatalf("%v allocations per 2,000 operations, want 0", n)
	}
}

// TestCommitLargeBatch commits a batch far larger than one Badger
// transaction (15% of a memtable).
func TestCommitLargeBatch(t *testing.T) {
	n := uint64(300_000)
	if testing.Short() {
		n = 60_000 // still ten Badger transactions with 4 MiB memtables
	}
	s := openT(t, t.TempDir(), testOptions(t))
	want := newState()
	commitMessages(t, s, &want, 1, 0, n, 1, 42)
	if d := diffState(readState(t, s), want); d != "" {
		t.Fatal(d)
	}
}
