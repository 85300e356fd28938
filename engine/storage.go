package engine

// The storage seam: the one interface through which the engine reaches the
// place its records go.
//
//	           Broker ── Queue ── stripe            (hot state: lanes, wheels, slabs)
//	              │         │        │
//	              └─────────┴────────┴──> storage   (this file)
//	                                        ├── memStore      storage_mem.go: in-memory mode
//	                                        └── durableStore  durable.go, recovery.go, checkpoint.go:
//	                                                          the WAL + the Badger index
//
// Every message body lives in a log of records addressed by position. A
// backend that must rebuild state after a restart (durable, and the
// replicated backend to come) also logs every state change: the engine hands
// it each change (changeRecord) and it decides what, if anything, to keep.
// The backend is chosen once, in Open; Broker, Queue and stripe code holds no
// storage-mode branch.
//
// What the seam covers:
//   - records: append, wait until durable, read back one record or a run of
//     back-to-back records, prefetch hints;
//   - encoding: the record that carries a new (or relocated) body, the record
//     of a state change, queue records (durable before they return);
//   - compaction: per-segment live bytes, segment listing, scanning and
//     removal, and the first position replay still needs;
//   - durability: waitRoom (the bound on the log a restart replays), sync,
//     recovery at load, checkpoints (driven by the backend's own job);
//   - lifecycle: stats, memory release, close.
//
// Invariants:
//  1. A record appended with live=true has its size added to its segment's
//     live counter atomically with the append, so no segment is ever judged
//     dead while a body in it is on its way to being committed.
//  2. removeSegment removes a segment only if it is not the active one and
//     its live counter is zero at that moment (checked under the same lock
//     as 1).
//  3. A record's position never changes; read(pos) returns exactly the
//     payload appended there, or an error (never another record's bytes).
//  4. Errors that cross the seam are the engine's own: ErrClosed once the
//     backend is closed, errSegmentRemoved for a read that raced with
//     compaction, and otherwise an error the broker treats as a storage
//     failure (it refuses further changes until reopened). No error of a
//     lower package that the server's table would not know reaches callers
//     unwrapped from these.
//
// Owner: each backend documents its own locks; every method is safe for
// concurrent use unless it says otherwise.

import (
	"errors"
	"fmt"
)

// logRec is one record to append.
type logRec struct {
	head  []byte       // copied
	body  []byte       // copied after head
	count *countWindow // a publish header's topic counts (countAppended)
	pos   uint64       // set by append
	size  uint32       // set by append: bytes the record occupies in its segment
	typ   uint8
	live  bool // count the record's size as live in its segment
}

// segInfo describes one segment of a log.
type segInfo struct {
	start, end uint64 // positions covered: [start, end)
	live       int64  // bytes of live body records
	active     bool   // the segment appends go to
	// held is what the segment takes (its file, or its buffer in memory):
	// more than end-start when a record that did not fit started the next.
	held int64
}

// runSink receives the records of a run (storage.readRun). An interface
// rather than a func, so that the caller's pooled scratch is the sink and
// nothing escapes to the heap per call.
type runSink interface {
	take(i int, typ uint8, payload []byte)
}

// bodyHeadLen is the scratch a body record's head needs (the larger of the
// two encodings: a snapshot or an owner id, then the MD5).
const bodyHeadLen = snapLen + 16

