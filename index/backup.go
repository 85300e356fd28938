package index

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/dgraph-io/badger/v4"
)

// The backup stream (part of the backup format; never change):
//
//	magic "SMQDIDX1"
//	pairs: uvarint len(key) (> 0), key, uvarint len(value), value
//	end:   uvarint 0, then uvarint the count of pairs
//
// The keys are every key of the store, in order, with their values, as of
// one instant. The stream carries no checksum of its own: it travels
// inside engine/archive's checksummed frames.
const backupMagic = "SMQDIDX1"

// ErrBadBackup wraps the errors of Restore about the stream itself.
var ErrBadBackup = errors.New("index: not a whole index backup")

// Backup writes every key of the store with its value, as of one instant
// (a read transaction), to w. It holds no buffer beyond one pair and w's,
// so that a slow w costs no memory. The store goes on meanwhile; Close
// waits for a running Backup, which ends at its next write once w fails.
func (s *Store) Backup(w io.Writer) error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	txn := s.db.NewTransaction(false)
	defer txn.Discard()
	iopt := badger.DefaultIteratorOptions
	iopt.PrefetchValues = false
	it := txn.NewIterator(iopt)
	defer it.Close()
	bw := bufio.NewWriterSize(w, 64<<10)
	if _, err := bw.WriteString(backupMagic); err != nil {
		return err
	}
	var n uint64
	var hdr [binary.MaxVarintLen64]byte
	put := func(b []byte) error {
		if _, err := bw.Write(binary.AppendUvarint(hdr[:0], uint64(len(b)))); err != nil {
			return err
		}
		_, err := bw.Write(b)
		return err
	}
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		if err := put(item.Key()); err != nil {
			return err
		}
		if err := item.Value(put); err != nil {
			return fmt.Errorf("index: backup: %w", err)
		}
		n++
	}
	if _, err := bw.Write(binary.AppendUvarint(binary.AppendUvarint(hdr[:0], 0), n)); err != nil {
		return err
	}
	return bw.Flush()
}

// Restore creates the index in dir, which must not exist or be empty,
// from a stream written by Backup; a stream that is not whole fails with
// ErrBadBackup. What it restored is durable when it returns. Open then
// opens dir as it would have opened the store backed up.
func Restore(dir string, r io.Reader, opts Options) error {
	return restoreWith(dir, opts, func(db *badger.DB) error { return load(db, bufio.NewReaderSize(r, 64<<10)) })
}

// RestoreBadgerStream is Restore for the index stream of backups made
// before the key/value stream (Badger's own backup stream, archive entry
// "index.badger", 2026-12-05).
func RestoreBadgerStream(dir string, r io.Reader, opts Options) error {
	return restoreWith(dir, opts, func(db *badger.DB) error {
		if err := db.Load(r, 256); err != nil {
			return fmt.Errorf("index: restore: %w", err)
		}
		return nil
	})
}

// restoreWith opens a new store in dir (which must not exist or be empty)
// and fills it with fill.
func restoreWith(dir string, opts Options, fill func(*badger.DB) error) error {
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
	err = fill(db)
	if cerr := db.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("index: restore: close: %w", cerr)
	}
	return err
}

// load writes the pairs of a backup stream into db.
func load(db *badger.DB, br *bufio.Reader) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadBackup, fmt.Sprintf(format, args...))
	}
	cut := func(err error) error { // keeps the reader's error (archive.ErrDamaged)
		return fmt.Errorf("%w: cut short: %w", ErrBadBackup, err)
	}
	var mg [len(backupMagic)]byte
	if _, err := io.ReadFull(br, mg[:]); err != nil {
		return cut(err)
	}
	if string(mg[:]) != backupMagic {
		return bad("no %q at its start", backupMagic)
	}
	wb := db.NewWriteBatch()
	defer wb.Cancel()
	read := func(limit uint64) ([]byte, error) {
		n, err := binary.ReadUvarint(br)
		if err != nil {
			return nil, cut(err)
		}
		if n > limit {
			return nil, bad("a key or value of %d bytes", n)
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(br, b); err != nil {
			return nil, cut(err)
		}
		return b, nil
	}
	var n uint64
	for {
		k, err := read(1 << 16)
		if err != nil {
			return err
		}
		if len(k) == 0 {
			break
		}
		v, err := read(maxInlineValueBytes)
		if err != nil {
			return err
		}
		if err := wb.Set(k, v); err != nil {
			return fmt.Errorf("index: restore: %w", err)
		}
		n++
	}
	count, err := binary.ReadUvarint(br)
	if err != nil {
		return cut(err)
	}
	if count != n {
		return bad("it ends after %d pairs, and says %d", n, count)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		if err != nil {
			return cut(err)
		}
		return bad("bytes after its end")
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("index: restore: %w", err)
	}
	return nil
}
