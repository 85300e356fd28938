package engine

// The durable backend: the write-ahead log holds every body and every state
// change, the index (Badger) holds a checkpoint of the state, and start-up
// rebuilds the in-memory state from both.
//
// Files of this backend:
//
//	durable.go     opening, the log side of the seam, record encoding, sync, stats, close
//	recovery.go    load: broker metadata, the log tail folded and merged with the index
//	repair.go      starting on a damaged log: what was lost, the repair report
//	repair_queues.go  queues whose own records a repair lost
//	checkpoint.go  the checkpointer (a job on the clock) and the replay bound
//	fold.go        folding a window of the log into its net effect
//
// Data directory layout:
//
//	<Dir>/LOCK     flock(2)ed while a broker has the directory open
//	<Dir>/index/   the Badger store
//	<Dir>/wal/     the log segments
//
// Invariants:
//  1. The index never reflects a record that is not fsynced in the log: the
//     checkpointer reads only up to SyncedEnd after a Sync.
//  2. A segment is removed only when it ends at or before the checkpoint
//     position and holds no live body (compaction.go), so replay from the
//     checkpoint position always finds its records and every body it needs.
//  3. MessageIds stay unique across restarts whatever the sync mode: a
//     message's sequence number carries the boot counter in its top 24 bits,
//     and the bumped counter is durable before anything is served.
//  4. Queue creation, attribute changes and deletion are fsynced before they
//     are acknowledged, in every sync mode.
//  5. The log beyond the checkpoint stays within MaxReplayBytes and
//     MaxReplayRecords, plus what operations already past waitRoom append:
//     whoever finds the bound exceeded checkpoints before writing.
//
// Owner: the wal.Log and index.Store are safe for concurrent use. cpMu
// serialises checkpoints and guards fold and cpLast; the counters are
// atomics. The checkpoint job (checkpoint.go) and waitRoom are the only
// callers of checkpoint; load runs before anything else.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smqd/smqd/index"
	"github.com/smqd/smqd/wal"
)

// durableStore is the durable backend (storage.go).
type durableStore struct {
	opts   *Options // the broker's, with defaults
	log    *slog.Logger
	clock  Clock
	b      *Broker // set by load
	idx    *index.Store
	wal    *wal.Log
	unlock func() // releases the data directory's lock
	kick   func() // kicks the broker's compactor

	// commit writes an index batch: idx.Commit, or a test's stand-in
	// (Options.testCommit: the power-loss test snapshots the index here).
	commit func(*index.Batch) error

	// repl is set when the log is a shard's replicated log (replica.go):
	// recovery and checkpoints then fold only committed records.
	repl *replStore

	boot uint64 // this run's boot counter (invariant 3)
	// repairResumed: a --wal-repair start left its mark and did not
	// finish (repair.go, repairPendingName).
	repairResumed bool
	// bornFrom is the log end found at start-up: the index may hold puts
	// of sends before it beyond its checkpoint position (fold.go).
	bornFrom uint64
	// bornSeq (a replicated log, replica.go invariant 8): per queue, the
	// highest seq of a message the index may hold whose send the log
	// replays after bornFrom (a snapshot's messages, imported or found in
	// the index at start-up). Guarded by cpMu (set at load, before any
	// checkpoint, and by ImportState).
	bornSeq   map[uint64]uint64
	recovered RecoveryStats

	records     atomic.Int64  // records appended since Open
	cpPos       atomic.Uint64 // the index's checkpoint position
	cpRecords   atomic.Int64  // records when the last checkpoint was taken
	checkpoints atomic.Int64  // checkpoints written since Open
	replayWaits atomic.Int64  // operations that checkpointed first (invariant 5)

	cp     *job       // the checkpointer
	cpMu   sync.Mutex // serialises checkpoints
	fold   *fold      // guarded by cpMu: reused by every checkpoint
	cpLast time.Time  // guarded by cpMu: when the last checkpoint started

	// The free-space guard (space.go): written by its job, read by all.
	space      spaceGuard
	spaceJ     *job
	free       atomic.Int64 // free bytes at the last sample
	diskFull   atomic.Bool  // below the reserve: new messages refused
	critical   atomic.Bool  // below the index's reserve: checkpoints wait
	fullEvents atomic.Int64 // times the guard entered the disk-full state
}

