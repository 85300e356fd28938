package wal

// writer.go owns the two background goroutines: the writer, which is the
// only goroutine that writes or fsyncs segment files (group commit), and the
// spare goroutine, which keeps one preallocated segment file ready so that a
// roll does not stall the writer on fallocate (etcd's file_pipeline).
//
// Group commit: appenders frame records into the ring and kick the writer.
// Each writer iteration takes everything appended so far, writes it with one
// WriteAt per segment touched (two if the span wraps around the ring), then,
// per SyncMode, one fdatasync of the segment last written, then publishes
// the new WrittenEnd/SyncedEnd and wakes the waiters. Appends arriving during
// the fsync are picked up by the next iteration as one batch.
//
// The writer never delays a write to gather a larger batch. Measured: with
// N closed-loop appenders batches hold about N/2 records (the released half
// re-appends while the next fsync runs); waiting after an fsync for the
// released waiters to re-append gave full batches of N but halved the fsync
// rate on this 2-core machine (waking N goroutines and N kicks cost more
// than the fsync), so records/s dropped from ~130k to ~30-70k at N=64.
//
// Who touches what: writerState belongs to the writer goroutine alone. The
// spare file belongs to the spare goroutine until it is sent on l.spares.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// writerState is owned by the writer goroutine.
type writerState struct {
	wseg     *segment         // segment last written to: the one an fsync must cover
	lastSync time.Time        // end of the last fdatasync (SyncInterval pacing)
	endMark  [headerSize]byte // zeros: the end-of-data mark of recycled files
	timer    *time.Timer
	nrec     uint64 // mu.records at the last write, for the batch histogram
}

// spareFile is a preallocated, synced, closed spare segment file (or the
// error that prevented making one).
type spareFile struct {
	name     string
	recycled bool // a former segment's file: stale bytes inside
	err      error
}

// startBackground starts the writer and spare goroutines; Close stops them.
func (l *Log) startBackground() {
	go l.writerLoop()
	go l.spareLoop()
}

// writerLoop runs until Close, writing what appenders put in the ring.
func (l *Log) writerLoop() {
	defer close(l.writerDone)
	var timerC <-chan time.Time
	for {
		stopping, timed := false, false
		select {
		case <-l.kick:
		case <-timerC:
			timerC, timed = nil, true
		case <-l.stop:
			stopping = true
		}
		l.flush(stopping, timed)
		if stopping {
			if l.w.timer != nil {
				l.w.timer.Stop()
			}
			return
		}
		// Make sure unsynced data gets its fsync in time even if no further
		// append comes: SyncInterval after the interval, SyncAlways (data
		// nobody waits for) after lazySyncDelay.
		if l.opts.Sync != SyncNone && timerC == nil && l.fail.Load() == nil &&
			l.synced.Load() < l.written.Load() {
			d := time.Until(l.w.lastSync.Add(l.opts.SyncInterval))
			if l.opts.Sync == SyncAlways {
				d = lazySyncDelay
			}
			if l.w.timer == nil {
				l.w.timer = time.NewTimer(d)
			} else {
				l.w.timer.Reset(d)
			}
			timerC = l.w.timer.C
		}
	}
}

// lazySyncDelay bounds how long, in SyncAlways, records that no caller
// waits for (receives, deletes, visibility changes) stay unsynced when no
// waited-for record comes to carry them: fsyncing them at once would make
// every waiting send queue behind an fsync it does not need.
const lazySyncDelay = 5 * time.Millisecond

// flush writes everything appended so far and fsyncs it if a waiter (or a
// Sync call, or final, or the mode's timer) asks for it.
func (l *Log) flush(final, timed bool) {
	if l.fail.Load() != nil {
		return // invariant 8: no I/O after a failure
	}
	l.mu.RLock()
	end, nrec := l.mu.end, l.mu.records
	l.mu.RUnlock()

	if written := l.WrittenEnd(); end > written {
		if op, err := l.writeRange(written, end); err != nil {
			l.setFailed(op, err)
			return
		}
		l.stats.writes.Add(1)
		l.stats.batch.observe(float64(nrec - l.w.nrec))
		l.w.nrec = nrec
		l.written.Store(uint64(end))
		l.mu.Lock()
		stalled := l.mu.stalled > 0
		l.mu.Unlock()
		if stalled {
			l.spaceCond.Broadcast()
		}
		if l.opts.Sync != SyncAlways {
			l.announce(&l.ack.written)
		}
	}

	synced := l.SyncedEnd()
	if synced >= end {
		return
	}
	need := final || Pos(l.syncWant.Load()) > synced ||
		(l.opts.Sync == SyncAlways && timed) ||
		(l.opts.Sync == SyncInterval && time.Since(l.w.lastSync) >= l.opts.SyncInterval)
	if !need {
		return
	}
	if err := l.syncSegment(l.w.wseg); err != nil {
		l.setFailed("fsync", err)
		return
	}
	l.synced.Store(uint64(end))
	l.announce(&l.ack.synced)
}

