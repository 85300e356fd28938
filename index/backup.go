package index

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// Backup writes every key of the store, as of one instant, to w in
// Badger's backup stream format (a full backup, with the checkpoint
// position among the keys), for Restore. The store goes on meanwhile;
// Close waits for a running Backup, which ends at its next write once w
// fails.
func (s *Store) Backup(w io.Writer) error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	if _, err := s.db.Backup(w, 0); err != nil {
		return fmt.Errorf("index: backup: %w", err)
	}
	return nil
}

// Restore creates the index in dir, which must not exist or be empty,
// from a stream written by Backup. What it restored is durable when it
// returns. Open then opens dir as it would have opened the store backed up.
func Restore(dir string, r io.Reader, opts Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	opts = opts.withDefaults()
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return fmt.Errorf("index: restore into %s: the directory is not empty", dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("index: restore into %s: %w", dir, err)
	}
	if err := makeDir(dir); err != nil {
		return err
	}
	db, err := openBadger(opts.badgerOptions(dir))
	if err != nil {
		return fmt.Errorf("index: restore: open badger in %s: %w", dir, err)
	}
	err = db.Load(r, 256)
	if err != nil {
		err = fmt.Errorf("index: restore: %w", err)
	}
	if cerr := db.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("index: restore: close: %w", cerr)
	}
	return err
}