// openDurable opens (creating if needed) the data directory, its index and
// its log. Nothing is loaded yet (load does that).
func openDurable(o *Options) (*durableStore, error) {
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("engine: create data directory: %w", err)
	}
	if fi, err := os.Stat(o.Dir); err == nil && fi.Mode().Perm()&0o077 != 0 {
		o.Logger.Warn("the data directory is readable by other users; smqd creates it 0700", "dir", o.Dir, "mode", fi.Mode().Perm().String())
	}
	unlock, err := lockDataDir(o.Dir)
	if err != nil {
		return nil, err
	}
	iopts := o.Index
	if iopts.Logger == nil {
		iopts.Logger = o.Logger
	}
	wo := o.walOptions()
	guard := newSpaceGuard(o, wo, iopts)
	if need := wo.ReserveBytes() + iopts.ReserveBytes(); o.FreeSpaceReserve > 0 && o.FreeSpaceReserve < need {
		// space.go: below this, a disk that others fill can reach Badger's
		// memory-mapped memtable (SIGBUS) before the guard stops writes.
		o.Logger.Warn("the free-space reserve is below what the log and the index need: a full disk can end smqd (SIGBUS in the index), whether smqd's own writes fill it or another process's",
			"reserve_bytes", o.FreeSpaceReserve, "needed_bytes", need)
	}
	walFS := wo.FS
	if walFS == nil {
		walFS = wal.OSFS()
	}
	if err := checkOpenSpace(o, guard, walFS, filepath.Join(o.Dir, "wal")); err != nil {
		unlock()
		return nil, err
	}
	resumed, err := markRepairPending(o)
	if err != nil {
		unlock()
		return nil, err
	}
	// The index and the log are independent until the replay: open them
	// side by side (each checks its files), which shortens a restart.
	var l *wal.Log
	var walErr error
	walDone := make(chan struct{})
	go func() {
		defer close(walDone)
		l, walErr = wal.Open(filepath.Join(o.Dir, "wal"), wo)
	}()
	idx, err := index.Open(filepath.Join(o.Dir, "index"), iopts)
	<-walDone
	switch {
	case err != nil:
		if walErr == nil {
			l.Close()
		}
		unlock()
		return nil, fmt.Errorf("engine: open index: %w", err)
	case walErr != nil:
		idx.Close()
		unlock()
		return nil, fmt.Errorf("engine: open log: %w", walErr)
	}
	d := &durableStore{opts: o, log: o.Logger, clock: o.Clock, idx: idx, wal: l, unlock: unlock, kick: func() {}, space: guard,
		repairResumed: resumed}
	d.commit = idx.Commit
	if o.testCommit != nil {
		d.commit = func(b *index.Batch) error { return o.testCommit(idx, b) }
	}
	d.cp = newJob(o.Clock, checkpointPoll, d.checkpointJob)
	d.spaceJ = newJob(o.Clock, spacePoll, d.spaceJob)
	d.checkSpace(true)
	return d, nil
}

// mapErr turns the errors of the lower packages that have an engine meaning
// into the engine's (storage.go invariant 4).
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, wal.ErrClosed), errors.Is(err, index.ErrClosed):
		return ErrClosed
	case errors.Is(err, wal.ErrSegmentRemoved):
		return errSegmentRemoved
	case errors.Is(err, wal.ErrCorrupt):
		return fmt.Errorf("%w: %w", errDamaged, err)
	case errors.Is(err, wal.ErrSpareFailed):
		return fmt.Errorf("%w: %w", ErrStorageUnavailable, err)
	}
	return err
}

