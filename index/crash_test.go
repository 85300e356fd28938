package index

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// noL0CompactionOnClose returns test options under which Close only
// flushes the memtable into a new level-0 table, so that each session
// leaves exactly one new table behind.
func noL0CompactionOnClose(t *testing.T) Options {
	o := testOptions(t)
	o.tweak = func(bo *badger.Options) { bo.CompactL0OnClose = false }
	return o
}

// buildClosedStore writes two sessions of commits, each ended by a clean
// Close, so the directory holds two tables, a MANIFEST and no memtable
// data. It returns the directory, what it holds, and a copy of the MANIFEST
// as it was after the first session.
func buildClosedStore(t *testing.T) (dir string, want state, manifest1 []byte) {
	t.Helper()
	dir = t.TempDir()
	want = newState()
	opts := noL0CompactionOnClose(t)
	s := openT(t, dir, opts)
	b := s.NewBatch()
	b.PutQueue(1, []byte("q1"))
	b.PutQueue(2, []byte("q2"))
	want.queues[1], want.queues[2] = "q1", "q2"
	if err := s.Commit(b); err != nil {
		t.Fatal(err)
	}
	commitMessages(t, s, &want, 1, 0, 5000, 1, 10)
	commitMessages(t, s, &want, 2, 0, 5000, 1, 20)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	manifest1, err := os.ReadFile(filepath.Join(dir, manifestName))
	if err != nil {
		t.Fatal(err)
	}
	s = openT(t, dir, opts)
	commitMessages(t, s, &want, 1, 5000, 8000, 2, 30)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(filesWithExt(t, dir, tableExt)); n < 2 {
		t.Fatalf("fixture has %d tables, want at least 2", n)
	}
	return dir, want, manifest1
}

// Outcomes of opening a damaged directory.
const (
	wantCorrupt = "corrupt" // Open fails with an error wrapping ErrCorrupt
	wantError   = "error"   // Open fails with Badger's own error
	wantIntact  = "intact"  // Open works and every committed item is there
)

