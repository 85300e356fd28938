//go:build linux

package wal

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// pageStates counts the pages of path's first size bytes that the kernel
// holds dirty or under writeback, read from the page flags of the page
// cache (/proc/self/pagemap and /proc/kpageflags; root only).
func pageStates(t *testing.T, path string, size int) (pending, pages int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(data)
	ps := os.Getpagesize()
	pm, err := os.Open("/proc/self/pagemap")
	if err != nil {
		t.Skipf("no pagemap: %v", err)
	}
	defer pm.Close()
	kf, err := os.Open("/proc/kpageflags")
	if err != nil {
		t.Skipf("no kpageflags (needs root): %v", err)
	}
	defer kf.Close()
	var b [8]byte
	var sum byte
	for off := 0; off < size; off += ps {
		sum += data[off] // fault the page into this mapping
		va := uintptr(unsafe.Pointer(&data[off]))
		if _, err := pm.ReadAt(b[:], int64(va/uintptr(ps))*8); err != nil {
			t.Fatal(err)
		}
		e := binary.LittleEndian.Uint64(b[:])
		pfn := e & (1<<55 - 1)
		if e&(1<<63) == 0 || pfn == 0 {
			t.Skip("pagemap hides page frame numbers (needs CAP_SYS_ADMIN)")
		}
		if _, err := kf.ReadAt(b[:], int64(pfn)*8); err != nil {
			t.Fatal(err)
		}
		fl := binary.LittleEndian.Uint64(b[:])
		const kpfDirty, kpfWriteback = 1 << 4, 1 << 8
		if fl&(kpfDirty|kpfWriteback) != 0 {
			pending++
		}
		pages++
	}
	pageSink = sum
	return pending, pages
}

// pageSink keeps the page-touching loads from being optimised away.
var pageSink byte

// requireDiskFS skips on file systems whose fsync writes nothing (tmpfs):
// their pages stay dirty whatever the flush does.
func requireDiskFS(t *testing.T, dir string) {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type == unix.TMPFS_MAGIC || st.Type == unix.RAMFS_MAGIC {
		t.Skipf("%s is a memory file system", dir)
	}
}

// TestFdatasyncWritesDirtyPages: after fdatasync returns, no page of what
// was written is still dirty or under writeback in the page cache. The
// power-loss tests run on a simulated file system that records what a
// flush covers; this checks the real system call behind it. (Seen failing
// with fdatasync made a no-op: every page was still dirty.)
func TestFdatasyncWritesDirtyPages(t *testing.T) {
	dir := t.TempDir()
	requireDiskFS(t, dir)
	path := filepath.Join(dir, "seg")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const size = 1 << 20
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = byte(i*7 + 1)
	}
	// Two rounds: the second rewrites pages already on disk, as in a
	// recycled segment.
	for round := range 2 {
		if _, err := f.WriteAt(buf, 0); err != nil {
			t.Fatal(err)
		}
		pending, pages := pageStates(t, path, size)
		if pending < pages/2 {
			// The kernel's own writeback got there first (memory
			// pressure): nothing here to judge the flush by.
			t.Skipf("round %d: only %d of %d pages dirty right after the write", round, pending, pages)
		}
		if err := (osFile{f}).Sync(); err != nil {
			t.Fatal(err)
		}
		if pending, _ = pageStates(t, path, size); pending != 0 {
			t.Fatalf("round %d: %d of %d pages still dirty or under writeback after Sync", round, pending, pages)
		}
	}
}

// TestFdatasyncError: a flush the kernel refuses comes back as its errno,
// which the log makes sticky (a pipe cannot be fsynced: EINVAL).
func TestFdatasyncError(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	err = fdatasync(pw)
	if !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("fdatasync of a pipe: %v, want EINVAL", err)
	}
	var pe *os.PathError
	if !errors.As(err, &pe) || pe.Op != "fdatasync" {
		t.Fatalf("fdatasync of a pipe: %#v, want an *os.PathError of op fdatasync", err)
	}
}
