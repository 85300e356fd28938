package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smqd/smqd/wal"
)

// Broker owns the queues, the log of bodies and state changes, and the
// clock. All methods are safe for concurrent use.
//
// Lock order (see docs/locking.md): Broker.adminMu -> Broker.mu ->
// stripe.mu -> log store locks; waitQueue.mu is never held with another.
type Broker struct {
	opts         Options
	clock        Clock
	log          *slog.Logger
	store        storage // the backend, chosen once in Open (storage.go)
	maxRecord    int     // store.recordLimit(): the largest record (Queue.Send)
	maxLongPolls int
	secret       [handleSecretLen]byte // keys receipt-handle checks

	// adminMu serialises queue creation, attribute changes and deletion,
	// including their log writes; the hot path never takes it.
	adminMu     sync.Mutex
	nextQueueID uint64 // guarded by adminMu
	idSpace     uint64 // Options.MessageIDSpace << 48 (message.go)

	mu     sync.RWMutex
	queues map[string]*Queue // guarded by mu
	byID   map[uint64]*Queue // guarded by mu
	names  nameIndex         // guarded by mu: the queue names, sorted

	topics topicSet // topics and subscriptions (topic.go)
	pusher pusher   // HTTP push delivery (push.go)

	compactMu    sync.Mutex               // serialises compaction passes (background and explicit)
	compactWatch map[uint64]*compactWatch // guarded by compactMu: candidates the background pass watches
	compactFrom  map[uint64]uint64        // guarded by compactMu: where a pass that ran out of budget stopped in a segment
	compactor    *job                     // background compaction on the clock (compaction.go)
	compacted    compactStats             // what compaction did (atomics)
	backups      atomic.Int32             // backups running: compaction removes no segment (backup.go)
	// testBackup, set by tests only: hooks run in Backup before the index
	// copy and between the index copy and the log copy; now and sleep (set
	// together) replace the rate cap's clock.
	testBackup struct {
		beforeIndex, beforeLog func()
		now                    func() time.Time
		sleep                  func(time.Duration)
	}

	unreadable atomic.Int64 // bodies that could not be read back (corruption)
	longPolls  atomic.Int64
	movesBusy  atomic.Int64 // moves between queues running (beginMove)
	closed     atomic.Bool
	failure    atomic.Pointer[error] // first storage failure: the broker stops accepting changes
	damage     atomic.Pointer[error] // a replica's damaged body (poison.go): its copy must not serve again
	waiterPool sync.Pool
	readers    sync.Pool // *bodyReader: scratch for reading bodies back (receive.go)
	sendPool   sync.Pool // *sendBatch scratch of Send
}

// handleSecretLen is the size of the key receipt handles are sealed with
// (Options.HandleSecret).
const handleSecretLen = 32

// maxMemSegmentBytes bounds Options.MemSegmentBytes.
const maxMemSegmentBytes = 1 << 30

