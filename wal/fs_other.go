//go:build !linux

package wal

import "os"

// fdatasync falls back to a full fsync where fdatasync is not available.
func fdatasync(f *os.File) error { return f.Sync() }

// fallocate is not available; Preallocate extends the file instead.
func fallocate(*os.File, int64) error { return errFallocateUnsupported }
