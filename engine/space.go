package engine

// The free-space guard of the durable backend (durable.go).
//
// Badger and the log must never meet ENOSPC in normal running: Badger
// writes its memtable log through a memory mapping of a sparse file, so a
// full disk reaches it as SIGBUS and ends the process (and ends it again at
// every restart on the same disk); a log that cannot make its next segment
// file stalls. The guard keeps a reserve of free space on the file systems
// holding the log and the index:
//
//	state      entered when                      what works
//	normal     free >= reserve + hysteresis      everything
//	disk full  free <  reserve                   receives, deletes, visibility changes, peeks,
//	           (at open: < reserve + hysteresis) attribute changes, checkpoints, compaction;
//	                                             sends and queue creations fail with ErrDiskFull
//	critical   free <  reserve / 4               as disk full, and checkpoints wait (Badger
//	                                             would meet the full disk); an operation held
//	                                             by the replay bound fails with ErrDiskFull
//
// Open refuses to start below the minimum, with an error that says so,
// instead of starting and dying in Badger.
//
// Sizes (docs/operations.md; Options.FreeSpaceReserve replaces the reserve):
//
//	reserve    = wal.Options.ReserveBytes (the next segment files and the ring)
//	           + index.Options.ReserveBytes (memtable logs, a flush, a level-0 compaction)
//	           + one segment (compaction relocations, bursts between two samples)
//	minimum    = reserve / 2 (opening: a memtable log and a segment, with room to drain)
//	critical   = reserve / 4
//	hysteresis = one segment (at most reserve / 8)
//
// A broker stopping while the disk is full skips its last checkpoint (a
// restart replays the log instead): it would spend space the restart needs.
//
// A job on the clock (job.go) samples free space every spacePoll while
// records are appended, and Open samples once.
//
// Owner: the space job writes freeBytes and the state; everyone reads them
// (atomics).

import (
	"fmt"
	"math"
	"time"

	"github.com/smqd/smqd/index"
	"github.com/smqd/smqd/wal"
)

// spacePoll is how often free space is sampled while records are appended.
const spacePoll = 100 * time.Millisecond

// spaceGuard holds the guard's sizes and state.
type spaceGuard struct {
	reserve    int64 // below it: disk full (0: the guard is off)
	critical   int64 // below it: checkpoints wait too
	minimum    int64 // below it: Open refuses
	hysteresis int64 // above reserve by this much: normal again
}

// newSpaceGuard sizes the guard from the options (with the engine's
// defaults applied to o.WAL and o.Index).
func newSpaceGuard(o *Options, wo wal.Options, io index.Options) spaceGuard {
	seg := wo.SegmentBytes
	if seg == 0 {
		seg = wal.DefaultOptions().SegmentBytes
	}
	r := wo.ReserveBytes() + io.ReserveBytes() + seg
	switch {
	case o.FreeSpaceReserve < 0:
		return spaceGuard{} // off
	case o.FreeSpaceReserve > 0:
		r = o.FreeSpaceReserve
	}
	// The other levels are fractions of the reserve, far enough below it
	// that a broker stopped on a full disk (which the drain and the last
	// checkpoint may have eaten into) opens again.
	return spaceGuard{reserve: r, minimum: r / 2, critical: r / 4, hysteresis: min(seg, max(r/8, 1))}
}

// walOptions returns the log's options with the engine's defaults.
func (o *Options) walOptions() wal.Options {
	wo := o.WAL
	if wo.Logger == nil {
		wo.Logger = o.Logger
	}
	if wo.BufferBytes == 0 {
		// The ring caches recent bodies for receives and holds unwritten
		// data; 4 MiB covers both at several hundred MB/s (a group commit
		// writes well under 1 MiB) and keeps the process small.
		wo.BufferBytes = DefaultLogBufferBytes
	}
	return wo
}

// SizedFreeSpaceReserve returns the free-space reserve of a broker opened
// with o: o.FreeSpaceReserve when it is set, the guard's own size when it
// is 0, and 0 when the guard is off (negative). A cluster node, whose
// shards' brokers share one disk, gives each the sum of theirs.
func SizedFreeSpaceReserve(o Options) int64 {
	return newSpaceGuard(&o, o.walOptions(), o.Index).reserve
}

