package engine

import (
	"log/slog"
	"time"

	"github.com/smqd/smqd/index"
	"github.com/smqd/smqd/wal"
)

// Options configures a Broker. The zero value is an in-memory broker with
// the system clock.
type Options struct {
	// Dir is the data directory. Empty means in-memory mode: nothing survives
	// Close, and bodies live in an in-memory segmented log.
	Dir string
	// Stripes is the number of stripes (lock domains) of a new queue,
	// 1..256 (more is taken as 256); default 4. A queue keeps the stripe
	// count it was created with.
	Stripes int
	// MaxLongPolls bounds the receives waiting at once across the broker;
	// beyond it a receive that would wait fails with ErrTooManyLongPolls.
	// Default 10000.
	MaxLongPolls int
	// MemSegmentBytes is the segment size of the in-memory log; default 4 MiB,
	// at most 1 GiB (Open refuses more).
	MemSegmentBytes int
	// CompactionBytesPerSec bounds the body bytes compaction rewrites per
	// second; default 64 MiB.
	CompactionBytesPerSec int64
	// WAL configures the write-ahead log of durable mode, including its sync
	// mode (WAL.Sync: always, the default, interval or none). A message
	// that could outgrow one record (a 64 KiB body with 32 KiB of
	// properties needs about 100 KiB, as a dead letter: SegmentBytes and
	// BufferBytes of 128 KiB or more hold a sent one; a publish's XML or
	// JSON copy for a subscription can be five times its body), is refused
	// with an *ArgumentError. A batch or a publish's fan-out larger than
	// the write buffer (BufferBytes) is taken, one record at a time while
	// other writers wait (wal invariant 12).
	WAL wal.Options
	// Index configures the Badger index of durable mode.
	Index index.Options
	// CheckpointInterval is the longest time between two checkpoints of the
	// log into the index; default 10 s.
	CheckpointInterval time.Duration
	// CheckpointBytes starts a checkpoint once that much log has accumulated
	// since the last one; default 64 MiB. It bounds the log replayed at
	// start-up.
	CheckpointBytes int64
	// CheckpointRecords starts a checkpoint once that many records have been
	// appended since the last one; default 100,000. Small records (receives,
	// deletes) cost replay time per record, not per byte.
	CheckpointRecords int64
	// MaxReplayBytes and MaxReplayRecords bound the log beyond the last
	// checkpoint: when clients outrun the checkpointer, operations that write
	// to the log (sends, receives, deletes, visibility changes) wait for it.
	// They bound what a restart replays, and so the restart time; defaults 4
	// x CheckpointBytes and 4 x CheckpointRecords.
	MaxReplayBytes   int64
	MaxReplayRecords int64

	// FreeSpaceReserve is the free space (bytes) below which a durable
	// broker refuses new messages and queues with ErrDiskFull, while
	// receives, deletes and visibility changes go on (space.go). 0 sizes it
	// from the log's and the index's options (docs/operations.md); negative
	// turns the guard off.
	FreeSpaceReserve int64

	// Clock is the time source; nil means SystemClock().
	Clock Clock
	// Logger receives lifecycle and storage messages; nil discards them.
	Logger *slog.Logger

	// Replica makes a durable broker one replica of a shard's replicated
	// log (engine/cluster sets it; replica.go). Nil for a single broker.
	Replica Replica
	// ReplicaKeepEntries is how many entries already folded into the index
	// a replica keeps serving to followers that lag (older ones need a
	// snapshot); default 10,000.
	ReplicaKeepEntries int
	// HandleSecret, 32 bytes when set (Open refuses another length), keys
	// receipt handles instead of a key generated at the first start (or,
	// in memory, at each start): every replica of a shard must issue and
	// accept the same handles, and brokers that share it accept each
	// other's handles for queues of the same id.
	HandleSecret []byte
	// MovesHeld, when set and true, holds the moves that carry a message
	// from one queue to another (engine/cluster sets it while a cluster
	// backup runs, which reads the shards one after another and would miss
	// a message moved from a queue not read yet to one already read): a
	// message due for its dead-letter queue stays hidden in its queue and
	// is moved once visible again after its visibility timeout; an
	// exhausted notification waits for its push lease; a relayed delivery
	// stays in its push queue for its lease.
	MovesHeld func() bool
	// AcceptHandleSecrets, each 32 bytes, are other secrets whose receipt
	// handles are still accepted (and never issued): handles issued under
	// a cluster key being rotated out, or already in use by members that
	// have the next one (engine/cluster Config.AcceptKeys). Only with
	// HandleSecret.
	AcceptHandleSecrets [][]byte

	// ARNPrefix starts the resource names the broker writes into messages:
	// a dead-lettered message's DLQSourceArn is ARNPrefix + ":/queues/" +
	// its source queue (deadletter.go). Default "acs:mns:local:0" (region
	// "local", account "0").
	ARNPrefix string
	// MessageIDSpace, 0..32767, goes into every message id this broker
	// makes (bits 48-62 of its queue half): brokers whose messages one
	// client sees side by side (engine/cluster: shard+1) give them distinct
	// ids. Default 0: the ids of a single broker.
	MessageIDSpace uint16
	// DeadLetterRouter reaches the dead-letter queues this broker does not
	// hold (deadletter_elsewhere.go): engine/cluster sets it on each
	// shard's broker. Nil: a policy's target is a queue of this broker.
	DeadLetterRouter DeadLetterRouter

	// Push configures the delivery of topic notifications to HTTP
	// endpoints (push.go): where pushes may go, how many run at once, and
	// how they are signed.
	Push PushOptions

	// testCommit, if set, replaces the durable backend's index commits
	// (tests: the power-loss test snapshots the index at each one).
	testCommit func(idx *index.Store, b *index.Batch) error
	// testSplitMove, if set, logs a dead-letter move as two records
	// (deadletter.go splitMoveLocked): the crash test's deliberate break.
	testSplitMove bool
	// testNoTailResync skips start-up's resync of the log tail
	// (recovery.go): the lost-writeback test's deliberate break.
	testNoTailResync bool
}

