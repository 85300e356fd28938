package index

import "github.com/dgraph-io/badger/v4"

// releaseTablePages drops this process's resident pages of the mapped
// tables (see dropTablePages) after making sure none of them can be unmapped
// meanwhile: a table that is in the LSM tree both before and after an
// iterator over all keys is created was in it when the iterator was created,
// so the iterator holds a reference to it, and Badger unmaps a table only
// when its last reference is dropped. Tables created by a compaction in
// between are simply left alone. The caller must hold mu for reading.
func (s *Store) releaseTablePages() int64 {
	before := s.db.Tables()
	txn := s.db.NewTransaction(false)
	defer txn.Discard()
	it := txn.NewIterator(badger.IteratorOptions{}) // pins every table
	defer it.Close()
	after := s.db.Tables()

	inBefore := make(map[uint64]struct{}, len(before))
	for _, t := range before {
		inBefore[t.ID] = struct{}{}
	}
	pinned := make(map[uint64]struct{}, len(after))
	for _, t := range after {
		if _, ok := inBefore[t.ID]; ok {
			pinned[t.ID] = struct{}{}
		}
	}
	return dropTablePages(s.absDir, pinned)
}

// ReleaseMemory drops this process's resident pages of the index's table
// files and returns the bytes of mappings advised. The pages stay in the
// page cache, so nothing is lost and a later read maps them back without
// I/O. Meant for idle periods (a broker with no traffic); safe at any time.
func (s *Store) ReleaseMemory() (int64, error) {
	if err := s.acquire(); err != nil {
		return 0, err
	}
	defer s.mu.RUnlock()
	return s.releaseTablePages(), nil
}
