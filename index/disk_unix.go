//go:build unix

package index

import (
	"io/fs"
	"syscall"
)

// allocatedBytes returns the bytes fi occupies on disk (st_blocks * 512).
func allocatedBytes(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512
	}
	return fi.Size()
}
