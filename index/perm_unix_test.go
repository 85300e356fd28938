//go:build unix

package index

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// modes returns the permission bits of dir and of every file in it.
func modes(t *testing.T, dir string) (fs.FileMode, map[string]fs.FileMode) {
	t.Helper()
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]fs.FileMode{}
	for _, e := range ents {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			files[e.Name()] = info.Mode().Perm()
		}
	}
	return fi.Mode().Perm(), files
}

// TestPrivateModes: the index directory is 0700 (created so, or tightened)
// and every file in it is 0600 once Open returns, even with umask 0, where
// Badger creates tables, memtable WALs and its LOCK file 0666. With the
// daemon's umask 077 the files Badger creates later are 0600 too.
func TestPrivateModes(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	root := t.TempDir()
	dir := filepath.Join(root, "data", "index")
	s := openT(t, dir, testOptions(t))
	want := newState()
	commitMessages(t, s, &want, 1, 0, 2000, 1, 10)
	if err := s.Close(); err != nil { // flushes: tables created 0666 under umask 0
		t.Fatal(err)
	}
	// An older version's directory: 0755.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s = openT(t, dir, testOptions(t))
	for _, d := range []string{filepath.Join(root, "data"), dir} {
		if m, _ := modes(t, d); m != dirPerm {
			t.Errorf("%s has mode %v, want %v", d, m, dirPerm)
		}
	}
	dm, files := modes(t, dir)
	if len(files) < 3 {
		t.Fatalf("only %d files in %s", len(files), dir)
	}
	for name, m := range files {
		if m != filePerm {
			t.Errorf("after Open: %s has mode %v, want %v (dir %v)", name, m, filePerm, dm)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// The daemon's umask: files Badger creates while open are private too.
	syscall.Umask(0o077)
	s = openT(t, dir, testOptions(t))
	commitMessages(t, s, &want, 2, 0, 2000, 1, 20)
	if err := s.Compact(); err != nil {
		t.Fatal(err)
	}
	_, files = modes(t, dir)
	for name, m := range files {
		if m != filePerm {
			t.Errorf("with umask 077: %s has mode %v, want %v", name, m, filePerm)
		}
	}
}
