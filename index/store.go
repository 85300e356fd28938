package index

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Store is the broker's checkpointed state in one Badger database.
//
// All methods are safe for concurrent use. mu is held for reading by every
// call for its whole duration and for writing by Close, so Close waits for
// running scans and commits, and nothing touches db after it is closed.
// Commits are serialized by commitMu (invariant 4).
type Store struct {
	dir      string
	absDir   string       // dir with symlinks resolved, as /proc/self/maps shows it
	opts     Options      // with defaults applied
	log      *slog.Logger // never nil
	maxValue int          // largest value a Batch accepts

	mu     sync.RWMutex // guards closed and the lifetime of db
	closed bool         // set once by Close; guarded by mu
	db     *badger.DB   // nil after Close

	commitMu    sync.Mutex // serializes Commit; guards the three fields below
	writeErr    error      // first failed Commit write; sticky
	scratch     keyChunks  // copies of keys found by DeleteQueue scans
	lastRelease time.Time  // last releaseTablePages by Commit

	hooks testHooks // test-only fault injection; zero in production
}

// testHooks lets white-box tests stop a commit at chosen points, as a crash
// would. Every field is nil outside tests.
type testHooks struct {
	// afterData runs in Commit after the data part of a batch is durable and
	// before the position is written. A non-nil error aborts the commit there
	// and is returned, leaving exactly what a crash at that moment leaves.
	afterData func() error
}

// Open opens (or creates) the index in dir.
//
// Before Badger sees the directory, Open checks it for damage that Badger
// would otherwise repair by discarding data (doc.go, "Damaged directories");
// such damage, and table checksum failures, fail with an error wrapping
// ErrCorrupt. Open never comes up with committed data silently missing in
// the cases listed there.
func Open(dir string, opts Options) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	log := opts.Logger
	start := time.Now()

	if err := makeDir(dir); err != nil {
		return nil, err
	}
	absDir, err := filepath.Abs(dir)
	if err == nil {
		absDir, err = filepath.EvalSymlinks(absDir)
	}
	if err != nil {
		return nil, fmt.Errorf("index: resolve %s: %w", dir, err)
	}
	bo := opts.badgerOptions(dir)
	unlock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	err = checkDir(dir, bo, log)
	unlock() // Badger takes its own lock next
	if err != nil {
		return nil, err
	}
	checked := time.Since(start)
	db, err := openBadger(bo)
	if err != nil {
		// Badger does not wrap causes, so its error cannot be classified;
		// the damage checkDir knows about has already been ruled out.
		return nil, fmt.Errorf("index: open badger in %s: %w", dir, err)
	}
	if n, err := privateFiles(dir); err != nil {
		_ = db.Close()
		return nil, err
	} else if n > 0 {
		log.Info("index made its files private (0600)", "dir", dir, "files", n)
	}
	s := &Store{
		dir:      dir,
		absDir:   absDir,
		opts:     opts,
		log:      log,
		maxValue: opts.maxValueBytes(),
		db:       db,
	}
	// The position is read now so that a malformed one fails Open, not the
	// engine's first call.
	pos, ok, err := s.Position()
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	log.Info("index opened", "dir", dir, "position", pos, "has_position", ok,
		"tables", len(db.Tables()), "checked", checked, "elapsed", time.Since(start))
	return s, nil
}

// openBadger opens Badger, turning a panic while reading damaged files into
// an error. (Badger's log.Fatalf assertions cannot be caught; checkDir keeps
// known triggers of those away from it.)
func openBadger(bo badger.Options) (db *badger.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("%w: badger panicked while opening: %v", ErrCorrupt, r)
		}
	}()
	return badger.Open(bo)
}

// acquire takes mu for reading and fails if the store is closed. The caller
// must call s.mu.RUnlock when acquire returns nil.
func (s *Store) acquire() error {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return ErrClosed
	}
	return nil
}

// Close flushes Badger's memtables and closes the database. It waits for
// running calls. A second Close returns ErrClosed, as does every later call.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.closed = true
	err := s.db.Close()
	s.db = nil
	if err != nil {
		s.log.Error("index close failed", "dir", s.dir, "err", err)
		return fmt.Errorf("index: close %s: %w", s.dir, err)
	}
	s.log.Info("index closed", "dir", s.dir)
	return nil
}

// Position returns the checkpoint position: every WAL record before it is
// reflected in the index. ok is false on a store that never had one.
func (s *Store) Position() (pos uint64, ok bool, err error) {
	if err := s.acquire(); err != nil {
		return 0, false, err
	}
	defer s.mu.RUnlock()
	err = s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(positionKey())
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			p, good := decodePosition(v)
			if !good {
				return fmt.Errorf("%w: position value has %d bytes, want %d", ErrCorrupt, len(v), positionLen)
			}
			pos, ok = p, true
			return nil
		})
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("index: read position: %w", err)
	}
	return pos, ok, nil
}

// Meta returns a copy of metadata entry name, or nil, nil if it is absent.
func (s *Store) Meta(name string) ([]byte, error) {
	if len(name) > MaxMetaNameBytes {
		return nil, fmt.Errorf("%w: Meta name of %d bytes", ErrKeyTooLarge, len(name))
	}
	val, err := s.get(appendMetaKey(nil, name))
	if err != nil {
		return nil, fmt.Errorf("index: read meta %q: %w", name, err)
	}
	return val, nil
}

