//go:build amd64 || arm64

package engine

import "unsafe"

// prefetchLines hints the CPU to load the n bytes at p (at least one cache
// line) into its caches. It never faults, whatever p is.
//
//go:noescape
func prefetchLines(p unsafe.Pointer, n uintptr)
