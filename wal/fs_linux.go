//go:build linux

package wal

import (
	"errors"
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// fdatasync flushes the file's data and the metadata needed to read it back
// (the size), not its timestamps.
// EINTR is retried: fdatasync has no partial effect to undo. Every other
// error is returned as is and, in the log, made sticky: after a failed
// fsync the kernel may have dropped the dirty pages, so a retry that
// succeeds proves nothing (the "fsyncgate" lesson).
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}

// fallocate allocates [0, size) (mode 0: the file size grows, KEEP_SIZE off).
func fallocate(f *os.File, size int64) error {
	for {
		err := syscall.Fallocate(int(f.Fd()), 0, 0, size)
		switch {
		case err == nil:
			return nil
		case err == syscall.EINTR:
			continue
		case errors.Is(err, syscall.EOPNOTSUPP), errors.Is(err, syscall.ENOSYS):
			return errFallocateUnsupported
		default:
			return &os.PathError{Op: "fallocate", Path: f.Name(), Err: err}
		}
	}
}

// freeBytes returns f_bavail × f_bsize of the file system holding dir: the
// space left to unprivileged users (root may dip into the reserved blocks
// beyond it, but the daemon should not count on that).
func freeBytes(dir string) (int64, error) {
	var st syscall.Statfs_t
	for {
		err := syscall.Statfs(dir, &st)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return 0, &os.PathError{Op: "statfs", Path: dir, Err: err}
		}
		return int64(st.Bavail) * int64(st.Bsize), nil //nolint:unconvert // Bsize is int32 on 386
	}
}

// WriteVecAt writes bufs back to back from off with pwritev: one system
// call for what would be several pwrites (a ring span that wraps, and the
// end mark of a recycled segment; writer.go). Short writes are resumed.
func (o osFile) WriteVecAt(bufs [][]byte, off int64) (int, error) {
	total := 0
	for len(bufs) > 0 {
		n, err := unix.Pwritev(int(o.f.Fd()), bufs, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return total, &os.PathError{Op: "pwritev", Path: o.f.Name(), Err: err}
		}
		if n == 0 {
			return total, &os.PathError{Op: "pwritev", Path: o.f.Name(), Err: io.ErrShortWrite}
		}
		total += n
		off += int64(n)
		for len(bufs) > 0 && n >= len(bufs[0]) {
			n -= len(bufs[0])
			bufs = bufs[1:]
		}
		if n > 0 {
			bufs[0] = bufs[0][n:]
		}
	}
	return total, nil
}