// get returns a copy of key's value: nil if the key is absent, empty but
// not nil if its value is.
func (s *Store) get(key []byte) ([]byte, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	var val []byte
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(key)
		if err != nil {
			return err
		}
		val, err = item.ValueCopy(nil)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if val == nil {
		val = []byte{} // present but empty: distinguish from absent
	}
	return val, nil
}

// Queues calls fn for every queue in id order. val is valid only during the
// call. An error from fn stops the scan and is returned as is.
func (s *Store) Queues(fn func(id uint64, val []byte) error) error {
	return s.scan(prefixQueue, func(k, v []byte) error {
		id, ok := parseQueueKey(k)
		if !ok {
			return fmt.Errorf("%w: malformed queue key %x", ErrCorrupt, k)
		}
		return fn(id, v)
	})
}

// Topics calls fn for every topic in id order. val is valid only during the
// call. An error from fn stops the scan and is returned as is.
func (s *Store) Topics(fn func(id uint64, val []byte) error) error {
	return s.scanIDs(prefixTopic, "topic", fn)
}

// Subscriptions calls fn for every subscription in id order. val is valid
// only during the call. An error from fn stops the scan and is returned as is.
func (s *Store) Subscriptions(fn func(id uint64, val []byte) error) error {
	return s.scanIDs(prefixSub, "subscription", fn)
}

// TopicCounts calls fn for every topic's publish counts in id order. val is
// valid only during the call. An error from fn stops the scan and is
// returned as is.
func (s *Store) TopicCounts(fn func(id uint64, val []byte) error) error {
	return s.scanIDs(prefixCount, "topic count", fn)
}

// scanIDs scans the id key space prefix (what names it in errors).
func (s *Store) scanIDs(prefix byte, what string, fn func(id uint64, val []byte) error) error {
	return s.scan(prefix, func(k, v []byte) error {
		id, ok := parseIDKey(k, prefix)
		if !ok {
			return fmt.Errorf("%w: malformed %s key %x", ErrCorrupt, what, k)
		}
		return fn(id, v)
	})
}

// TopicCount returns a copy of topic id's publish counts, or nil if it has
// none.
func (s *Store) TopicCount(id uint64) ([]byte, error) {
	val, err := s.get(appendIDKey(nil, prefixCount, id))
	if err != nil {
		return nil, fmt.Errorf("index: read the counts of topic %d: %w", id, err)
	}
	return val, nil
}

// HasQueue reports whether queue id is in the store (its PutQueue committed
// and no DeleteQueue after it).
func (s *Store) HasQueue(id uint64) (bool, error) {
	val, err := s.get(appendQueueKey(nil, id))
	if err != nil {
		return false, fmt.Errorf("index: read queue %d: %w", id, err)
	}
	return val != nil, nil
}

// Messages calls fn for every message of every queue in key order (queue id,
// then seq). val is valid only during the call. An error from fn stops the
// scan and is returned as is. This is the start-up path; see doc.go
// ("Tuning") for its measured speed.
func (s *Store) Messages(fn func(queueID, seq uint64, val []byte) error) error {
	return s.scan(prefixMessage, func(k, v []byte) error {
		q, seq, ok := parseMessageKey(k)
		if !ok {
			return fmt.Errorf("%w: malformed message key %x", ErrCorrupt, k)
		}
		return fn(q, seq, v)
	})
}

// scan iterates over the live keys starting with prefix, in key order, in one
// read snapshot. Values are inline (invariant 5), so they are read straight
// from the iterator's copy of the table entry; nothing is prefetched. Every
// Options.ScanReleaseBytes of keys and values, and at the end, the mapped
// table pages the scan has made resident are released.
func (s *Store) scan(prefix byte, fn func(k, v []byte) error) (err error) {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	// Tables are verified at Open only (doc.go); if one is damaged while the
	// store is open, Badger's block decoding may panic here. That becomes
	// ErrCorrupt; a panic in fn is the caller's and is passed on.
	inFn := false
	defer func() {
		if r := recover(); r != nil {
			if inFn {
				panic(r)
			}
			err = fmt.Errorf("%w: reading tables: %v", ErrCorrupt, r)
		}
	}()
	txn := s.db.NewTransaction(false)
	defer txn.Discard()
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefix}})
	defer it.Close()

	releaseEvery := s.opts.ScanReleaseBytes
	var read, released int64 // bytes of keys and values seen; at the last release
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		k := item.Key()
		if err := item.Value(func(v []byte) error {
			read += int64(len(k) + len(v) + scanEntryOverhead)
			inFn = true
			err := fn(k, v)
			inFn = false
			return err
		}); err != nil {
			return err
		}
		if releaseEvery > 0 && read-released >= releaseEvery {
			s.releaseTablePages()
			released = read
		}
	}
	if releaseEvery > 0 && read > 0 {
		s.releaseTablePages()
	}
	return nil
}

// scanEntryOverhead approximates the bytes a table entry takes beyond its key
// and value (entry header, version, value meta, offset slot), so that scan's
// byte count tracks the table bytes it has touched.
const scanEntryOverhead = 20
