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
// Spare failures: a spare that cannot be made (ENOSPC from fallocate, say)
// never fails the log. The spare goroutine retries with a bounded
// exponential backoff (spareRetryMin doubling to spareRetryMax), logging at
// Error once per failure streak and at Info when a spare is made again; its
// current failure is Log.spareErr (Health reports it). A roll that finds no
// spare ready waits for the spare goroutine's attempt in progress, or, if
// the spare goroutine is failing, makes one itself. If that fails too, the
// writer stalls: everything before the new segment is written and synced
// as usual, the records after it stay in the ring, their waiters get an
// error wrapping ErrSpareFailed (Log.stall), Append fails with it once the
// ring is full, and the writer makes no further attempt of its own: the
// next spare the spare goroutine delivers ends the stall (no reopen).
// Failed writes and fsyncs stay sticky (invariant 8); so do a failed
// rename or directory fsync of the roll, which are metadata updates whose
// outcome cannot be known.
//
// Who touches what: writerState belongs to the writer goroutine alone, and
// so does Log.stall (only the writer stores it). The spare file belongs to
// the spare goroutine until it is sent on l.spares; Log.spareErr and the
// backoff state belong to the spare goroutine.

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
	iov      [3][]byte        // writeRange's buffers: span, wrapped span, end mark
	timer    *time.Timer
	nrec     uint64    // mu.records at the last write, for the batch histogram
	spare    spareFile // a spare received while stalled (name "" if none)
	ownSeq   int       // numbers the spares the writer makes itself
}

// stallState is a roll the writer could not make: the records from at on
// wait for a segment file.
type stallState struct {
	at    Pos
	err   error // wraps the *spareError
	since time.Time
}

// Backoff of the spare goroutine's retries after a failed spare.
const (
	spareRetryMin = 10 * time.Millisecond
	spareRetryMax = 2 * time.Second
)

// nextBackoff doubles d within [spareRetryMin, spareRetryMax].
func nextBackoff(d time.Duration) time.Duration {
	return min(max(2*d, spareRetryMin), spareRetryMax)
}

