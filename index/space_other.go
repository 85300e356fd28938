//go:build !linux

package index

import (
	"errors"
	"fmt"
)

// freeBytes is not implemented here: callers that guard on free space must
// treat the error as "unknown".
func freeBytes(dir string) (int64, error) {
	return 0, fmt.Errorf("index: free bytes of %s: %w", dir, errors.ErrUnsupported)
}
