//go:build !linux

package wal

import (
	"errors"
	"fmt"
	"os"
)

// fdatasync falls back to a full fsync where fdatasync is not available.
func fdatasync(f *os.File) error { return f.Sync() }

// fallocate is not available; Preallocate extends the file instead.
func fallocate(*os.File, int64) error { return errFallocateUnsupported }

// freeBytes is not implemented here: callers that guard on free space must
// treat the error (wrapping errors.ErrUnsupported) as "unknown".
func freeBytes(dir string) (int64, error) {
	return 0, fmt.Errorf("wal: free bytes of %s: %w", dir, errors.ErrUnsupported)
}
