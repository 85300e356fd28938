package engine

// The checkpointer and the replay bound of the durable backend (durable.go).
//
// A checkpoint folds the log from the index's checkpoint position to the
// log's synced end (fold.go) and commits the net effect, and then the new
// position, to the index in one batch. It runs:
//   - as a job on the broker's Clock (job.go), kicked by every append and
//     polling every checkpointPoll while records wait: it checkpoints once
//     CheckpointBytes or CheckpointRecords have accumulated, or
//     CheckpointInterval has passed since the last one;
//   - in waitRoom, by an operation that finds the log beyond the checkpoint
//     over its bound (MaxReplayBytes, MaxReplayRecords), before it writes;
//   - once more in close, when the broker is healthy.
//
// Invariants: durable.go 1 (the index reflects only fsynced records) and 5
// (the replay bound).
//
// Owner: cpMu serialises checkpoints and guards fold and cpLast. No other
// lock is held while a checkpoint runs.

import (
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"github.com/smqd/smqd/wal"
)

// checkpointPoll is how often the checkpointer looks at the log while
// records wait for a checkpoint.
const checkpointPoll = 100 * time.Millisecond

// checkpointJob is the checkpointer's run: it checkpoints if a trigger is
// met and asks to run again while records wait.
func (d *durableStore) checkpointJob() bool {
	pending := uint64(d.wal.End()) - d.cpPos.Load()
	if pending == 0 {
		return false
	}
	if d.critical.Load() {
		return true // Badger would meet the full disk: wait for space (space.go)
	}
	pendingRecs := d.records.Load() - d.cpRecords.Load()
	d.cpMu.Lock()
	last := d.cpLast
	d.cpMu.Unlock()
	if pending < uint64(d.opts.CheckpointBytes) && pendingRecs < d.opts.CheckpointRecords &&
		d.clock.Now().Sub(last) < d.opts.CheckpointInterval {
		return true // look again
	}
	if err := d.checkpoint(); err != nil && d.b.usable() == nil {
		// The log or the index failed: without checkpoints the log a
		// restart must replay grows without bound, so stop accepting
		// changes (reopening retries everything).
		d.log.Error("checkpoint failed", "err", err)
		d.b.storageFailed(fmt.Errorf("checkpoint: %w", err))
		return false
	}
	return uint64(d.wal.End()) > d.cpPos.Load()
}

// checkpoint folds the log from the checkpoint position to its synced end
// into the index.
func (d *durableStore) checkpoint() error {
	d.cpMu.Lock()
	defer d.cpMu.Unlock()
	return d.checkpointLocked()
}

func (d *durableStore) checkpointLocked() error {
	d.cpLast = d.clock.Now()
	if err := d.wal.Sync(); err != nil {
		return mapErr(err)
	}
	recsNow := d.records.Load()
	from, to := d.cpPos.Load(), uint64(d.wal.SyncedEnd())
	if d.repl != nil {
		to = d.repl.checkpointLimit(to) // replica.go invariant 3
	}
	if to <= from {
		return nil
	}
	r, err := d.wal.NewReader(wal.Pos(from), wal.Pos(to))
	if err != nil {
		return mapErr(err)
	}
	defer r.Close()
	if d.fold == nil {
		d.fold = newFold(d.bornFrom)
	}
	f := d.fold
	f.reset(d.bornFrom)
	f.bornSeq = d.bornSeq
	defer func() {
		// Keep the fold's memory for the next window unless this one was
		// large: a map never shrinks, and memory matters more then.
		if f.nents > 1<<12 {
			d.fold = nil
		}
	}()
	for {
		p, typ, payload, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("checkpoint: read log at %d: %w", p, mapErr(err))
		}
		if d.repl != nil && !d.repl.validAt(uint64(p), uint8(typ)) {
			continue
		}
		if err := f.apply(uint64(p), uint32(r.NextPos()-p), uint8(typ), payload); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
	}
	if pos, open := f.openGroupAt(); open {
		to = pos // never fold part of a publish group (publish.go invariant 2)
	}
	err = f.dropDeletedQueues(func(qid uint64) (bool, error) {
		if d.b.queueByID(qid) != nil {
			return true, nil
		}
		return d.idx.HasQueue(qid) // absent: its deletion is in the index
	})
	if err != nil {
		return fmt.Errorf("checkpoint: %w", mapErr(err))
	}
	batch := d.idx.NewBatch()
	f.ft.write(batch)
	if err := f.ft.writeCounts(batch, d.idx.TopicCount, d.clock.Now().UnixMilli()); err != nil {
		return fmt.Errorf("checkpoint: %w", mapErr(err))
	}
	for id, fq := range f.queues {
		if fq.deleted || fq.reborn {
			batch.DeleteQueue(id) // with its earlier incarnation's messages
		}
		if !fq.deleted && fq.val != nil {
			batch.PutQueue(id, fq.val)
		}
	}
	for i := range f.nents {
		switch m := f.ent(i); {
		case m.dead:
		case m.gone:
			batch.DeleteMessage(m.k.qid, m.k.seq)
		default:
			batch.PutMessage(m.k.qid, m.k.seq, m.snap[:])
		}
	}
	if f.maxQueue > 0 {
		var v [8]byte
		binary.LittleEndian.PutUint64(v[:], f.maxQueue)
		batch.PutMeta(metaQueueID, v[:])
	}
	if d.repl != nil {
		d.repl.checkpointMeta(to, batch)
	}
	batch.SetPosition(to)
	if err := d.commit(batch); err != nil {
		return fmt.Errorf("checkpoint: commit index: %w", mapErr(err))
	}
	d.cpPos.Store(to)
	if d.repl != nil {
		d.repl.pruneVoid(to)
	}
	d.cpRecords.Store(recsNow)
	d.checkpoints.Add(1)
	d.kick() // segments before the new position may go now
	return nil
}

// overBound reports whether the log beyond the checkpoint exceeds the
// replay bound (invariant 5).
func (d *durableStore) overBound() bool {
	return uint64(d.wal.End())-d.cpPos.Load() > uint64(d.opts.MaxReplayBytes) ||
		d.records.Load()-d.cpRecords.Load() > d.opts.MaxReplayRecords
}

// waitRoom holds an operation that writes to the log (send, receive,
// delete, visibility change, relocation) while the log beyond the
// checkpoint exceeds its bound: the caller checkpoints itself, or waits for
// the checkpoint in progress and then looks again. In the common case it
// returns after two atomic loads.
func (d *durableStore) waitRoom() error {
	for d.overBound() {
		if d.critical.Load() {
			return ErrDiskFull // no checkpoint can make room now (space.go)
		}
		d.replayWaits.Add(1)
		d.cpMu.Lock()
		var err error
		if d.overBound() {
			err = d.checkpointLocked()
		}
		d.cpMu.Unlock()
		if err != nil {
			d.b.storageFailed(fmt.Errorf("checkpoint: %w", err))
			return err
		}
		if err := d.b.usable(); err != nil {
			return err
		}
	}
	return nil
}