func (d *durableStore) seqBase() uint64 { return d.boot << bootShift }

func (d *durableStore) writable() error { return nil }
func (d *durableStore) enter() error    { return nil }
func (d *durableStore) leave()          {}

// A single node's state is never behind another leader's
// (replica_confirm.go, invariant 3).
func (d *durableStore) enterLeading() (uint64, error) { return 0, nil }
func (d *durableStore) leading() uint64               { return 0 }
func (d *durableStore) confirmLead(uint64) error      { return nil }

func (d *durableStore) append(recs []logRec) error {
	var arr [MaxBatch]wal.Record
	wr := arr[:0]
	if len(recs) > MaxBatch {
		wr = make([]wal.Record, 0, len(recs))
	}
	for i := range recs {
		wr = append(wr, wal.Record{Type: wal.RecordType(recs[i].typ), Head: recs[i].head, Body: recs[i].body, Live: recs[i].live})
	}
	if err := d.wal.Append(wr); err != nil {
		return mapErr(err)
	}
	d.records.Add(int64(len(recs)))
	for i := range recs {
		recs[i].pos, recs[i].size = uint64(wr[i].Pos), uint32(wr[i].Size)
	}
	countAppended(recs) // topic_count.go invariant 4
	d.cp.kick()
	d.spaceJ.kick()
	d.kick()
	return nil
}

func (d *durableStore) recordLimit() int { return d.wal.MaxRecord() }

func (d *durableStore) waitDurable(pos uint64) error { return mapErr(d.wal.WaitDurable(wal.Pos(pos))) }

// maxKeptBuf bounds the read buffer a reader keeps after the log grew it.
const maxKeptBuf = 1 << 17

func (d *durableStore) read(pos uint64, size uint32, buf []byte) (uint8, []byte, []byte, error) {
	typ, payload, err := d.wal.ReadAt(wal.Pos(pos), int(size), buf)
	if cap(payload) > cap(buf) && cap(payload) <= maxKeptBuf {
		buf = payload[:0] // the log grew our buffer: keep it
	}
	return uint8(typ), payload, buf, mapErr(err)
}

func (d *durableStore) readRun(pos uint64, sizes []int, buf []byte, sink runSink) []byte {
	out, _ := d.wal.ReadRun(wal.Pos(pos), sizes, buf, func(i int, typ wal.RecordType, payload []byte) {
		sink.take(i, uint8(typ), payload)
	})
	if cap(out) > cap(buf) && cap(out) <= 2*maxKeptBuf {
		return out[:0] // keep a grown buffer for the next batch
	}
	return buf
}

// prefetch does nothing: bodies are read from the page cache or the ring by
// a system call, which a CPU hint does not help.
func (d *durableStore) prefetch(uint64, uint32) {}

func (d *durableStore) bodyRecord(rec *logRec, head *[bodyHeadLen]byte, qid uint64, stripeIdx uint8, idx uint32, s *slot, sum *[16]byte, props, body []byte, relocated bool) {
	putSnap(head[:snapLen], qid, stripeIdx, idx, s)
	copy(head[snapLen:], sum[:])
	typ := recSend
	if relocated {
		typ = recRelocate
	}
	if len(props) == 0 {
		*rec = logRec{typ: typ, head: head[:snapLen+16], body: body, live: true}
		return
	}
	typ = recSendProps
	if relocated {
		typ = recRelocateProps
	}
	*rec = logRec{typ: typ, head: putPropsHead(head[:], snapLen, props), body: body, live: true}
}

func (d *durableStore) moveRecord(rec *logRec, src []byte, qid uint64, stripeIdx uint8, idx uint32, s *slot, sum *[16]byte, props, body []byte) {
	h := make([]byte, 2*snapLen+16+4+len(props))
	copy(h, src[:snapLen])
	putSnap(h[snapLen:], qid, stripeIdx, idx, s)
	copy(h[2*snapLen:], sum[:])
	binary.LittleEndian.PutUint32(h[2*snapLen+16:], uint32(len(props)))
	copy(h[2*snapLen+20:], props)
	*rec = logRec{typ: recDeadLetter, head: h, body: body, live: true}
}