// flipByte inverts one byte of a file.
func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestDamagedDirectory damages a closed store in one way per case and checks
// what Open does. doc.go ("Damaged directories") lists the same cases.
func TestDamagedDirectory(t *testing.T) {
	manifest := func(dir string) string { return filepath.Join(dir, manifestName) }
	firstTable := func(t *testing.T, dir string) string { return filesWithExt(t, dir, tableExt)[0] }
	tests := []struct {
		name   string
		damage func(t *testing.T, dir string, manifest1 []byte)
		want   string
		errHas string // part of the error message, naming the damage
	}{
		{"MANIFEST removed", func(t *testing.T, dir string, _ []byte) {
			os.Remove(manifest(dir))
		}, wantCorrupt, "MANIFEST is missing"},
		{"MANIFEST truncated to 0", func(t *testing.T, dir string, _ []byte) {
			os.Truncate(manifest(dir), 0)
		}, wantCorrupt, "MANIFEST"},
		{"MANIFEST truncated to its magic", func(t *testing.T, dir string, _ []byte) {
			os.Truncate(manifest(dir), 8)
		}, wantCorrupt, "lost records"},
		{"MANIFEST last record cut", func(t *testing.T, dir string, _ []byte) {
			os.Truncate(manifest(dir), fileSize(t, manifest(dir))-1)
		}, wantCorrupt, "lost records"},
		{"MANIFEST cut at a record boundary", func(t *testing.T, dir string, m1 []byte) {
			os.WriteFile(manifest(dir), m1, 0o644)
		}, wantCorrupt, "lost records"},
		{"MANIFEST byte flipped", func(t *testing.T, dir string, _ []byte) {
			flipByte(t, manifest(dir), fileSize(t, manifest(dir))-3)
		}, wantCorrupt, "MANIFEST"},
		{"table removed", func(t *testing.T, dir string, _ []byte) {
			os.Remove(firstTable(t, dir))
		}, wantCorrupt, "missing"},
		{"table byte flipped in a block", func(t *testing.T, dir string, _ []byte) {
			p := firstTable(t, dir)
			flipByte(t, p, fileSize(t, p)/3)
		}, wantCorrupt, "checksum mismatch"},
		{"table byte flipped in the index", func(t *testing.T, dir string, _ []byte) {
			p := firstTable(t, dir)
			flipByte(t, p, fileSize(t, p)-30)
		}, wantCorrupt, ".sst"},
		{"table truncated", func(t *testing.T, dir string, _ []byte) {
			p := firstTable(t, dir)
			os.Truncate(p, fileSize(t, p)/2)
		}, wantCorrupt, ".sst"},
		{"table footer overwritten", func(t *testing.T, dir string, _ []byte) {
			p := firstTable(t, dir)
			f, _ := os.OpenFile(p, os.O_RDWR, 0)
			f.WriteAt([]byte{0xff, 0xff, 0xff, 0xff}, fileSize(t, p)-4)
			f.Close()
		}, wantCorrupt, "exceeds the file"},
		{"table emptied", func(t *testing.T, dir string, _ []byte) {
			os.Truncate(firstTable(t, dir), 0)
		}, wantCorrupt, "too short"},
		{"value logs removed", func(t *testing.T, dir string, _ []byte) {
			for _, p := range filesWithExt(t, dir, vlogExt) {
				os.Remove(p)
			}
		}, wantIntact, ""},
		{"value log emptied", func(t *testing.T, dir string, _ []byte) {
			os.Truncate(filesWithExt(t, dir, vlogExt)[0], 0)
		}, wantIntact, ""},
		{"value log header cut", func(t *testing.T, dir string, _ []byte) {
			os.Truncate(filesWithExt(t, dir, vlogExt)[0], 10)
		}, wantCorrupt, "value log"},
		{"KEYREGISTRY removed", func(t *testing.T, dir string, _ []byte) {
			os.Remove(filepath.Join(dir, keyRegistryName))
		}, wantIntact, ""},
		{"KEYREGISTRY truncated", func(t *testing.T, dir string, _ []byte) {
			os.Truncate(filepath.Join(dir, keyRegistryName), 5)
		}, wantError, "sanity"},
		{"DISCARD removed", func(t *testing.T, dir string, _ []byte) {
			os.Remove(filepath.Join(dir, "DISCARD"))
		}, wantIntact, ""},
		{"DISCARD truncated", func(t *testing.T, dir string, _ []byte) {
			os.Truncate(filepath.Join(dir, "DISCARD"), 100)
		}, wantIntact, ""},
	}
	fixture, want, m1 := buildClosedStore(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := copyDir(t, fixture)
			tt.damage(t, dir, m1)
			s, err := Open(dir, testOptions(t))
			switch tt.want {
			case wantIntact:
				if err != nil {
					t.Fatalf("Open = %v, want the store intact", err)
				}
				defer s.Close()
				if d := diffState(readState(t, s), want); d != "" {
					t.Fatalf("store is not intact: %s", d)
				}
				return
			case wantCorrupt:
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Open = %v, want ErrCorrupt", err)
				}
			case wantError:
				if err == nil {
					s.Close()
					t.Fatal("Open succeeded, want an error")
				}
			}
			if !strings.Contains(err.Error(), tt.errHas) {
				t.Fatalf("Open error %q does not mention %q", err, tt.errHas)
			}
			t.Logf("Open: %v", err)
		})
	}
}