// Open starts a broker. With opts.Dir empty it runs in memory.
func Open(opts Options) (*Broker, error) {
	o := opts.withDefaults()
	if o.MessageIDSpace > 0x7fff {
		return nil, fmt.Errorf("engine: MessageIDSpace %d is over 32767", o.MessageIDSpace)
	}
	if o.MemSegmentBytes > maxMemSegmentBytes {
		// The first segment is allocated at Open: 1<<62 panicked there.
		return nil, fmt.Errorf("engine: MemSegmentBytes %d is over %d", o.MemSegmentBytes, maxMemSegmentBytes)
	}
	if n := len(o.HandleSecret); n != 0 && n != handleSecretLen {
		return nil, fmt.Errorf("engine: HandleSecret is %d bytes, not %d", n, handleSecretLen)
	}
	if len(o.HandleSecret) != 0 && allZero(o.HandleSecret) {
		// A guessable key: anyone could forge handles (embedding audit 2).
		return nil, errors.New("engine: HandleSecret is all zero bytes: give it from a random source")
	}
	for _, s := range o.AcceptHandleSecrets {
		switch {
		case len(o.HandleSecret) == 0:
			return nil, errors.New("engine: AcceptHandleSecrets needs HandleSecret set")
		case len(s) != handleSecretLen:
			return nil, fmt.Errorf("engine: an AcceptHandleSecrets entry is %d bytes, not %d", len(s), handleSecretLen)
		case allZero(s):
			return nil, errors.New("engine: an AcceptHandleSecrets entry is all zero bytes")
		}
	}
	b := &Broker{
		opts:         o,
		clock:        o.Clock,
		log:          o.Logger,
		maxLongPolls: o.MaxLongPolls,
		queues:       make(map[string]*Queue),
		byID:         make(map[uint64]*Queue),
		nextQueueID:  1,
		idSpace:      uint64(o.MessageIDSpace) << 48,
		compactWatch: make(map[uint64]*compactWatch),
		compactFrom:  make(map[uint64]uint64),
	}
	b.topics.init()
	b.compactor = newJob(o.Clock, compactInterval, b.compactJob)
	store, mode, err := openStorage(&b.opts)
	if err != nil {
		return nil, err
	}
	b.store = store
	b.maxRecord = store.recordLimit() - len(b.opts.ARNPrefix) // maxMoveHead
	if err := store.load(b); err != nil {
		store.close(false)
		return nil, err
	}
	if err := b.startPush(); err != nil {
		store.close(false)
		return nil, err
	}
	b.log.Info("broker open", "mode", mode, "dir", o.Dir, "sync", o.WAL.Sync.String(), "stripes", o.Stripes)
	b.compactor.kick()
	return b, nil
}

func (b *Broker) nowMs() int64 { return b.clock.Now().UnixMilli() }

// lockAdmin takes adminMu for a queue or topic change, unless the log is
// stalled: the change is then refused at once (ErrStorageUnavailable), not
// queued behind the one whose record met the stall and waits under the
// lock until the stall clears (durable.go adminRecord).
func (b *Broker) lockAdmin() error {
	if err := b.store.stalled(); err != nil {
		return err
	}
	b.adminMu.Lock()
	return nil
}

// queueKey derives a queue's receipt-handle key from the broker secret.
func (b *Broker) queueKey(id uint64) handleKey { return deriveQueueKey(b.secret[:], id) }

// acceptedKeys derives a queue's keys from Options.AcceptHandleSecrets
// (nil without them).
func (b *Broker) acceptedKeys(id uint64) []handleKey {
	var ks []handleKey
	for _, s := range b.opts.AcceptHandleSecrets {
		ks = append(ks, deriveQueueKey(s, id))
	}
	return ks
}

func deriveQueueKey(secret []byte, id uint64) handleKey {
	var in [40]byte
	copy(in[:32], secret)
	binary.LittleEndian.PutUint64(in[32:], id)
	sum := sha256.Sum256(in[:])
	var k handleKey
	copy(k[:], sum[:16])
	return k
}

// Closed reports whether b was closed (Close; in a cluster, a broker
// replaced by a rebuild): a caller that keeps its queues drops them, so
// as not to keep its state alive.
func (b *Broker) Closed() bool { return b.closed.Load() }

// usable returns the error every operation fails with once the broker is
// closed or its storage failed.
func (b *Broker) usable() error {
	if b.closed.Load() {
		return ErrClosed
	}
	if p := b.failure.Load(); p != nil {
		return *p
	}
	return b.store.writable()
}

// readable returns the error read-only operations (attributes, peek, list)
// fail with: they keep working after a storage failure, so that operators
// can see what the broker holds.
func (b *Broker) readable() error {
	if b.closed.Load() {
		return ErrClosed
	}
	return nil
}

// Health reports whether the broker can take changes and make them
// durable: nil; ErrClosed; the storage failure that stopped it (a failed
// write or fsync: reopen the broker, docs/operations.md says why); or an
// error wrapping ErrStorageUnavailable while the log cannot make its next
// segment file (it clears by itself). A full disk is not a failure: the
// broker still drains (Stats().Storage.DiskFull).
func (b *Broker) Health() error {
	if err := b.usable(); err != nil {
		return err
	}
	return b.store.health()
}

