package server

// Restart in place of a single node's broker whose storage failed.
//
// A failed write or fsync of the log is sticky (engine.Broker.NeedsReopen):
// after a failed fsync the kernel may have dropped the dirty pages it could
// not write and report the next fsync as a success, so retrying the write
// could acknowledge data that is not on disk. What is safe is what a
// process restart does: close the broker and open its directory again,
// which recovers what is on disk. smqd used to answer every change 500
// until an operator restarted it; with Options.Reopen the server does that
// restart itself, for the broker alone, and tries again with backoff while
// the disk refuses (opening fails, or the new broker fails soon again).
// Before it closes the failed broker it has the log write again what was
// written since its last good fsync (engine.Broker.Resync): after a failed
// writeback Linux may mark those pages clean, so the reopen would read
// records the disk lacks, and a later power loss would leave a hole in the
// log before the records acknowledged after the reopen.
//
// Invariants:
//  1. One goroutine (keepStorage) owns the restart: after New it is the
//     only writer of Server.bp, and Shutdown waits for it to end, so the
//     broker Broker returns after Shutdown is the one left to close.
//  2. From the failed broker's Close until the new one is stored, bp is
//     nil: every request is answered 503 ServiceUnavailable
//     (errReopening), and /healthz says why. A request that loaded the old
//     broker just before is answered as after any failure (500, or 503
//     for a closed broker).
//  3. Nothing acknowledged is lost: a change is acknowledged only once it
//     is durable (engine), Close after a failure writes no checkpoint, and
//     the broker is closed and reopened only once Resync succeeded, so the
//     reopen recovers exactly what the disk holds. While Resync fails (the
//     disk still refuses writes) the failed broker stays in place: changes
//     are answered 500, reads work.
//
// Owner: keepStorage.

import (
	"time"

	"github.com/smqd/smqd/engine"
)

const (
	storageCheckEvery = 250 * time.Millisecond // how often keepStorage looks at the broker
	reopenMax         = time.Minute            // the longest wait between two reopens
)

var errReopening = newAPIError(codeServiceUnavailable, "the broker's storage failed and is being reopened; retry")

// broker returns the single node's broker, nil while it is reopened.
func (s *Server) broker() *engine.Broker { return s.bp.Load() }

// Broker returns the broker the server serves now: the one given to New,
// or the one Options.Reopen opened after a storage failure; nil with a
// cluster, or while a reopen fails. The caller closes it after Shutdown.
func (s *Server) Broker() *engine.Broker { return s.broker() }

// Reopens returns how many times the broker was reopened after a storage
// failure.
func (s *Server) Reopens() int64 { return s.reopens.Load() }

// startKeeper starts keepStorage if there is a broker to keep.
func (s *Server) startKeeper() {
	if s.opts.Reopen == nil || s.c != nil {
		return
	}
	s.keeperDone = make(chan struct{})
	go s.keepStorage()
}

// keepStorage watches the broker and reopens it after a storage failure
// (invariants 1-3).
func (s *Server) keepStorage() {
	defer close(s.keeperDone)
	tick := time.NewTicker(storageCheckEvery)
	defer tick.Stop()
	delay := s.opts.ReopenBackoff
	var reopenedAt time.Time
	for {
		select {
		case <-s.base.Done():
			return
		case <-tick.C:
		}
		b := s.bp.Load()
		cause := b.NeedsReopen()
		if cause == nil {
			continue
		}
		// A broker that fails again soon after a reopen (the disk still
		// refuses writes; opening only reads) goes on with the backoff.
		if reopenedAt.IsZero() || time.Since(reopenedAt) > 2*reopenMax {
			delay = s.opts.ReopenBackoff
		} else {
			delay = min(2*delay, reopenMax)
		}
		s.log.Error("the broker's storage failed: it will be closed and opened again", "err", cause, "in", delay)
		for {
			if !s.pause(delay) {
				return
			}
			err := b.Resync()
			if err == nil {
				break
			}
			delay = min(2*delay, reopenMax)
			s.log.Error("the disk still refuses the log's writes; the broker stays as it is", "err", err, "retry_in", delay)
		}
		s.bp.Store(nil)
		if err := b.Close(); err != nil {
			s.log.Warn("closing the failed broker", "err", err)
		}
		for {
			nb, err := s.opts.Reopen()
			if err == nil {
				s.bp.Store(nb)
				s.reopens.Add(1)
				reopenedAt = time.Now()
				s.log.Warn("the broker was reopened after its storage failed; it takes changes again", "after", delay)
				break
			}
			delay = min(2*delay, reopenMax)
			s.log.Error("reopening the broker failed; trying again", "err", err, "in", delay)
			if !s.pause(delay) {
				return
			}
		}
	}
}

// pause waits d; false if the server shut down first.
func (s *Server) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.base.Done():
		return false
	case <-t.C:
		return true
	}
}
