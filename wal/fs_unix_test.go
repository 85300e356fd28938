//go:build unix

package wal

import (
	"bytes"
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
	for i := range 100 {
		appendWait(t, l, 1, testPayload(uint64(i), 3000, false))
	}
	segs := l.Segments()
	if len(segs) < 4 {
		t.Fatalf("want >= 4 segments, got %d", len(segs))
	}
	// A middle segment leaves a hole marker (kept while segs[1], before
	// it, is live); the oldest one is recycled.
	if err := l.RemoveSegment(segs[2].Start); err != nil {
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

// TestRecycledSegmentsOneWriteCall: on the OS file system a group-commit
// write into a recycled file is one pwritev, the end mark included (not a
// second pwrite), and the log reopens with a clean end after it (so the
// mark did reach the file) with every record intact.
func TestRecycledSegmentsOneWriteCall(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	opts := testOptions(t, OSFS())
	l := mustOpen(t, dir, opts)
	fillAndRemove(t, l, 300, 1)
	before := l.Stats()
	var want []Record
	for i := 0; i < 200; i++ {
		want = append(want, appendWait(t, l, 2, testPayload(1000+uint64(i), 700, false)))
	}
	if recycledSegments(l) == 0 {
		t.Fatal("no segment was recycled")
	}
	after := l.Stats()
	writes, calls, rolls := after.Writes-before.Writes, after.WriteCalls-before.WriteCalls, after.Rolls-before.Rolls
	if calls > writes+rolls {
		t.Fatalf("%d write calls for %d group-commit writes and %d rolls: the end mark (or a wrap) took calls of its own", calls, writes, rolls)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := mustOpen(t, dir, opts)
	defer l2.Close()
	if ri := l2.Recovery(); ri.TornTail || ri.Corruption != nil {
		t.Fatalf("reopen of recycled segments reported damage: %+v", ri)
	}
	for _, r := range want {
		if _, p, err := l2.ReadAt(r.Pos, 0, nil); err != nil || !bytes.Equal(p, r.Body) {
			t.Fatalf("record at %d: %v", r.Pos, err)
		}
	}
}