// spareFile is a preallocated, synced, closed spare segment file.
type spareFile struct {
	name     string
	recycled bool // a former segment's file: stale bytes inside
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
		// While stalled, a spare the spare goroutine delivers ends the stall.
		var sparesC chan spareFile
		if l.stall.Load() != nil && l.w.spare.name == "" {
			sparesC = l.spares
		}
		select {
		case <-l.kick:
		case <-timerC:
			timerC, timed = nil, true
		case sp := <-sparesC:
			l.w.spare = sp
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
		if op, err := l.writeRange(written, end, final); err != nil {
			if err != errStalled {
				l.setFailed(op, err)
			}
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
		if l.opts.Sync != SyncAlways || l.writtenWaiters.Load() > 0 {
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

// errStalled is writeRange's report that a new segment has no file yet
// (the writer is stalled, see Log.stall); not a failure.
var errStalled = errors.New("wal: stalled on a segment roll")

// writeRange writes the ring bytes of [from, to) to their segment files.
// On failure it returns the failed operation's name and the error.
func (l *Log) writeRange(from, to Pos, final bool) (string, error) {
	sl := l.segs.Load() // loaded after the end snapshot: has every segment below to
	for p := from; p < to; {
		s := sl.find(p)
		if s == nil {
			return "write", fmt.Errorf("wal: internal error: no segment holds pos %d", p)
		}
		if s.file.Load() == nil {
			if op, err := l.openNewSegment(s, final); err != nil {
				return op, err
			}
		}
		segEnd := min(to, s.endPos(to))
		f := s.file.Load().f // no ref needed: a segment with unwritten data cannot be removed
		off := int64(p - s.start)
		// One call for the span (two pieces if it wraps around the ring)
		// and, in a recycled file, the end mark after it: a recycled file
		// holds an older segment's bytes after the data, so the data is
		// ended with a zero header for recovery to see a clean end (the
		// next write overwrites it).
		a, b := l.ring.spans(p, int(segEnd-p))
		bufs := append(l.w.iov[:0], a)
		if b != nil {
			bufs = append(bufs, b)
		}
		if segEnd == to && s.recycled.Load() {
			if end := off + int64(segEnd-p); end+headerSize <= s.capacity {
				bufs = append(bufs, l.w.endMark[:])
			}
		}
		calls, err := writeVecAt(f, bufs, off)
		l.stats.writeCalls.Add(uint64(calls))
		if err != nil {
			return "write", err
		}
		l.w.wseg = s
		p = segEnd
	}
	return "", nil
}

// openNewSegment gives the new segment s its file: it first fsyncs the
// segment written before it (invariant 6), then renames a spare into place
// and fsyncs the directory. Without a spare it stalls: errStalled.
func (l *Log) openNewSegment(s *segment, final bool) (string, error) {
	// (Skipped when everything before s is synced already: a retry after a
	// stall, or a roll right at the end Open found.)
	if prev := l.w.wseg; prev != nil && prev != s && l.synced.Load() < uint64(s.start) {
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
	sp, err := l.getSpare(final)
	if err != nil {
		l.enterStall(s.start, err)
		return "spare", errStalled
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
	l.leaveStall()
	return "", nil
}

// getSpare returns a spare for a roll: one received while stalled, else the
// spare goroutine's (waiting for its attempt in progress unless it is
// failing), else one the writer makes itself. While stalled it makes none
// itself except for the final flush: the spare goroutine's backoff paces
// the retries. The error is a *spareError.
func (l *Log) getSpare(final bool) (spareFile, error) {
	if sp := l.w.spare; sp.name != "" {
		l.w.spare = spareFile{}
		return sp, nil
	}
	select {
	case sp := <-l.spares:
		return sp, nil
	default:
	}
	st := l.stall.Load()
	if st != nil && !final {
		return spareFile{}, st.err
	}
	if st == nil && l.spareErr.Load() == nil {
		// The spare goroutine stops only after the writer, so one of the
		// two comes: its spare, or the note of its failed attempt.
		select {
		case sp := <-l.spares:
			return sp, nil
		case <-l.spareNote:
		}
	}
	if name := l.takeRecycled(); name != "" {
		return spareFile{name: name, recycled: true}, nil
	}
	l.w.ownSeq++
	name := filepath.Join(l.dir, fmt.Sprintf("w%d%s", l.w.ownSeq, spareSuffix))
	if err := l.makeSpare(name); err != nil {
		l.stats.spareFailures.Add(1)
		return spareFile{}, &spareError{cause: err}
	}
	return spareFile{name: name}, nil
}

// enterStall records that the records from at wait for a segment file and
// wakes everyone who waits for them (they get the retryable error).
func (l *Log) enterStall(at Pos, err error) {
	if prev := l.stall.Load(); prev != nil && prev.at == at && prev.err == err {
		return // a kick while stalled: nothing new
	}
	var se *spareError
	if !errors.As(err, &se) {
		se = &spareError{cause: err}
	}
	st := &stallState{at: at, since: time.Now(),
		err: fmt.Errorf("wal: records from pos %d wait for a new segment file: %w", at, se)}
	if prev := l.stall.Swap(st); prev == nil {
		l.stats.rollStalls.Add(1)
		l.log.Error("wal cannot start a new segment; appends after it wait until a segment file can be made",
			"pos", uint64(at), "err", se.cause)
	} else {
		st.since = prev.since
	}
	l.mu.Lock()
	//lint:ignore SA2001 an empty section orders the stall before the broadcast
	l.mu.Unlock()
	l.spaceCond.Broadcast()
	l.wakeWaiters()
}

// leaveStall ends a stall after its segment got a file.
func (l *Log) leaveStall() {
	if st := l.stall.Swap(nil); st != nil {
		l.log.Info("wal segment file made after a stall; appends continue",
			"pos", uint64(st.at), "stalled", time.Since(st.since))
	}
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
		l.stats.stickyFailures.Add(1)
		l.log.Error("wal write path failed; the log must be reopened",
			"op", op, "err", err, "written", l.WrittenEnd(), "synced", l.SyncedEnd(), "end", l.End())
	}
	l.mu.Lock()
	//lint:ignore SA2001 an empty section orders the failure before the broadcast
	l.mu.Unlock()
	l.spaceCond.Broadcast()
	l.wakeWaiters()
}

// spareLoop keeps one spare segment file ready on l.spares until Close. A
// failed attempt is retried after a bounded backoff, forever: it is
// published in l.spareErr, noted on l.spareNote for a writer waiting at a
// roll, and logged once per failure streak.
func (l *Log) spareLoop() {
	defer close(l.spareDone)
	var (
		delay    time.Duration // backoff before the next attempt; 0 when healthy
		attempts int           // failed attempts in this streak
		since    time.Time     // start of this streak
	)
	for i := 0; ; i++ {
		sp := spareFile{name: l.takeRecycled(), recycled: true}
		if sp.name == "" {
			sp = spareFile{name: filepath.Join(l.dir, fmt.Sprintf("%d%s", i, spareSuffix))}
			if err := l.makeSpare(sp.name); err != nil {
				l.stats.spareFailures.Add(1)
				if attempts == 0 {
					since = time.Now()
					l.log.Error("wal cannot prepare a spare segment file; retrying with backoff",
						"file", filepath.Base(sp.name), "bytes", l.opts.SegmentBytes, "err", err)
				}
				attempts++
				l.spareErr.Store(&spareError{cause: err})
				select {
				case l.spareNote <- struct{}{}:
				default:
				}
				delay = nextBackoff(delay)
				select {
				case <-l.opts.after(delay):
					continue
				case <-l.spareStop:
					return
				}
			}
		}
		if attempts > 0 {
			l.spareErr.Store(nil)
			select {
			case <-l.spareNote: // a stale note would make a writer try itself
			default:
			}
			l.log.Info("wal spare segment file prepared again", "failed_attempts", attempts,
				"after", time.Since(since))
			delay, attempts = 0, 0
		}
		select {
		case l.spares <- sp:
		case <-l.spareStop:
			_ = l.fs.Remove(sp.name) // best effort; Open deletes leftovers
			return
		}
	}
}

// makeSpare creates, preallocates and syncs a spare file; the size metadata
// is then durable, so the writer's fdatasyncs into it stay data-only.
func (l *Log) makeSpare(name string) error {
	f, err := l.fs.OpenFile(name, osCreateRW, filePerm)
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
