package index

import (
	"io/fs"
	"path/filepath"
)

// DiskBytes returns the disk space used by the store's directory: the sum
// of the allocated size of every file in it (LSM tables, MANIFEST, memtable
// WALs, value log). Badger preallocates memtable WALs and the value log as
// sparse files, so allocated blocks, not apparent sizes, are counted; on
// platforms without block counts the apparent size is used. It returns 0
// after Close.
func (s *Store) DiskBytes() int64 {
	if err := s.acquire(); err != nil {
		return 0
	}
	defer s.mu.RUnlock()
	return dirBytes(s.dir)
}

// dirBytes sums allocatedBytes over the regular files under dir. Files that
// vanish during the walk (a compaction deleting a table) are skipped.
func dirBytes(dir string) int64 {
	var total int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			total += allocatedBytes(fi)
		}
		return nil
	})
	return total
}

// Compact forces Badger to compact the whole LSM tree into one level, which
// drops deleted keys and overwritten versions now rather than as the
// background compactors get to them. It blocks (seconds for millions of
// keys) and is meant for tests and maintenance, not the hot path.
// Tombstones still in the memtable are not affected until it is flushed.
func (s *Store) Compact() error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	return s.db.Flatten(1)
}
