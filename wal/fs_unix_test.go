//go:build unix

package wal

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestFileModes: everything the log creates (directories, segments, spares,
// hole markers, recycled spares) is private to the owner, whatever the
// umask (it is cleared here so that only the modes asked for count).
func TestFileModes(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "data", "wal")
	opts := testOptions(t, OSFS())
	l := mustOpen(t, dir, opts)
	for i := range 80 {
		appendWait(t, l, 1, testPayload(uint64(i), 3000, false))
	}
	segs := l.Segments()
	if len(segs) < 3 {
		t.Fatalf("want >= 3 segments, got %d", len(segs))
	}
	// A middle segment leaves a hole marker; the oldest one is recycled.
	if err := l.RemoveSegment(segs[1].Start); err != nil {
		t.Fatal(err)
	}
	if err := l.RemoveSegment(segs[0].Start); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	check := func(path string, want fs.FileMode) {
		t.Helper()
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s has mode %v, want %v", path, got, want)
		}
	}
	check(filepath.Dir(dir), 0o700)
	check(dir, 0o700)
	names, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range names {
		kinds[filepath.Ext(e.Name())]++
		check(filepath.Join(dir, e.Name()), 0o600)
	}
	if kinds[segSuffix] == 0 || kinds[holeSuffix] == 0 || kinds[spareSuffix] == 0 {
		t.Fatalf("want segment, hole and spare files, have %v", kinds)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestFreeBytesOS: statfs of a real directory reports a plausible number,
// and a missing one an error.
func TestFreeBytesOS(t *testing.T) {
	dir := t.TempDir()
	n, err := FreeBytes(dir)
	if err != nil || n <= 0 {
		t.Fatalf("FreeBytes(%s) = %d, %v", dir, n, err)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if total := int64(st.Blocks) * int64(st.Bsize); n > total { //nolint:unconvert // Bsize is int32 on some platforms
		t.Fatalf("free %d > total %d", n, total)
	}
	if _, err := FreeBytes(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("FreeBytes of a missing directory: no error")
	}
}
