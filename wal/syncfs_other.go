//go:build !linux

package wal

import (
	"errors"
	"fmt"
)

// NewSharedSyncFS is linux-only (syncfs(2)); elsewhere callers keep the
// OS FS, whose files flush themselves.
func NewSharedSyncFS(dir string) (*SharedSyncFS, error) {
	return nil, fmt.Errorf("wal: a shared flush of %s: %w", dir, errors.ErrUnsupported)
}
