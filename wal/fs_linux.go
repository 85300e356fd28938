//go:build linux

package wal

import (
	"errors"
	"os"
	"syscall"
)

// fdatasync flushes the file's data and the metadata needed to read it back
// (the size), not its timestamps.
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