// freeBytes returns the free bytes of the file systems holding the log and
// the index (the smaller), or MaxInt64 if the platform cannot tell.
func (d *durableStore) freeBytes() int64 {
	free := int64(math.MaxInt64)
	if n, err := d.wal.FreeBytes(); err == nil {
		free = n
	}
	if n, err := d.idx.FreeBytes(); err == nil {
		free = min(free, n)
	}
	return free
}

// checkSpace samples free space and moves the guard's state. At open
// (opening) a broker starts in the disk-full state already when free space
// is inside the hysteresis band above the reserve: a broker stopped on a
// full disk gets back a little space when it closes (Badger's memtable
// files, the spare segment), and its first sends must not spend it.
func (d *durableStore) checkSpace(opening bool) {
	g := d.space
	if g.reserve == 0 {
		return
	}
	free := d.freeBytes()
	d.free.Store(free)
	full := d.diskFull.Load()
	switch {
	// Each transition is logged before it takes effect, so that whoever
	// sees its effect (a 503 DiskFull, or a send accepted again) can find
	// its log line.
	case !full && (free < g.reserve || opening && free < g.reserve+g.hysteresis):
		d.log.Warn("disk full: new messages and queues are refused until space is freed; receives and deletes go on",
			"free_bytes", free, "reserve_bytes", g.reserve, "dir", d.opts.Dir)
		d.fullEvents.Add(1)
		d.diskFull.Store(true)
	case full && free >= g.reserve+g.hysteresis:
		d.log.Info("disk space is back: new messages are accepted again", "free_bytes", free, "reserve_bytes", g.reserve)
		d.diskFull.Store(false)
	}
	if free < g.critical && !d.critical.Swap(true) {
		d.log.Error("disk space critical: checkpoints wait until space is freed", "free_bytes", free, "needed_bytes", g.critical)
	} else if free >= g.critical && d.critical.Swap(false) {
		d.log.Info("disk space no longer critical", "free_bytes", free)
	}
}

// spaceJob is the space job's run: it samples while records are appended,
// and every spacePoll while the disk is full, so that the state clears by
// itself once space is freed even if nothing is sent (a cluster node hands
// its leads over while full and gets them back once it is not: it must see
// the space come back with no client traffic of its own).
func (d *durableStore) spaceJob() bool {
	d.checkSpace(false)
	return d.diskFull.Load()
}

// diskState implements storage.
func (d *durableStore) diskState() (full, critical bool) { return d.diskFull.Load(), d.critical.Load() }

// acceptNew reports whether new messages and queues may be stored.
func (d *durableStore) acceptNew() error {
	if d.diskFull.Load() {
		d.spaceJ.kick() // nothing else appends now: look again soon
		return ErrDiskFull
	}
	// Refused before anything is appended while the log waits for a
	// segment file: a record appended now would be written once one is
	// made, so a send answered an error would be stored after all.
	return d.stalled()
}

// checkOpenSpace refuses to open on a file system with less free space than
// the guard's minimum. dir is created already; fs is the log's FS.
func checkOpenSpace(o *Options, g spaceGuard, fs wal.FS, walDir string) error {
	if g.minimum == 0 {
		return nil
	}
	free := int64(math.MaxInt64)
	if n, err := fs.FreeBytes(walDir); err == nil {
		free = n
	}
	if n, err := wal.FreeBytes(o.Dir); err == nil {
		free = min(free, n)
	}
	if free < g.minimum {
		why, fix := "the index's memtables and a log segment", "lower the segment and memtable sizes"
		if o.FreeSpaceReserve > 0 { // the minimum is half of it, whatever the sizes
			why, fix = "half of Options.FreeSpaceReserve", "lower FreeSpaceReserve (smqd --free-space-reserve)"
		}
		return fmt.Errorf("engine: refusing to open: %d bytes free for %s, and the broker needs at least %d to run safely "+
			"(%s); free space, or %s: %w", free, o.Dir, g.minimum, why, fix, ErrDiskFull)
	}
	return nil
}
