package engine

// MessageIds after a restore.
//
// A message's sequence number carries the boot counter in its top 24 bits
// (durable.go invariant 3), and a cluster shard's carries the leader's
// term instead (replica.go invariant 5). A backup holds the counter (or
// the term) of its moment. The broker it was taken of went on: each of its
// later starts (or elections) took the next value, and handed out ids in
// it. A broker restored from the backup took the next value after the
// backup's, so its first messages got the ids the old broker's first
// start after the backup had given other messages (backups2 audit,
// 2026-12-07: one id on both, single node and cluster). Consumers and push
// receivers that deduplicate by MessageId (docs/operations.md says to)
// would drop those new messages.
//
// Invariant: a restore moves the counter (or the term) RestoreIDStep past
// the backup's: RestoreIDJump and a random part below it. So a restored
// broker's ids differ from every id the old broker gave unless it started
// (or elected) RestoreIDJump times after the backup; and two brokers
// restored from one backup (the first one lost, the backup restored
// again) start at different counters, so their ids differ unless one
// started as many times as their random parts differ by. With a fixed
// jump both took one counter, and the second gave the first's ids
// (backups audit, 2026-12-07: MessageId 00000000000000040100030000000001
// on both). A step spends at most 1/128 of the 24-bit space: 127 restores
// in a row at least, each of a broker itself restored.

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"path/filepath"

	"github.com/smqd/smqd/index"
)

// RestoreIDJump is the least a restore moves the boot counter (or a
// shard's term) past the backup's (RestoreIDStep).
const RestoreIDJump = 1 << 16

// RestoreIDStep returns how far a restore moves the boot counter (or a
// shard's term) past the backup's: RestoreIDJump and a random part below
// it (the invariant above).
func RestoreIDStep() uint64 { return RestoreIDJump + rand.Uint64N(RestoreIDJump) }

// jumpRestoredBoot moves the boot counter of the index restored in dir
// RestoreIDStep on.
func jumpRestoredBoot(dir string) (err error) {
	idx, err := index.Open(filepath.Join(dir, "index"), index.Options{})
	if err != nil {
		return fmt.Errorf("engine: restore: open the index: %w", err)
	}
	defer func() {
		if cerr := idx.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("engine: restore: close the index: %w", cerr)
		}
	}()
	v, err := idx.Meta(metaBoot)
	if err != nil {
		return fmt.Errorf("engine: restore: read the boot counter: %w", err)
	}
	var boot uint64
	if len(v) == 8 {
		boot = binary.LittleEndian.Uint64(v)
	}
	boot += RestoreIDStep()
	if boot >= 1<<(64-bootShift) {
		return fmt.Errorf("engine: restore: the boot counter would be exhausted (%d)", boot)
	}
	var nb [8]byte
	binary.LittleEndian.PutUint64(nb[:], boot)
	batch := idx.NewBatch()
	batch.PutMeta(metaBoot, nb[:])
	if err := idx.Commit(batch); err != nil {
		return fmt.Errorf("engine: restore: write the boot counter: %w", err)
	}
	return nil
}
