package cluster

// Restart in place of a shard whose log failed. A failed write or fsync
// (a full disk, a failing device) is sticky in the log (wal: "reopen
// required"), and the shard's loop used to stop there for good: its broker
// kept saying it led and took changes, so every request routed to it hung
// with its proposals never settled, and the shard stayed out of the group
// until the process restarted. Now the loop does what a process restart
// would, for this shard alone, and tries again while the disk refuses.
//
// Invariants:
//  1. From the failure until the restart this member takes no part in
//     its group: Route sends no request to its broker (ready is false),
//     every proposal pending in it fails at once (SetLeader), and what
//     peers send it is dropped (Raft sends again). The others elect a
//     leader among themselves; once one sends this member a heartbeat or
//     an append, Route forwards the shard's requests to it.
//  2. The restart opens the broker and the Raft member from the shard's
//     log, as a process start does (shard.start). Nothing acknowledged
//     relies on the failed write: a response leaves only once its write
//     is durable (append.go invariant 1), and a torn record at the log's
//     end is dropped by the log's recovery. The failed broker is closed,
//     and the restart tried, only once what the log wrote since its last
//     good fsync is durable again (Broker.Resync, wal/resync.go).
//  3. Attempts back off from restartFirst to restartMax; the node's stop
//     ends them. Health reports the failure until a restart succeeds.
//
// Owner: the shard's loop (run) does all of it; failure is also read by
// Health and Status.

import (
	"errors"
	"fmt"
	"strings"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

// Backoff of a failed shard's restarts.
const (
	restartFirst = time.Second
	restartMax   = 30 * time.Second
)

// failedShard is the error Health reports for a shard waiting to restart.
type failedShard struct {
	shard int
	err   error
}

func (f *failedShard) Error() string {
	if errors.Is(f.err, errDamagedReplica) {
		// Not restarting: it stays out until the operator acts (review M).
		return fmt.Sprintf("shard %d: out of its group: %v", f.shard, strings.TrimPrefix(f.err.Error(), fmt.Sprintf("shard %d: ", f.shard)))
	}
	return fmt.Sprintf("shard %d: its storage failed, restarting: %v", f.shard, f.err)
}

func (f *failedShard) Unwrap() error { return f.err }

// restartAfterFailure (the loop) takes the shard out of its group, then
// restarts it (invariants 1-3). It returns false if the node stopped
// first.
func (s *shard) restartAfterFailure(cause error, tick, stop <-chan struct{}) bool {
	s.log.Error("shard's storage failed; the shard leaves its group and restarts", "err", cause)
	s.failure.Store(&failedShard{shard: s.id, err: cause})
	s.ready.Store(false)
	s.lead.Store(0)
	s.leaderOf, s.firstOurs, s.lastLead, s.starved, s.balanceOK = 0, 0, 0, false, 0
	if b := s.broker(); b != nil {
		if err := b.SetLeader(false, 0); err != nil {
			s.log.Debug("settling the failed broker's proposals", "err", err)
		}
	}
	s.app.close()
	s.pmu.Lock()
	s.props, s.selfMsgs = nil, nil // the old member's: its append worker's responses too
	s.pmu.Unlock()
	// The failed broker is closed once its log's bytes written since its
	// last good fsync are durable again (engine.Broker.Resync): the restart
	// reads them back, and a later power loss must not find a hole there.
	failed := s.broker()
	if failed != nil {
		if d := failed.Damaged(); d != nil {
			// Written now: a stop before the first restart attempt must not
			// let the next process start serve this copy; and the shard
			// does not start again here (damaged.go).
			s.failure.Store(&failedShard{shard: s.id, err: s.refuseBody(d)}) // Health says what to do at once
		}
		s.retire(failed)
		s.b.Store(nil)
	}
	defer func() {
		if failed != nil {
			failed.CloseForRebuild() // the node stopped first
			if d := failed.Damaged(); d != nil && s.damage == nil {
				s.refuseBody(d) // met since (below)
			}
		}
	}()
	s.installs.Wait() // a snapshot being prepared writes beside the shard's directory
	s.installing = nil
	// A shard that fails again soon after a restart (the disk still
	// refuses writes; opening only reads) goes on with its backoff.
	delay := restartFirst
	if !s.restartedAt.IsZero() && time.Since(s.restartedAt) < 2*restartMax {
		delay = min(2*s.restartDelay, restartMax)
	}
	for {
		wait := time.NewTimer(delay)
	idle:
		for {
			select {
			case <-stop:
				wait.Stop()
				return false
			case m := <-s.inbox: // dropped: invariant 1
				if t := m.GetType(); (t == pb.MsgHeartbeat || t == pb.MsgApp) && m.GetTerm() >= s.term.Load() {
					// Only a leader sends these: requests for the shard
					// are forwarded to it meanwhile, so a client whose one
					// endpoint is this node goes on.
					s.lead.Store(m.GetFrom())
					s.term.Store(m.GetTerm())
				}
			case <-tick:
			case <-wait.C:
				break idle
			}
		}
		if failed != nil {
			if err := failed.Resync(); err != nil {
				delay = min(2*delay, restartMax)
				s.log.Error("the disk still refuses the shard's log; trying again", "err", err, "in", delay)
				continue
			}
			failed.CloseForRebuild()
			if d := failed.Damaged(); d != nil && s.damage == nil {
				// Met by a read still under way on the failed broker
				// since the failure (review M): closed now, nothing more
				// can come.
				s.failure.Store(&failedShard{shard: s.id, err: s.refuseBody(d)})
			}
			failed = nil
		}
		err := s.start(nil)
		if err == nil {
			s.restartedAt, s.restartDelay = time.Now(), delay
			s.restarts.Add(1)
			s.armCatchUp() // healthy once it caught up again (caughtup.go), not at once
			s.failure.Store(nil)
			s.log.Warn("shard restarted after its storage failed", "after", delay)
			return true
		}
		if errors.Is(err, errDamagedReplica) {
			s.failure.Store(&failedShard{shard: s.id, err: err}) // Health says what to do
		}
		delay = min(2*delay, restartMax)
		s.log.Error("shard restart failed; trying again", "err", err, "in", delay)
	}
}
