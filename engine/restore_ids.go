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
// Invariant: a restore moves the counter (or the term) RestoreIDJump past
// the backup's, so a restored broker's ids differ from every id the old
// broker gave unless it started (or elected) that many times after the
// backup. The jump spends part of the 24-bit space: 256 restores in
// a row, each of a broker itself restored.

import (
	"encoding/binary"
	"fmt"
	"path/filepath"

	"github.com/smqd/smqd/index"
)

// RestoreIDJump is how far a restore moves the boot counter (or a shard's
// term) past the backup's.
const RestoreIDJump = 1 << 16

// jumpRestoredBoot moves the boot counter of the index restored in dir
// RestoreIDJump on.
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
	boot += RestoreIDJump
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