// TestUnreferencedTableFromInterruptedFlush builds the directory a crash
// leaves between a memtable flush writing its table and recording it in the
// MANIFEST: the table is not in the MANIFEST, but its memtable WAL is still
// there. That is not damage: Open works, Badger deletes the table and
// replays the WAL, and everything is there.
func TestUnreferencedTableFromInterruptedFlush(t *testing.T) {
	dir := t.TempDir()
	want := newState()
	opts := noL0CompactionOnClose(t)
	s := openT(t, dir, opts)
	commitMessages(t, s, &want, 1, 0, 3000, 1, 10)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before := filesWithExt(t, dir, tableExt)
	s = openT(t, dir, opts)
	commitMessages(t, s, &want, 1, 3000, 6000, 2, 20)
	image := crashImage(t, dir) // WAL with the second session, no table yet
	if err := s.Close(); err != nil {
		t.Fatal(err) // flushes the second session into a new table
	}
	var added []string
	for _, p := range filesWithExt(t, dir, tableExt) {
		if !contains(before, p) {
			added = append(added, p)
		}
	}
	if len(added) != 1 {
		t.Fatalf("close added %d tables", len(added))
	}
	copyFile(t, added[0], filepath.Join(image, filepath.Base(added[0])))

	c := openT(t, image, testOptions(t))
	if d := diffState(readState(t, c), want); d != "" {
		t.Fatal(d)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// crashImageWithWAL commits n small batches (each with a position, each
// well inside one memtable) and returns a crash image whose only memtable
// WAL holds them, the WAL's path, and the state after each commit
// (states[0] is the empty store).
func crashImageWithWAL(t *testing.T, n int) (image, wal string, states []state) {
	t.Helper()
	dir := t.TempDir()
	s := openT(t, dir, testOptions(t))
	want := newState()
	states = append(states, cloneState(want))
	for i := 1; i <= n; i++ {
		q := uint64(i % 3)
		commitMessages(t, s, &want, q, uint64(i)*100, uint64(i)*100+50, byte(i), uint64(i))
		states = append(states, cloneState(want))
	}
	image = crashImage(t, dir)
	wals := filesWithExt(t, image, memExt)
	if len(wals) != 1 {
		t.Fatalf("image has %d memtable WALs, want 1", len(wals))
	}
	return image, wals[0], states
}

func cloneState(s state) state {
	c := newState()
	c.pos, c.hasPos = s.pos, s.hasPos
	for k, v := range s.queues {
		c.queues[k] = v
	}
	for k, v := range s.messages {
		c.messages[k] = v
	}
	return c
}

// copyDir copies every file of src into a new directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		copyFile(t, filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()))
	}
	return dst
}

// TestMemWALTruncated cuts the newest (only) memtable WAL of a crash image
// at offsets all through its entries, as a torn write or a truncation would,
// and checks that Open recovers a prefix of the commits and that the
// position never claims more than what survived: with position k, all of
// commits 1..k are there, and nothing after commit k+1 (invariants 2, 3).
func TestMemWALTruncated(t *testing.T) {
	const commits = 12
	image, wal, states := crashImageWithWAL(t, commits)
	w, err := scanMemWAL(wal, true)
	if err != nil {
		t.Fatal(err)
	}
	if w.txns != 2*commits { // one data and one position transaction each
		t.Fatalf("WAL has %d transactions, want %d", w.txns, 2*commits)
	}
	pieces := int64(60)
	if testing.Short() {
		pieces = 25
	}
	step := max(w.validEnd/pieces, 1)
	var cuts []int64
	for off := int64(0); off <= w.validEnd; off += step {
		cuts = append(cuts, off)
	}
	cuts = append(cuts, 3, w.validEnd-1, w.validEnd, w.validEnd+1)
	for _, mode := range []string{"cut", "flip"} {
		t.Run(mode, func(t *testing.T) {
			checkMemWALDamage(t, image, wal, states, cuts, mode)
		})
	}
}

