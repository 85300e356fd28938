package index

import (
	"errors"
	"testing"
)

var errCrash = errors.New("simulated crash")

// TestCommitCrashBetweenParts stops a commit after its data part is durable
// and before its position is written (invariant 2), takes the directory as a
// crash at that moment leaves it, and opens that image: it must hold the new
// data and the old position. The live store must keep working too.
func TestCommitCrashBetweenParts(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, testOptions(t))
	want := newState()
	b := s.NewBatch()
	b.PutQueue(1, []byte("q1"))
	b.PutMeta("rh", []byte("k1"))
	want.queues[1] = "q1"
	if err := s.Commit(b); err != nil {
		t.Fatal(err)
	}
	commitMessages(t, s, &want, 1, 0, 1000, 1, 10) // position 10

	// The second commit crashes between its parts.
	var image string
	var order []string
	s.hooks.afterData = func() error {
		order = append(order, "data durable")
		image = crashImage(t, dir)
		return errCrash
	}
	b.Reset()
	for seq := uint64(1000); seq < 3000; seq++ {
		b.PutMessage(1, seq, msgVal(1, seq, 2))
		want.messages[[2]uint64{1, seq}] = string(msgVal(1, seq, 2))
	}
	b.DeleteMessage(1, 0)
	delete(want.messages, [2]uint64{1, 0})
	b.PutMeta("rh", []byte("k2"))
	b.SetPosition(20)
	if err := s.Commit(b); !errors.Is(err, errCrash) {
		t.Fatalf("Commit = %v, want the simulated crash", err)
	}
	if len(order) != 1 {
		t.Fatalf("hook ran %d times", len(order))
	}

	// The image has the new data and the old position.
	crashed := openT(t, image, testOptions(t))
	if d := diffState(readState(t, crashed), want); d != "" {
		t.Fatalf("after a crash between the parts: %s", d)
	}
	if v, _ := crashed.Meta("rh"); string(v) != "k2" {
		t.Fatalf("Meta(rh) = %q, want the new value", v)
	}
	// Replaying from the old position (the engine's job) is idempotent; here
	// the same batch is simply committed again, with its position.
	crashed.hooks.afterData = nil
	if err := crashed.Commit(b); err != nil {
		t.Fatal(err)
	}
	want.pos = 20
	if d := diffState(readState(t, crashed), want); d != "" {
		t.Fatalf("after re-commit: %s", d)
	}

	// The live store: the position was not written; a later commit works
	// and a clean reopen has everything.
	if pos, _, _ := s.Position(); pos != 10 {
		t.Fatalf("live position = %d, want 10", pos)
	}
	s.hooks.afterData = nil
	commitMessages(t, s, &want, 1, 3000, 3100, 3, 30)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if d := diffState(readState(t, openT(t, dir, testOptions(t))), want); d != "" {
		t.Fatalf("after reopen: %s", d)
	}
}

// TestCommitPositionOnly commits a batch that only moves the position.
func TestCommitPositionOnly(t *testing.T) {
	s := openT(t, t.TempDir(), testOptions(t))
	b := s.NewBatch()
	b.SetPosition(5)
	if b.Len() != 1 {
		t.Fatalf("Len = %d", b.Len())
	}
	if err := s.Commit(b); err != nil {
		t.Fatal(err)
	}
	if pos, ok, err := s.Position(); pos != 5 || !ok || err != nil {
		t.Fatalf("Position = %d, %v, %v", pos, ok, err)
	}
	// An empty batch is a no-op.
	if err := s.Commit(s.NewBatch()); err != nil {
		t.Fatal(err)
	}
}

// TestCommitCrashImages takes a crash image after every commit of a series
// and checks that each image holds exactly the commits made before it.
func TestCommitCrashImages(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, testOptions(t))
	want := newState()
	for i := uint64(1); i <= 5; i++ {
		commitMessages(t, s, &want, i%2, i*1000, i*1000+800, byte(i), i)
		b := s.NewBatch()
		b.DeleteMessage(i%2, i*1000)
		delete(want.messages, [2]uint64{i % 2, i * 1000})
		if err := s.Commit(b); err != nil {
			t.Fatal(err)
		}
		img := crashImage(t, dir)
		c := openT(t, img, testOptions(t))
		if d := diffState(readState(t, c), want); d != "" {
			t.Fatalf("image after commit %d: %s", i, d)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
