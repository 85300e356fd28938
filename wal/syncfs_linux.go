//go:build linux

package wal

import (
	"os"

	"golang.org/x/sys/unix"
)

// NewSharedSyncFS returns a SharedSyncFS whose flushes are syncfs(2) of the
// file system holding dir (which must exist). syncfs writes back every
// dirty page of that file system and flushes the device, and reports a
// write-back error of any of its files that happened since dir was opened
// here (linux 5.8 and later).
func NewSharedSyncFS(dir string) (*SharedSyncFS, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	fd := int(d.Fd())
	s := NewSharedSync(OSFS(), func() error {
		for {
			err := unix.Syncfs(fd)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return &os.PathError{Op: "syncfs", Path: d.Name(), Err: err}
			}
			return nil
		}
	})
	s.close = d.Close
	return s, nil
}