// storage is the engine's one seam to where records go (see the file
// comment). Implementations: memStore, durableStore.
type storage interface {
	// load runs once, in Open, before anything is served: it sets the
	// broker's receipt-handle secret and rebuilds its queues and messages.
	load(b *Broker) error
	// seqBase is the sequence number a queue's messages count up from in
	// this run: MessageIds stay unique across restarts (doc.go invariant 3).
	seqBase() uint64

	// append appends recs contiguously and in order, filling pos and size.
	append(recs []logRec) error
	// recordLimit is the largest payload (head and body) one record may
	// carry: a send whose records could outgrow it is refused before
	// anything is reserved (Queue.Send).
	recordLimit() int
	// waitDurable waits until the record at pos is acknowledged by the
	// backend's durability mode.
	waitDurable(pos uint64) error
	// read returns the type and payload of the record at pos; size is the
	// size append reported (a hint). The payload may alias backend memory or
	// buf and must not be modified; buf is returned, grown if the backend
	// needed more room, for the caller to keep.
	read(pos uint64, size uint32, buf []byte) (typ uint8, payload, outBuf []byte, err error)
	// readRun reads len(sizes) back-to-back records starting at pos (sizes
	// as append reported them) and passes each one it could read and verify
	// to sink (records it could not read are simply not passed). Payloads
	// alias backend memory or buf only until take returns. It returns buf,
	// possibly grown.
	readRun(pos uint64, sizes []int, buf []byte, sink runSink) []byte
	// prefetch hints the record at pos into the CPU caches if it is in
	// memory (a hint only; it never blocks or fails).
	prefetch(pos uint64, size uint32)

	// bodyRecord encodes into rec (with head as scratch) the record that
	// carries the body of slot idx of stripe stripeIdx of queue qid: a new
	// message, or one whose body compaction moves (relocated). props is
	// the message's properties block (props.go), nil if it has none: the
	// record is then the plain one and nothing is allocated.
	bodyRecord(rec *logRec, head *[bodyHeadLen]byte, qid uint64, stripeIdx uint8, idx uint32, s *slot, sum *[16]byte, props, body []byte, relocated bool)
	// moveRecord encodes the one record of a dead-letter move
	// (deadletter.go): src is the source message's snapshot as it leaves,
	// the rest as for bodyRecord of the message entering queue qid.
	moveRecord(rec *logRec, src []byte, qid uint64, stripeIdx uint8, idx uint32, s *slot, sum *[16]byte, props, body []byte)
	// changeRecord is told of each change to a message's state: typ is
	// recState (received, visibility changed), recDelete or recExpire. A
	// backend that rebuilds state from its log appends the record to st.recs
	// (flushed by st.flushLocked, in change order); one that does not,
	// ignores it. The stripe's lock is held.
	changeRecord(st *stripe, typ uint8, idx uint32)
	// writable reports whether this replica may change state at all: nil,
	// or ErrNotLeader on a follower of a replicated shard (replica.go).
	writable() error
	// enter admits an operation that is about to change messages or
	// queues (a receive, delete, visibility change or queue change), and
	// leave ends it once its records are appended. enter is nil, or
	// ErrRetryOnLeader on a replica that does not lead its shard or is
	// handing the lead over (Broker.Yield): refused before the operation
	// changed anything. Broker.Settled waits for the admitted ones.
	enter() error
	leave()
	// enterLeading is enter for a receive, and also returns the term this
	// replica leads, read with the admission (0 if the backend confirms
	// nothing). leading is that term without an admission (a peek), 0
	// also when the replica does not lead. confirmLead(term) holds an
	// answer read from the state (a receive's messages, a peek's) until
	// the replica is known to have led term since before the read: nil,
	// or ErrNotLeader. Term 0 confirms nothing (replica_confirm.go).
	enterLeading() (term uint64, err error)
	leading() uint64
	confirmLead(term uint64) error
	// acceptNew reports whether new messages and queues may be stored now:
	// nil, or ErrDiskFull while free space is below the reserve (space.go).
	acceptNew() error
	// diskState reports the free-space guard's state without side effects
	// (atomic loads): full while new messages and queues are refused,
	// critical while checkpoints wait for space (space.go).
	diskState() (full, critical bool)
	// adminRecord logs a queue record (create, config, delete) and makes it
	// durable before returning (doc.go: queue changes are durable when
	// acknowledged in every sync mode).
	adminRecord(typ uint8, payload []byte) error

	// addLive adds delta to the live counter of the segment holding pos.
	addLive(pos uint64, delta int64)
	// segments appends the segments, oldest first, to dst.
	segments(dst []segInfo) []segInfo
	// scan calls fn for each record of the inactive segment starting at
	// start, in log order, from position from (start, or a record boundary
	// a scan of it reached before), until fn returns false. It reports
	// false (calling nothing) if the segment is gone or still being
	// written. Damage it cannot read past ends the scan with a
	// *damagedRange.
	scan(start, from uint64, fn func(pos uint64, size uint32, typ uint8, payload []byte) bool) (bool, error)
	// removeSegment removes the segment starting at start if it is inactive
	// and has no live bytes; it reports whether it did.
	removeSegment(start uint64) (bool, error)
	// replayStart is the first position a restart replays (a replicated
	// broker: or the first record of an entry it still serves, if older):
	// a segment that ends at or before it may go once it holds no live body.
	replayStart() uint64

	// waitRoom holds an operation that is about to write to the log while
	// the log beyond the last checkpoint exceeds its bound (it bounds what a
	// restart replays). No lock may be held by the caller.
	waitRoom() error
	// sync makes every record appended so far durable.
	sync() error

	// health is nil while the backend can make changes durable, else why not
	// (an error wrapping ErrStorageUnavailable while that may pass).
	health() error
	// stalled is an error wrapping ErrStorageUnavailable while a record
	// appended now could not be made durable until the log can make its
	// next segment file (wal.Log.Stalled), else nil.
	stalled() error
	// resync makes durable, after a failed write or fsync, what a reopen
	// would find (wal.Log.Resync); nil for a store that has not failed.
	resync() error
	// stats fills in the backend's part of st.
	stats(st *StorageStats)
	// recovery describes the last load.
	recovery() RecoveryStats
	// releaseMemory gives back memory the backend holds but does not need.
	releaseMemory()
	// close stops the backend's jobs and closes it; clean says whether the
	// broker is healthy (a durable backend then checkpoints first).
	close(clean bool) error
}

// openStorage opens the backend the options ask for: the one place a
// storage mode is chosen. The backend's load (called by Open next) connects
// it to the broker.
func openStorage(o *Options) (storage, string, error) {
	if o.Dir == "" {
		return newMemStore(o.MemSegmentBytes), "memory", nil
	}
	d, err := openDurable(o)
	if err != nil {
		return nil, "", err
	}
	if o.Replica != nil {
		return newReplStore(d, o.Replica), "replicated", nil
	}
	return d, "durable", nil
}

// damagedRange is the error of a scan that met damage at from: nothing
// from there to to (the segment's end) could be scanned. It wraps
// errDamaged and the backend's error.
type damagedRange struct {
	from, to uint64
	err      error
}

func (e *damagedRange) Error() string {
	return fmt.Sprintf("engine: log damaged in [%d, %d): %v", e.from, e.to, e.err)
}

func (e *damagedRange) Unwrap() []error { return []error{errDamaged, e.err} }

// errSegmentRemoved: a read raced with compaction; the caller looks the
// message up again (its body has moved).
var errSegmentRemoved = errors.New("engine: log segment removed")
