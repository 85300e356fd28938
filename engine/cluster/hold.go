package cluster

// Holding a leader's proposals for company (engine/replica_hold.go says
// why): a proposal that nobody waits for (a receive's records, an expiry)
// waits up to Config.ProposalHold in the shard's queue, and goes to Raft
// with the next proposal somebody waits for, so that both take one round
// of appends, flushes and messages instead of two.
//
// Invariants:
//  1. The loop takes the queued proposals all at once, in the order they
//     were queued, or none: a held proposal never lets a later one pass.
//  2. It takes them at once when the hold is off, when an operation waits
//     for one of them (Urge), when the oldest has waited ProposalHold (the
//     hold's timer wakes the loop then), when this member does not lead
//     (the loop drops them), and while it hands the lead over (transfer.go:
//     the hand-over waits for every proposal to commit).
//  3. Propose wakes the loop only when the hold is off; a held proposal is
//     woken for by Urge or by the timer, which is armed once per hold (when
//     the queue goes from empty to not empty).
//
// Owner: holding is guarded by the shard's pmu, as the queue it describes.

import "time"

// DefaultProposalHold is Config.ProposalHold's default.
const DefaultProposalHold = 5 * time.Millisecond

// holding is the state of the proposals held in a shard's queue.
type holding struct {
	since  time.Time   // when the oldest queued proposal was queued
	urgent bool        // an operation waits for a queued proposal (Urge)
	timer  *time.Timer // wakes the loop when the oldest has waited the hold
}

// hold is the shard's proposal hold; 0 when off.
func (s *shard) hold() time.Duration {
	if d := s.n.cfg.ProposalHold; d > 0 {
		return d
	}
	return 0
}

// holdLocked notes a proposal just queued (Propose, pmu held) and reports
// whether the loop must be woken now (invariant 3).
func (s *shard) holdLocked() bool {
	d := s.hold()
	if d == 0 {
		return true
	}
	if len(s.props) == 1 {
		s.held.since = time.Now()
		if s.held.timer == nil {
			s.held.timer = time.AfterFunc(d, s.wakeLoop)
		} else {
			s.held.timer.Reset(d)
		}
	}
	return false
}

// Urge implements engine.ReplicaUrger: an operation waits for a proposal,
// so the queued ones go to Raft now.
func (s *shard) Urge() {
	s.pmu.Lock()
	urge := len(s.props) > 0 && !s.held.urgent
	if urge {
		s.held.urgent = true
	}
	s.pmu.Unlock()
	if urge {
		s.wakeLoop()
	}
}

// releaseLocked (the loop, pmu held) reports whether the loop takes the
// queued proposals now (invariant 2), and if so resets the hold.
func (s *shard) releaseLocked() bool {
	if len(s.props) == 0 {
		return false
	}
	d := s.hold()
	if d > 0 && !s.held.urgent && s.leaderOf != 0 && s.handing == nil && time.Since(s.held.since) < d {
		return false
	}
	s.held.urgent = false
	if s.held.timer != nil {
		s.held.timer.Stop()
	}
	return true
}