// DiskFull reports whether free space on the broker's file systems is
// below the reserve (Options.FreeSpaceReserve): while it is, new messages
// and queues are refused with ErrDiskFull and everything else works. It is
// an atomic load, cheap enough to poll; Stats().Storage carries the same
// state with the free bytes.
func (b *Broker) DiskFull() bool {
	full, _ := b.store.diskState()
	return full
}

// DiskCritical reports whether free space is below a quarter of the
// reserve: checkpoints wait for space, and a cluster replica takes no
// more replicated entries (they would meet the full disk). Cheap, as
// DiskFull.
func (b *Broker) DiskCritical() bool {
	_, critical := b.store.diskState()
	return critical
}

// NeedsReopen returns the failure that stops the broker's changes until
// it is reopened (a failed write or fsync of its log, a failed
// checkpoint), nil while it takes changes. Closing it and opening the same
// directory again recovers what is on disk, as after a crash: nothing
// acknowledged relies on the failed write (a change is acknowledged only
// once it is durable). smqd does that in place (server.Options.Reopen).
func (b *Broker) NeedsReopen() error {
	if p := b.failure.Load(); p != nil {
		return *p
	}
	if err := b.store.health(); errors.Is(err, wal.ErrFailed) {
		return err
	}
	return nil
}

// Resync makes durable, after a storage failure, what a reopen of the
// broker's directory would find: the log's records written since its last
// successful fsync are written and fsynced again (wal.Log.Resync). After
// a failed fsync Linux may mark the pages it could not write clean, so a
// reopen would read records the disk lacks, and a later power loss would
// leave a hole before the records acknowledged after the reopen. It
// returns nil for a broker that has not failed, and an error while the
// disk still refuses the writes: then it must not be reopened yet. Close
// does it too, once.
func (b *Broker) Resync() error {
	if b.NeedsReopen() == nil {
		return nil
	}
	return b.store.resync()
}

// storageFailed records the first storage failure; from then on every
// operation fails with it (the log refuses appends until reopened).
func (b *Broker) storageFailed(err error) {
	if errors.Is(err, ErrClosed) || errors.Is(err, ErrStorageUnavailable) || errors.Is(err, ErrDiskFull) || errors.Is(err, ErrNotLeader) {
		return // not a failure of the storage, or one that clears by itself
	}
	e := fmt.Errorf("engine: storage failed, reopen the broker: %w", err)
	if b.failure.CompareAndSwap(nil, &e) {
		b.log.Error("storage failed; the broker refuses further changes until reopened", "err", err)
	}
}

// CreateQueue creates a queue. If a queue of that name exists with the same
// attributes it returns created=false and no error; with other attributes
// ErrQueueAlreadyExist.
func (b *Broker) CreateQueue(name string, cfg QueueConfig) (created bool, err error) {
	if err := b.usable(); err != nil {
		return false, err
	}
	if err := ValidateQueueName(name); err != nil {
		return false, err
	}
	cfg = cfg.inMs()
	if err := cfg.Validate(); err != nil {
		return false, err
	}
	if err := b.store.acceptNew(); err != nil {
		return false, err
	}
	if q, _ := b.Queue(name); q == nil || q.meta().cfg != cfg {
		// Only for a queue it may create: an idempotent create (the
		// server gives one without policy elements the queue's own
		// policy) asks no other shard.
		b.catchUp(cfg.DeadLetterQueue)
	}
	if err := b.store.enter(); err != nil {
		return false, err
	}
	defer b.store.leave()
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	if q, _ := b.Queue(name); q != nil {
		if q.meta().cfg == cfg {
			return false, nil
		}
		return false, ErrQueueAlreadyExist
	}
	if err := b.checkDeadLetterTarget(name, cfg); err != nil {
		return false, err
	}
	if _, err := b.createQueueLocked(name, cfg); err != nil {
		return false, err
	}
	return true, nil
}

