package index

import "errors"

// Sentinel errors returned by the index package. Callers compare with
// errors.Is; the messages all start with "index:".
var (
	// ErrClosed is returned by every call on a Store after Close, including a
	// second Close.
	ErrClosed = errors.New("index: store is closed")

	// ErrCorrupt wraps every error that means the directory's contents are
	// damaged or inconsistent (missing MANIFEST, a torn older memtable WAL, a
	// failed table checksum, a key or position of the wrong shape). A store
	// that returns it must not be used to serve data; see doc.go
	// ("Damaged directories").
	ErrCorrupt = errors.New("index: corrupt store")

	// ErrValueTooLarge is returned by Commit when a batch holds a value larger
	// than MaxValueBytes (values must stay inline in the LSM tree, invariant 5).
	ErrValueTooLarge = errors.New("index: value too large")

	// ErrKeyTooLarge is returned by Commit when a metadata name is longer than
	// MaxMetaNameBytes.
	ErrKeyTooLarge = errors.New("index: metadata name too long")

	// ErrLocked is returned by Open when another Store, in this process or
	// another, has the directory open.
	ErrLocked = errors.New("index: directory in use by another store")

	// ErrInvalidOptions is returned by Open and Options.Validate for options
	// that cannot work.
	ErrInvalidOptions = errors.New("index: invalid options")
)

// errTornEntry is what readMemEntry reports for any malformed memtable WAL
// entry; scanMemWAL treats it as the end of replay, as Badger does.
var errTornEntry = errors.New("index: torn or damaged memtable WAL entry")
