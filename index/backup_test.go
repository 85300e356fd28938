package index

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"
)

// A backup restores to the same state, deletes included; one cut short,
// with a pair dropped, or with bytes after its end is refused.
func TestBackupRestore(t *testing.T) {
	s := openT(t, t.TempDir(), testOptions(t))
	want := newState()
	b := s.NewBatch()
	b.PutQueue(1, []byte("q1"))
	b.PutQueue(2, []byte("q2"))
	b.PutMeta("boot", []byte{7})
	want.queues[1], want.queues[2] = "q1", "q2"
	if err := s.Commit(b); err != nil {
		t.Fatal(err)
	}
	commitMessages(t, s, &want, 1, 1, 3000, 1, 100)
	commitMessages(t, s, &want, 2, 1, 50, 1, 200)
	del := s.NewBatch()
	for seq := uint64(1); seq < 1000; seq++ {
		del.DeleteMessage(1, seq)
		delete(want.messages, [2]uint64{1, seq})
	}
	if err := s.Commit(del); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := s.Backup(&buf); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "restored")
	if err := Restore(dir, bytes.NewReader(buf.Bytes()), testOptions(t)); err != nil {
		t.Fatal(err)
	}
	r := openT(t, dir, testOptions(t))
	if d := diffState(readState(t, r), want); d != "" {
		t.Fatalf("restored state differs: %s", d)
	}
	if v, err := r.Meta("boot"); err != nil || !bytes.Equal(v, []byte{7}) {
		t.Fatalf("restored meta: %v %v", v, err)
	}

	full := buf.Bytes()
	for name, c := range map[string][]byte{
		"cut":      full[:len(full)/2],
		"no count": full[:len(full)-2],
		"trailing": append(bytes.Clone(full), 0),
		"magic":    append([]byte("SMQDIDX2"), full[8:]...),
		// Whole pairs, but one fewer than the end says (a pair lost).
		"count": append([]byte(backupMagic), 1, 'k', 1, 'v', 0, 2),
	} {
		err := Restore(filepath.Join(t.TempDir(), "x"), bytes.NewReader(c), testOptions(t))
		if !errors.Is(err, ErrBadBackup) {
			t.Errorf("%s: %v, want ErrBadBackup", name, err)
		}
	}
	if err := Restore(dir, bytes.NewReader(full), testOptions(t)); err == nil {
		t.Error("restored into a directory in use")
	}
}