// appendInPieces appends recs in order, in batches that each fit half the
// log's ring, for records each of which stands alone: the batches are not
// atomic together. (Append takes a batch larger than the ring, but holds
// every other writer back until it is framed: wal invariant 12.)
// Recovery logs one record per message that expired or was lost while the
// broker was down, which can be millions.
func (d *durableStore) appendInPieces(recs []logRec) error {
	limit := d.wal.Options().BufferBytes / 2
	for len(recs) > 0 {
		n, size := 0, 0
		for n < len(recs) {
			s := len(recs[n].head) + len(recs[n].body) + 32 // the frame's header and padding, generously
			if n > 0 && size+s > limit {
				break
			}
			size += s
			n++
		}
		if err := d.append(recs[:n]); err != nil {
			return err
		}
		recs = recs[n:]
	}
	return nil
}

func (d *durableStore) changeRecord(st *stripe, typ uint8, idx uint32) {
	b := st.snapBytes(snapLen)
	putSnap(b, st.q.id, st.idx, idx, st.slab.at(idx))
	st.recs = append(st.recs, logRec{typ: typ, head: b})
}

func (d *durableStore) adminRecord(typ uint8, payload []byte) error {
	// Refused before anything changes while the log waits for a segment
	// file (a queue or topic record appended then is written once one is
	// made: a "failed" DeleteQueue took effect at the next start, deleting
	// messages acknowledged since; embedding audit, 2026-12-06).
	if err := d.stalled(); err != nil {
		return err
	}
	recs := [1]logRec{{typ: typ, head: payload}}
	if err := d.append(recs[:]); err != nil {
		return err
	}
	// The record that meets the stall (appended before it was known) is
	// not failed but queued: it is written once a segment file is made.
	// Its change is applied live only once it is durable, so wait for
	// that (the stall clears by itself), or for Close.
	for {
		err := d.wal.Sync()
		if err == nil || !errors.Is(err, wal.ErrSpareFailed) || d.b.closed.Load() {
			return mapErr(err)
		}
		time.Sleep(stallRetry)
	}
}

// stallRetry is how often a queue or topic record queued behind a stalled
// log looks again whether it is durable.
const stallRetry = 100 * time.Millisecond

func (d *durableStore) addLive(pos uint64, delta int64) { d.wal.AddLive(wal.Pos(pos), delta) }

func (d *durableStore) segments(dst []segInfo) []segInfo {
	for _, s := range d.wal.Segments() {
		dst = append(dst, segInfo{start: uint64(s.Start), end: uint64(s.End), live: s.Live, active: s.Active, held: s.FileBytes})
	}
	return dst
}

func (d *durableStore) scan(start, from uint64, fn func(pos uint64, size uint32, typ uint8, payload []byte) bool) (bool, error) {
	var seg *wal.SegmentInfo
	for _, s := range d.wal.Segments() {
		if uint64(s.Start) == start {
			seg = &s
			break
		}
	}
	if seg == nil || seg.Active || seg.End > d.wal.WrittenEnd() {
		return false, nil
	}
	if from < start || from > uint64(seg.End) {
		from = start
	}
	r, err := d.wal.NewReader(wal.Pos(from), seg.End)
	if err != nil {
		return false, mapErr(err)
	}
	defer r.Close()
	for {
		p, typ, payload, err := r.Next()
		var ce *wal.CorruptionError
		switch {
		case err == io.EOF:
			return true, nil
		case errors.Is(err, wal.ErrSegmentRemoved):
			return false, nil
		case errors.As(err, &ce):
			return false, &damagedRange{from: uint64(ce.Pos), to: uint64(seg.End), err: err}
		case err != nil:
			return false, mapErr(err)
		}
		if !fn(uint64(p), uint32(r.NextPos()-p), uint8(typ), payload) {
			return true, nil
		}
	}
}