// checkMemWALDamage damages the WAL of image at each offset in cuts (mode
// "cut": truncate there; "flip": invert the byte there) and checks what
// Open recovers; see TestMemWALTruncated.
func checkMemWALDamage(t *testing.T, image, wal string, states []state, cuts []int64, mode string) {
	commits := len(states) - 1
	lastK := -1
	for _, cut := range cuts {
		dir := copyDir(t, image)
		p := filepath.Join(dir, filepath.Base(wal))
		if mode == "cut" {
			if err := os.Truncate(p, cut); err != nil {
				t.Fatal(err)
			}
		} else {
			flipByte(t, p, cut)
		}
		s, err := Open(dir, testOptions(t))
		if mode == "flip" && cut < 8 {
			// The key-id field of the header: Badger asks its key
			// registry for that key and fails.
			if err == nil {
				s.Close()
				t.Fatalf("flip at %d: Open succeeded", cut)
			}
			continue
		}
		if mode == "cut" && cut > 0 && cut < memHeaderBytes {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("cut at %d: Open = %v, want ErrCorrupt", cut, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("cut at %d: Open = %v", cut, err)
		}
		got := readState(t, s)
		s.Close()
		// The position says commit k is in; the data must be all of
		// commits 1..k plus possibly commit k+1, whose position
		// transaction was cut off (a crash between the parts).
		k := 0
		if got.hasPos {
			k = int(got.pos)
		}
		if k > commits {
			t.Fatalf("cut at %d: position %d", cut, got.pos)
		}
		for key, v := range states[k].messages {
			if got.messages[key] != v {
				t.Fatalf("cut at %d: position %d claims message %v, which did not survive", cut, k, key)
			}
		}
		upTo := states[min(k+1, commits)]
		for key, v := range got.messages {
			if upTo.messages[key] != v {
				t.Fatalf("cut at %d: message %v survived though commits after %d were cut", cut, key, k+1)
			}
		}
		if mode == "cut" && k < lastK {
			t.Fatalf("cut at %d kept %d commits, fewer than an earlier cut (%d)", cut, k, lastK)
		}
		lastK = k
	}
	if mode == "cut" && lastK != commits {
		t.Fatalf("an uncut WAL kept %d commits, want %d", lastK, commits)
	}
}

// TestOlderMemWALDamaged builds a directory with two memtable WALs, the
// older one complete, and damages the older one. Badger would cut it at the
// damage and go on with the newer WAL, so the position (in the newer WAL)
// would claim data that is gone; Open must refuse instead.
func TestOlderMemWALDamaged(t *testing.T) {
	// older: a crash image whose WAL holds a few commits; newer: the same
	// store later, after its memtable rotated (that WAL's data then sits in
	// a table as well, so putting the old WAL back only duplicates data).
	dir := t.TempDir()
	opts := testOptions(t)
	opts.MemTableBytes = minMemTableBytes
	s := openT(t, dir, opts)
	want := newState()
	commitMessages(t, s, &want, 1, 0, 300, 1, 1)
	older := crashImage(t, dir)
	olderWAL := filesWithExt(t, older, memExt)
	if len(olderWAL) != 1 {
		t.Fatalf("%d WALs", len(olderWAL))
	}
	// Write until the first WAL has been flushed and deleted.
	first := filepath.Base(olderWAL[0])
	deadline := time.Now().Add(20 * time.Second)
	for i := uint64(1); ; i++ {
		commitMessages(t, s, &want, 2, i*1000, i*1000+1000, 2, i+1)
		if _, err := os.Stat(filepath.Join(dir, first)); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("memtable never rotated")
		}
	}
	newer := crashImage(t, dir)

	build := func(t *testing.T, damage func(path string)) string {
		d := copyDir(t, newer)
		p := filepath.Join(d, first)
		copyFile(t, olderWAL[0], p)
		if damage != nil {
			damage(p)
		}
		return d
	}
	w, err := scanMemWAL(olderWAL[0], true)
	if err != nil || w.txns != 2 {
		t.Fatalf("older WAL: %+v, %v", w, err)
	}

	t.Run("intact", func(t *testing.T) {
		c := openT(t, build(t, nil), opts)
		if d := diffState(readState(t, c), want); d != "" {
			t.Fatal(d)
		}
	})
	damages := map[string]func(p string){
		"byte flipped": func(p string) { flipByte(t, p, w.validEnd/2) },
		"cut mid-entry": func(p string) {
			if err := os.Truncate(p, w.validEnd-7); err != nil {
				t.Fatal(err)
			}
		},
		"header cut": func(p string) { os.Truncate(p, 5) },
	}
	for name, damage := range damages {
		t.Run(name, func(t *testing.T) {
			_, err := Open(build(t, damage), opts)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open = %v, want ErrCorrupt", err)
			}
			t.Logf("Open: %v", err)
		})
	}
}