// createQueueLocked creates queue name, logged and durable (adminMu held;
// the caller checked the name and cfg).
func (b *Broker) createQueueLocked(name string, cfg QueueConfig) (*Queue, error) {
	now := b.nowMs()
	id := b.nextQueueID
	b.nextQueueID++
	q := newQueue(b, name, id, b.opts.Stripes, newQueueMeta(cfg, now, now))
	v := q.value()
	if err := b.logQueueRecord(recQueueCreate, v.encode()); err != nil {
		return nil, err
	}
	b.addQueueLocked(q)
	return q, nil
}

// queueByID returns the queue with that id, or nil.
func (b *Broker) queueByID(id uint64) *Queue {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.byID[id]
}

// Queue returns the named queue. A *Queue stays bound to the queue it
// was returned for: once that queue is deleted its calls answer
// ErrQueueNotExist, also after a queue of the same name is created again
// (look it up again then).
func (b *Broker) Queue(name string) (*Queue, error) {
	if isInternalQueue(name) {
		return nil, ErrQueueNotExist // push queues are not addressable (push_queue.go)
	}
	if b.closed.Load() {
		return nil, ErrClosed
	}
	b.mu.RLock()
	q := b.queues[name]
	b.mu.RUnlock()
	if q == nil {
		return nil, ErrQueueNotExist
	}
	return q, nil
}

// SetQueueAttributes changes the attributes named by p. New values apply to
// later operations: VisibilityTimeout to later receives, DelaySeconds and
// MessageRetentionPeriod to later sends.
func (b *Broker) SetQueueAttributes(name string, p ConfigPatch) error {
	if err := b.usable(); err != nil {
		return err
	}
	if p.DeadLetterQueue != nil {
		b.catchUp(*p.DeadLetterQueue)
	}
	if err := b.store.enter(); err != nil {
		return err
	}
	defer b.store.leave()
	if err := b.lockAdmin(); err != nil {
		return err
	}
	defer b.adminMu.Unlock()
	q, err := b.Queue(name)
	if err != nil {
		return err
	}
	old := q.meta()
	cfg := p.Apply(old.cfg).inMs()
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.DeadLetterQueue != old.cfg.DeadLetterQueue {
		if err := b.checkDeadLetterTarget(name, cfg); err != nil {
			return err
		}
	}
	return b.setQueueConfigLocked(q, cfg)
}

// setQueueConfigLocked gives q the configuration cfg, logged and durable
// (adminMu held; the caller checked cfg).
func (b *Broker) setQueueConfigLocked(q *Queue, cfg QueueConfig) error {
	meta := newQueueMeta(cfg, q.meta().createMs, b.nowMs())
	v := queueVal{id: q.id, stripes: len(q.stripes), createMs: meta.createMs, modifyMs: meta.modifyMs, cfg: cfg, name: q.name}
	if err := b.logQueueRecord(recQueueConfig, v.encode()); err != nil {
		return err
	}
	q.cfg.Store(meta)
	return nil
}

// GetQueueAttributes returns the named queue's attributes and counts.
func (b *Broker) GetQueueAttributes(name string) (QueueInfo, error) {
	q, err := b.Queue(name)
	if err != nil {
		return QueueInfo{}, err
	}
	return q.Attributes()
}

// DeleteQueue deletes a queue and all its messages. Receives waiting on it
// return ErrQueueNotExist.
func (b *Broker) DeleteQueue(name string) error {
	if err := b.usable(); err != nil {
		return err
	}
	if err := b.store.enter(); err != nil {
		return err
	}
	defer b.store.leave()
	if err := b.lockAdmin(); err != nil {
		return err
	}
	defer b.adminMu.Unlock()
	q, err := b.Queue(name)
	if err != nil {
		return err
	}
	return b.deleteQueueLocked(q)
}

// deleteQueueLocked deletes q and its messages, logged and durable
// (adminMu held).
func (b *Broker) deleteQueueLocked(q *Queue) error {
	var rec [8]byte
	binary.LittleEndian.PutUint64(rec[:], q.id)
	if err := b.logQueueRecord(recQueueDelete, rec[:]); err != nil {
		return err
	}
	b.removeQueueLocked(q)
	return nil
}