func (o *Options) withDefaults() Options {
	c := *o
	if c.Stripes <= 0 {
		c.Stripes = 4
	}
	if c.Stripes > 256 {
		c.Stripes = 256
	}
	if c.MaxLongPolls <= 0 {
		c.MaxLongPolls = 10000
	}
	if c.MemSegmentBytes <= 0 {
		c.MemSegmentBytes = 4 << 20
	}
	if c.CompactionBytesPerSec <= 0 {
		c.CompactionBytesPerSec = defaultCompactBytes
	}
	if c.CheckpointInterval <= 0 {
		c.CheckpointInterval = 10 * time.Second
	}
	if c.CheckpointBytes <= 0 {
		c.CheckpointBytes = 64 << 20
	}
	if c.MaxReplayBytes <= 0 {
		c.MaxReplayBytes = 4 * c.CheckpointBytes
	}
	if c.CheckpointRecords <= 0 {
		c.CheckpointRecords = 100_000
	}
	if c.MaxReplayRecords <= 0 {
		c.MaxReplayRecords = 4 * c.CheckpointRecords
	}
	if c.Clock == nil {
		c.Clock = SystemClock()
	}
	if c.ReplicaKeepEntries <= 0 {
		c.ReplicaKeepEntries = 10_000
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.ARNPrefix == "" {
		c.ARNPrefix = "acs:mns:local:0"
	}
	return c
}

// DefaultLogBufferBytes is the size of the log's in-memory ring of recent
// records when Options.WAL.BufferBytes is unset (durable mode).
const DefaultLogBufferBytes = 4 << 20

// SyncMode is the durability mode of the log: when a send is acknowledged.
// It is wal.SyncMode, re-exported so that embedders need not import wal.
type SyncMode = wal.SyncMode

// Sync modes (docs/operations.md "Durability modes and recovery").
const (
	SyncAlways   = wal.SyncAlways   // acknowledge a send after its record is fsynced (default)
	SyncInterval = wal.SyncInterval // acknowledge after the write; fsync at most every WAL.SyncInterval
	SyncNone     = wal.SyncNone     // acknowledge after the write; fsync only on roll, checkpoint and Close
)

// ParseSyncMode parses "always", "interval" or "none".
func ParseSyncMode(s string) (SyncMode, error) { return wal.ParseSyncMode(s) }
