//go:build linux

package index

import (
	"os"
	"syscall"
)

// freeBytes returns f_bavail × f_bsize of the file system holding dir.
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