// removeQueueLocked forgets q and drops its messages (adminMu held).
func (b *Broker) removeQueueLocked(q *Queue) {
	b.mu.Lock()
	delete(b.queues, q.name)
	delete(b.byID, q.id)
	if !isInternalQueue(q.name) {
		b.names.remove(q.name)
	}
	b.mu.Unlock()
	q.kill()
}

// kill drops all messages and wakes every waiter.
func (q *Queue) kill() {
	q.dead.Store(true)
	for i := range q.stripes {
		st := &q.stripes[i]
		st.mu.Lock()
		st.killLocked()
		st.mu.Unlock()
	}
	q.waiters.wake(-1)
}

// ListQueues returns up to limit (1..1000, 0 means 1000) queue names in byte
// order that start with prefix and are >= marker, and the name to pass as
// marker for the next page ("" when there is none).
func (b *Broker) ListQueues(prefix, marker string, limit int) (names []string, next string, err error) {
	if err := b.readable(); err != nil {
		return nil, "", err
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.names.page(prefix, marker, limit, "queues")
}

// QueueStats are one queue's counters, for metrics.
type QueueStats struct {
	Name                      string
	Active, Inactive, Delayed int64 // messages by state
	Sent, Received, Deleted   int64 // messages since start
	Expired                   int64 // messages dropped by retention since start
	Unreadable                int64 // messages dropped since start because their bodies were damaged
	DeadLettered              int64 // messages moved to the dead-letter queue since start (deadletter.go)
	Waiting                   int   // receives waiting (long polls)
	// OldestActive is how long the oldest message waiting for a receive
	// has been in the queue (now less its EnqueueTime), 0 when none
	// waits. Approximate as SQS's ApproximateAgeOfOldestMessage: it reads
	// the head of each priority lane, so a message made visible again
	// after a receive counts once it is back at its lane's head.
	OldestActive time.Duration
	// ID is the queue's broker-unique id: a queue deleted and made again
	// under its name has another (the metrics' totals tell them apart).
	ID uint64
}

// Stats is a snapshot of the broker's counters.
type Stats struct {
	Queues    []QueueStats // by name
	LongPolls int64        // receives waiting, all queues
	Storage   StorageStats
	Push      PushStats // HTTP push delivery (push.go)
}

// StorageStats describes the log and, in durable mode, the index.
type StorageStats struct {
	Durable      bool
	Unreadable   int64  // messages dropped since start because their bodies were damaged
	Segments     int    // log segments held
	LogBytes     int64  // bytes the log's segments span
	LiveBytes    int64  // bytes of records holding live bodies
	Checkpoints  int64  // checkpoints written since start (durable)
	ReplayWaits  int64  // operations that waited for the checkpointer (durable)
	CheckpointAt uint64 // the index's checkpoint position (durable)
	LogEnd       uint64 // the log's end position
	IndexBytes   int64  // bytes of the index directory (durable)
	// The free-space guard (durable; space.go).
	DiskFull         bool  // free space is below the reserve: new messages are refused
	DiskFullEvents   int64 // times the guard entered the disk-full state since start
	FreeBytes        int64 // free bytes at the last sample
	FreeSpaceReserve int64 // the reserve (0: the guard is off)
	WAL              wal.Stats
	// Recovery is what this broker's start-up found and did (durable;
	// Broker.Recovery).
	Recovery RecoveryStats
	// Compaction is what compaction did since the broker opened.
	Compaction CompactionStats
}

// ReleaseMemory gives back to the operating system what the broker holds
// but does not need now: it forces a garbage collection, returns the freed
// heap, and (durable mode) drops the process's mappings of index table pages
// (they stay in the page cache). It costs milliseconds and loses nothing;
// call it when the broker goes idle (smqd does, after a burst of traffic).
func (b *Broker) ReleaseMemory() {
	b.ReleaseStorageMemory()
	debug.FreeOSMemory()
}

// ReleaseStorageMemory is ReleaseMemory without the forced collection: for
// a program with several brokers (engine/cluster: one per shard), which
// releases each one's storage and then collects once (debug.FreeOSMemory).
func (b *Broker) ReleaseStorageMemory() { b.store.releaseMemory() }

// Stats returns the broker's counters.
func (b *Broker) Stats() Stats {
	b.mu.RLock()
	qs := make([]*Queue, 0, b.names.n)
	for n := range b.names.all() {
		qs = append(qs, b.queues[n])
	}
	b.mu.RUnlock()
	s := Stats{LongPolls: b.longPolls.Load(), Storage: b.storageStats(), Push: b.pusher.stats()}
	now := b.nowMs()
	for _, q := range qs {
		a, i, d, oldest := q.counts()
		var age time.Duration
		if oldest != 0 {
			age = time.Duration(max(now-oldest, 0)) * time.Millisecond
		}
		s.Queues = append(s.Queues, QueueStats{
			Name: q.name, Active: a, Inactive: i, Delayed: d,
			Sent: q.sent.Load(), Received: q.received.Load(), Deleted: q.deleted.Load(),
			Expired: q.expired.Load(), Unreadable: q.unreadable.Load(), DeadLettered: q.deadLettered.Load(), Waiting: q.waiters.waiting(),
			OldestActive: age, ID: q.id,
		})
	}
	return s
}

func (b *Broker) storageStats() StorageStats {
	st := StorageStats{Unreadable: b.unreadable.Load(), Compaction: b.compacted.snapshot()}
	for _, seg := range b.store.segments(nil) {
		st.Segments++
		st.LogBytes += int64(seg.end - seg.start)
		st.LiveBytes += seg.live
		if seg.end > st.LogEnd {
			st.LogEnd = seg.end
		}
	}
	b.store.stats(&st)
	return st
}

// stopQueues marks every stripe dead, stops its timer and wakes every
// waiting receive (Close, CloseForRebuild; the broker is closed already).
func (b *Broker) stopQueues() {
	b.mu.RLock()
	qs := make([]*Queue, 0, len(b.queues))
	for _, q := range b.queues {
		qs = append(qs, q)
	}
	b.mu.RUnlock()
	for _, q := range qs {
		for i := range q.stripes {
			st := &q.stripes[i]
			st.mu.Lock()
			st.dead = true
			if st.timer != nil {
				st.timer.Stop()
				st.timerArmed = false
			}
			st.mu.Unlock()
		}
		q.waiters.wake(-1)
	}
}

// Close stops the broker: waiting receives return ErrClosed, timers stop and
// the log is closed. A second Close returns ErrClosed.
func (b *Broker) Close() error {
	if !b.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	b.pusher.stop()
	b.compactor.stop()
	b.stopQueues()
	start := time.Now()
	if b.NeedsReopen() != nil {
		// What the next open finds must be on disk (Resync).
		if err := b.store.resync(); err != nil {
			b.log.Error("the log's bytes written since its last successful fsync could not be made durable: "+
				"after a power loss the log may need --wal-repair", "err", err)
		}
	}
	err := b.store.close(b.failure.Load() == nil)
	b.log.Info("broker closed", "took", time.Since(start), "err", err)
	return err
}

// Sync makes every change made so far durable: in durable mode it writes and
// fsyncs the log (whatever the sync mode); in memory mode it does nothing.
func (b *Broker) Sync() error {
	if err := b.usable(); err != nil {
		return err
	}
	if err := b.store.sync(); err != nil {
		b.storageFailed(err)
		return err
	}
	return nil
}

// logQueueRecord logs a queue record; it is durable when this returns
// (durable.go invariant 4).
func (b *Broker) logQueueRecord(typ uint8, payload []byte) error {
	if err := b.store.adminRecord(typ, payload); err != nil {
		b.storageFailed(err)
		return err
	}
	return nil
}

// addQueueLocked registers q (start-up, or with adminMu held).
func (b *Broker) addQueueLocked(q *Queue) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.queues[q.name] = q
	b.byID[q.id] = q
	if !isInternalQueue(q.name) {
		b.names.insert(q.name)
	}
}

// allZero reports whether b holds zero bytes only.
func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
