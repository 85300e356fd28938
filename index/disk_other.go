//go:build !unix

package index

import "io/fs"

// allocatedBytes returns fi's apparent size (no block counts here).
func allocatedBytes(fi fs.FileInfo) int64 { return fi.Size() }
