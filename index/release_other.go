//go:build !linux

package index

// dropTablePages does nothing outside Linux.
func dropTablePages(string, map[uint64]struct{}) int64 { return 0 }