func (d *durableStore) removeSegment(start uint64) (bool, error) {
	ok, err := d.wal.RemoveSegmentIfDead(wal.Pos(start))
	if errors.Is(err, wal.ErrNoSegment) {
		return false, nil // already gone
	}
	return ok, mapErr(err)
}

func (d *durableStore) replayStart() uint64 { return d.cpPos.Load() }

// sync writes and fsyncs the log, whatever the sync mode.
func (d *durableStore) sync() error { return mapErr(d.wal.Sync()) }

func (d *durableStore) health() error { return mapErr(d.wal.Health()) }

func (d *durableStore) stalled() error { return mapErr(d.wal.Stalled()) }

// resync makes durable what a reopen would find (Broker.Resync). While
// free space is below the guard's minimum to open it refuses, with an
// error wrapping ErrDiskFull: its callers (the single node's reopen and a
// cluster shard's restart in place) close the broker next and open its
// directory again. Below the critical level closing the index flushes
// Badger's memtable into a table written through a memory mapping of a
// sparse file, which on a disk with no room is SIGBUS, the end of the
// whole process; below the minimum Open refuses, and a single node would
// be left with no broker at all (every request 503, reads included) where
// the failed one still serves reads. They retry with their backoff
// instead, as checkpoints wait for room (space.go). Close's own resync
// (the broker is closed already) is not refused: close handles a full
// disk itself.
func (d *durableStore) resync() error {
	if g := d.space; g.minimum > 0 && (d.b == nil || !d.b.closed.Load()) {
		if free := d.freeBytes(); free < g.minimum {
			return fmt.Errorf("%w: %d bytes free, and closing the index and opening the broker again need %d", ErrDiskFull, free, g.minimum)
		}
	}
	return d.wal.Resync()
}

func (d *durableStore) stats(st *StorageStats) {
	st.Durable = true
	st.DiskFull = d.diskFull.Load()
	st.DiskFullEvents = d.fullEvents.Load()
	st.FreeBytes = d.free.Load()
	st.FreeSpaceReserve = d.space.reserve
	st.Checkpoints = d.checkpoints.Load()
	st.ReplayWaits = d.replayWaits.Load()
	st.CheckpointAt = d.cpPos.Load()
	st.IndexBytes = d.idx.DiskBytes()
	st.WAL = d.wal.Stats()
	st.Recovery = d.recovered
}

func (d *durableStore) recovery() RecoveryStats { return d.recovered }

// releaseMemory drops the process's mappings of index table pages (they
// stay in the page cache).
func (d *durableStore) releaseMemory() {
	if _, err := d.idx.ReleaseMemory(); err != nil && !errors.Is(err, index.ErrClosed) {
		d.log.Warn("release index memory", "err", err)
	}
}

// close stops the checkpointer, writes a final checkpoint if the broker is
// healthy and the disk has room, and closes the log and the index. On a
// critically full disk the index's own close may still meet the disk
// (Badger flushes its memtable through a mapping); the reopen and restart
// paths wait for room before they close (resync), and leaving the index
// open instead, tried on 2026-12-06, let its late close delete the files
// of a new broker opened in the same directory (review K).
func (d *durableStore) close(clean bool) error {
	d.cp.stop()
	d.spaceJ.stop()
	var errs []error
	// space.go: on a full disk the restart replays instead. A fresh
	// sample too: the guard's last one may be a poll old, and a checkpoint
	// writes Badger's memtable log through a mapping as well.
	critical := d.space.critical > 0 && d.freeBytes() < d.space.critical
	if clean && !d.diskFull.Load() && !critical {
		if err := d.checkpoint(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := d.wal.Close(); err != nil {
		errs = append(errs, err)
	}
	if err := d.idx.Close(); err != nil {
		errs = append(errs, err)
	}
	d.unlock()
	return errors.Join(errs...)
}
