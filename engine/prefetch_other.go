//go:build !amd64 && !arm64

package engine

import "unsafe"

// prefetchLines is a no-op where smqd has no prefetch instruction.
func prefetchLines(p unsafe.Pointer, n uintptr) {}
