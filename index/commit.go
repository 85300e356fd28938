package index

import (
	"encoding/binary"
	"fmt"
	"os"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Commit applies b to the store in two parts (invariant 2):
//
//  1. the data part: every operation of b, through a Badger WriteBatch
//     (which splits it into as many transactions as needed, so batches of
//     hundreds of thousands of entries work), then a sync of the directory;
//     with SyncWrites each transaction is msynced before it is acknowledged,
//     so when this part returns all of it is durable;
//  2. the position part: if b has a position, one more transaction that
//     writes it, also synced.
//
// A crash during part 1 may leave a prefix of part 1's transactions and the
// old position; a crash between the parts leaves all of part 1 and the old
// position. Either way replaying the WAL from the stored position
// reproduces the batch (the engine's replay is idempotent).
//
// Commit does not change b; Reset it to reuse its memory. An invalid batch
// (ErrValueTooLarge, ErrKeyTooLarge) is rejected before anything is written.
// A failed write is sticky: every later Commit returns it, since what Badger
// made durable is then unknown; reopen the store to go on.
func (s *Store) Commit(b *Batch) error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	if b.err != nil {
		return b.err
	}
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	if s.writeErr != nil {
		return fmt.Errorf("index: an earlier commit failed: %w", s.writeErr)
	}

	if len(b.ops) > 0 {
		if err := s.writeDataLocked(b); err != nil {
			s.log.Error("index commit failed", "part", "data", "entries", len(b.ops), "err", err)
			s.writeErr = fmt.Errorf("index: commit %d entries: %w", len(b.ops), err)
			return s.writeErr
		}
	}
	if s.hooks.afterData != nil {
		if err := s.hooks.afterData(); err != nil {
			return err
		}
	}
	if b.hasPos {
		if err := s.writePositionLocked(b.pos); err != nil {
			s.log.Error("index commit failed", "part", "position", "position", b.pos, "err", err)
			s.writeErr = fmt.Errorf("index: commit position %d: %w", b.pos, err)
			return s.writeErr
		}
	}
	if every := s.opts.CommitReleaseInterval; every > 0 && time.Since(s.lastRelease) >= every {
		s.releaseTablePages()
		s.lastRelease = time.Now()
	}
	return nil
}

// writePositionLocked writes the position in a transaction of its own,
// synced before it returns. commitMu must be held.
func (s *Store) writePositionLocked(pos uint64) error {
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	if err := txn.Set(positionKey(), encodePosition(pos)); err != nil {
		return err
	}
	return txn.Commit()
}

// writeDataLocked writes the data part of b and returns once it is durable.
// commitMu must be held.
func (s *Store) writeDataLocked(b *Batch) error {
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()

	// lastDelete maps each queue deleted by b to the index of its last
	// DeleteQueue operation: message operations of that queue recorded
	// before it are void.
	var lastDelete map[uint64]int
	if b.deletes > 0 {
		lastDelete = make(map[uint64]int, b.deletes)
		for i, o := range b.ops {
			if o.kind == opDeleteQueue {
				id, _ := parseQueueKey(b.key(o))
				lastDelete[id] = i
			}
		}
		// Tombstones for the messages already in the store go first, so
		// that puts recorded after the DeleteQueue (written later, with a
		// higher version) win.
		for id := range lastDelete {
			if err := s.deleteStoredMessagesLocked(wb, id); err != nil {
				return err
			}
		}
	}

	for i, o := range b.ops {
		key := b.key(o)
		if lastDelete != nil && (o.kind == opPutMessage || o.kind == opDeleteMessage) {
			if last, ok := lastDelete[binary.BigEndian.Uint64(key[1:9])]; ok && i < last {
				continue
			}
		}
		var err error
		switch o.kind {
		case opPutMeta, opPutQueue, opPutMessage, opPutTopic, opPutSub, opPutCount:
			err = wb.Set(key, b.value(o))
		case opDeleteQueue, opDeleteMessage, opDeleteTopic, opDeleteSub, opDeleteCount:
			err = wb.Delete(key)
		default:
			panic(fmt.Sprintf("index: batch holds unknown %v", o.kind))
		}
		if err != nil {
			return err
		}
	}
	if err := wb.Flush(); err != nil {
		return err
	}
	// A new memtable WAL may have been created during this part; make its
	// directory entry durable before the position can land in a later one.
	return syncDir(s.dir)
}

// deleteStoredMessagesLocked adds a tombstone to wb for every message of
// queue id in the store. commitMu must be held (it guards scratch).
func (s *Store) deleteStoredMessagesLocked(wb *badger.WriteBatch, id uint64) error {
	txn := s.db.NewTransaction(false)
	defer txn.Discard()
	it := txn.NewIterator(badger.IteratorOptions{Prefix: appendMessagePrefix(nil, id)})
	defer it.Close()
	n := 0
	for it.Rewind(); it.Valid(); it.Next() {
		// wb keeps the key until its transaction is written; the iterator
		// reuses its buffer, so each key is copied.
		if err := wb.Delete(s.scratch.copy(it.Item().Key())); err != nil {
			return err
		}
		n++
	}
	s.log.Debug("index queue delete", "queue", id, "messages", n)
	return nil
}

// keyChunks hands out copies of keys from 64 KiB chunks. A chunk is never
// reallocated, so a copy stays valid while anything references it; a full
// chunk is dropped and collected once its keys are written.
type keyChunks struct {
	buf []byte // current chunk; len is the used part
}

const keyChunkBytes = 64 << 10

func (c *keyChunks) copy(k []byte) []byte {
	if cap(c.buf)-len(c.buf) < len(k) {
		c.buf = make([]byte, 0, max(keyChunkBytes, len(k)))
	}
	start := len(c.buf)
	c.buf = append(c.buf, k...)
	return c.buf[start:len(c.buf):len(c.buf)]
}

// syncDir fsyncs directory dir so that files created in it survive a crash.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