// writeRange writes the ring bytes of [from, to) to their segment files.
// On failure it returns the failed operation's name and the error.
func (l *Log) writeRange(from, to Pos) (string, error) {
	sl := l.segs.Load() // loaded after the end snapshot: has every segment below to
	for p := from; p < to; {
		s := sl.find(p)
		if s == nil {
			return "write", fmt.Errorf("wal: internal error: no segment holds pos %d", p)
		}
		if s.file.Load() == nil {
			if op, err := l.openNewSegment(s); err != nil {
				return op, err
			}
		}
		segEnd := min(to, s.endPos(to))
		f := s.file.Load().f // no ref needed: a segment with unwritten data cannot be removed
		off := int64(p - s.start)
		a, b := l.ring.spans(p, int(segEnd-p))
		if _, err := f.WriteAt(a, off); err != nil {
			return "write", err
		}
		l.stats.writeCalls.Add(1)
		if b != nil {
			if _, err := f.WriteAt(b, off+int64(len(a))); err != nil {
				return "write", err
			}
			l.stats.writeCalls.Add(1)
		}
		if segEnd == to && s.recycled.Load() {
			// A recycled file holds an older segment's bytes after the
			// data: end the data with a zero header so recovery sees a
			// clean end (the next write overwrites it).
			if end := off + int64(segEnd-p); end+headerSize <= s.capacity {
				if _, err := f.WriteAt(l.w.endMark[:], end); err != nil {
					return "write", err
				}
				l.stats.writeCalls.Add(1)
			}
		}
		l.w.wseg = s
		p = segEnd
	}
	return "", nil
}

// openNewSegment gives the new segment s its file: it first fsyncs the
// segment written before it (invariant 6), then renames the spare into
// place and fsyncs the directory.
func (l *Log) openNewSegment(s *segment) (string, error) {
	if prev := l.w.wseg; prev != nil && prev != s {
		if err := l.syncSegment(prev); err != nil {
			return "fsync", err
		}
		// Everything before s is written and synced; publish written first
		// so that SyncedEnd never exceeds WrittenEnd (invariant 4).
		if uint64(s.start) > l.written.Load() {
			l.written.Store(uint64(s.start))
		}
		l.synced.Store(uint64(s.start))
		l.announce(&l.ack.synced)
	}
	sp := <-l.spares // the spare goroutine stops only after the writer
	if sp.err != nil {
		return "roll", fmt.Errorf("prepare spare segment: %w", sp.err)
	}
	name := segName(l.dir, s.start)
	if err := l.fs.Rename(sp.name, name); err != nil {
		return "roll", err
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return "roll", err
	}
	f, err := l.fs.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return "roll", err
	}
	s.size.Store(l.opts.SegmentBytes)
	s.recycled.Store(sp.recycled)
	s.file.Store(newSegFile(f, name))
	l.stats.rolls.Add(1)
	l.log.Info("wal segment started", "segment", filepath.Base(name), "pos", uint64(s.start))
	return "", nil
}

// syncSegment fdatasyncs s's file (skipping a removed segment: its data is
// gone on purpose) and records the latency.
func (l *Log) syncSegment(s *segment) error {
	if s == nil {
		return nil
	}
	sf, err := s.acquire()
	if errors.Is(err, ErrSegmentRemoved) {
		return nil
	}
	if err != nil {
		return err
	}
	defer sf.unref()
	start := time.Now()
	err = sf.f.Sync()
	l.w.lastSync = time.Now()
	l.stats.observeFsync(l.w.lastSync.Sub(start))
	return err
}

// announce publishes a new written/synced value to the waiters on c. The
// value was stored before; taking ack orders the store before any waiter's
// check-then-wait.
func (l *Log) announce(c *sync.Cond) {
	l.ack.Lock()
	//lint:ignore SA2001 an empty section orders the store before the broadcast
	l.ack.Unlock()
	c.Broadcast()
}

// setFailed records the sticky error (invariant 8) and wakes everyone who
// may be waiting for the writer.
func (l *Log) setFailed(op string, err error) {
	f := &failure{op: op, cause: err}
	if l.fail.CompareAndSwap(nil, f) {
		l.log.Error("wal write path failed; the log must be reopened",
			"op", op, "err", err, "written", l.WrittenEnd(), "synced", l.SyncedEnd(), "end", l.End())
	}
	l.mu.Lock()
	//lint:ignore SA2001 an empty section orders the failure before the broadcast
	l.mu.Unlock()
	l.spaceCond.Broadcast()
	l.wakeWaiters()
}

// spareLoop keeps one spare segment file ready on l.spares until Close.
func (l *Log) spareLoop() {
	defer close(l.spareDone)
	for i := 0; ; i++ {
		sp := spareFile{name: l.takeRecycled(), recycled: true}
		if sp.name == "" {
			sp = spareFile{name: filepath.Join(l.dir, fmt.Sprintf("%d%s", i, spareSuffix))}
			sp.err = l.makeSpare(sp.name)
		}
		name, err := sp.name, sp.err
		select {
		case l.spares <- sp:
			if err != nil {
				<-l.spareStop // a broken FS: do not spin
				return
			}
		case <-l.spareStop:
			if err == nil {
				_ = l.fs.Remove(name) // best effort; Open deletes leftovers
			}
			return
		}
	}
}

// makeSpare creates, preallocates and syncs a spare file; the size metadata
// is then durable, so the writer's fdatasyncs into it stay data-only.
func (l *Log) makeSpare(name string) error {
	f, err := l.fs.OpenFile(name, osCreateRW, 0o644)
	if err != nil {
		return err
	}
	err = f.Preallocate(l.opts.SegmentBytes)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = l.fs.SyncDir(l.dir)
	}
	if err != nil {
		_ = l.fs.Remove(name)
	}
	return err
}
