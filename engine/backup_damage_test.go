package engine

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/smqd/smqd/engine/archive"
	"github.com/smqd/smqd/wal"
)

// Invariant 5 of backup.go, on the broker's side: a record of the live log
// damaged on disk fails the backup, wherever it lies, instead of going into
// a backup that a start would cut or refuse; once the damage is gone the
// backup works again, and restores up to the log end it reports.
func TestBackupRefusesADamagedLog(t *testing.T) {
	clk := NewFakeClock(t0)
	dir := t.TempDir()
	b := openDurableTest(t, dir, clk, smallSegments)
	defer b.Close()
	q := mustQueue(t, b, "dq", DefaultQueueConfig())
	send150(t, q)
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	segs := b.store.(*durableStore).wal.Segments()
	if len(segs) < 2 {
		t.Fatalf("%d segments; the test wants several", len(segs))
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for round := range 12 {
		s := segs[rng.IntN(len(segs))]
		off := rng.Int64N(int64(s.End - s.Start))
		bit := byte(1) << rng.IntN(8)
		name := filepath.Join(dir, "wal", fmt.Sprintf("%016x.wal", uint64(s.Start)))
		flipFileBit(t, name, off, bit)
		_, err := b.Backup(io.Discard, BackupOptions{})
		if !errors.Is(err, wal.ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprintf("%016x", uint64(s.Start))) {
			t.Fatalf("round %d: a bit flipped in segment %016x at offset %d: the backup said %v", round, uint64(s.Start), off, err)
		}
		flipFileBit(t, name, off, bit)
	}
	var buf bytes.Buffer
	info, err := b.Backup(&buf, BackupOptions{})
	if err != nil {
		t.Fatalf("the backup after the damage was undone: %v", err)
	}
	rinfo, err := Restore(bytes.NewReader(buf.Bytes()), filepath.Join(t.TempDir(), "r"))
	if err != nil || rinfo.LogEnd != info.LogEnd {
		t.Fatalf("the restore: log end %d, the backup's %d (%v)", rinfo.LogEnd, info.LogEnd, err)
	}
}

// Invariant 5 on the restore's side: a backup whose archive frames are
// whole but whose log records are damaged (as a backup made before backups
// verified records could be) is refused as archive.ErrDamaged, and leaves
// no directory.
func TestRestoreRefusesDamagedLogRecords(t *testing.T) {
	ar, _ := backupOf150(t)
	rng := rand.New(rand.NewPCG(7, 8))
	root := t.TempDir()
	for round := range 12 {
		damaged, what := rewriteArchive(t, ar, rng)
		dir := filepath.Join(root, fmt.Sprint("r", round))
		_, err := Restore(bytes.NewReader(damaged), dir)
		if !errors.Is(err, archive.ErrDamaged) || !errors.Is(err, wal.ErrCorrupt) {
			t.Fatalf("round %d: %s: %v, want archive.ErrDamaged of a corrupt record", round, what, err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("round %d: the directory is there (%v)", round, err)
		}
	}
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Fatalf("the failed restores left %d entries", len(ents))
	}
}

// flipFileBit flips bit of the byte at off of the file name.
func flipFileBit(t *testing.T, name string, off int64, bit byte) {
	t.Helper()
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var c [1]byte
	if _, err := f.ReadAt(c[:], off); err != nil {
		t.Fatal(err)
	}
	c[0] ^= bit
	if _, err := f.WriteAt(c[:], off); err != nil {
		t.Fatal(err)
	}
}

// rewriteArchive copies the archive ar with whole frames, a bit flipped in
// the data of one of its log segments, and says where.
func rewriteArchive(t *testing.T, ar []byte, rng *rand.Rand) ([]byte, string) {
	t.Helper()
	r, err := archive.NewReader(bytes.NewReader(ar))
	if err != nil {
		t.Fatal(err)
	}
	type file struct {
		h    archive.FileHeader
		data []byte
	}
	var files, segs []file
	for {
		h, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, file{h, data})
		if strings.HasSuffix(h.Name, ".wal") && len(data) > 0 {
			segs = append(segs, files[len(files)-1])
		}
	}
	s := segs[rng.IntN(len(segs))]
	off := rng.IntN(len(s.data))
	s.data[off] ^= 1 << rng.IntN(8) // the same array as files' copy
	var out bytes.Buffer
	w, err := archive.NewWriter(&out, r.Manifest())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if err := w.Create(f.h); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(f.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes(), fmt.Sprintf("a bit flipped in %s at %d", s.h.Name, off)
}

// send150 sends 150 messages of about 1 KiB to q, several segments' worth
// with smallSegments.
func send150(t *testing.T, q *Queue) {
	t.Helper()
	for i := range 150 {
		sendBody(t, q, fmt.Sprintf("m%d %s", i, bytes.Repeat([]byte{'d'}, 900)))
	}
}

// backupOf150 is a backup of a closed broker (smallSegments) whose queue
// "dq" holds send150's messages, and the broker's clock.
func backupOf150(t *testing.T) ([]byte, *FakeClock) {
	t.Helper()
	clk := NewFakeClock(t0)
	b := openDurableTest(t, t.TempDir(), clk, smallSegments)
	send150(t, mustQueue(t, b, "dq", DefaultQueueConfig()))
	ar := backupTo(t, b, BackupOptions{})
	b.Close()
	return ar, clk
}
