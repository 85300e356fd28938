package cluster

// Read leases: a leader answers most receives without a round of
// heartbeats.
//
// confirm.go makes a leader confirm its lead before it answers a receive
// from its state, with a round of Raft's ReadIndex: four frames and a
// round trip per receive at batch 1 (docs/cluster-benchmarks.md, "What
// confirming the lead costs"). A round that a majority acknowledged proves
// more than that this member led when it began: every member that
// acknowledged it promises to help nobody else lead for a while, so the
// round lets the leader answer at once for a while after it.
//
// The promise (a member's quiet): for quietFor (Config.ReadLeaseTicks
// ticks of time) after the loop last stepped a leader's message (an
// append, a heartbeat, a snapshot, a transfer's MsgTimeoutNow), and after
// its shard started, a member withholds its vote and pre-vote from every
// candidate (a vote request arriving then is stepped once the quiet ends)
// and calls no fast election (failover.go). etcd raft's own CheckQuorum
// lease ignores votes while a follower knows its leader, but not after
// peerDown made the member forget it (ForgetLeader: the fast failover),
// nor after a restart; the quiet holds there too. It costs the fast
// failover quietFor: a survivor campaigns once its quiet ends.
//
// The lease: a round begun at time t, acknowledged by a majority in term
// T, lets this member answer ConfirmLead(T) at once until t + leaseFor,
// leaseFor = quietFor × 2/3. A lease-answered receive that finds the lease
// past half its life asks for a round, so that a steady flow of receives
// keeps it fresh at about two rounds per leaseFor.
//
// Invariants:
//  1. No other member leads before t + quietFor: each member of the
//     acknowledging majority stepped the round's heartbeat after t and so
//     is quiet until after t + quietFor; an election needs a vote (or a
//     campaign) from one of them. This leader itself votes for nobody
//     while it leads (CheckQuorum), and its step-down ends the lease (3).
//  2. A transfer's campaign ignores every promise (MsgTimeoutNow forces
//     the votes): the lease ends before the leader's MsgTimeoutNow leaves
//     (handleReady), and no round of that term grants a lease again.
//  3. A step-down ends the lease (failConfirms) in the loop's Ready that
//     reports it, before any vote of this member leaves (a vote leaves
//     with the append worker's responses, after that Ready).
//  4. Both sides measure the monotonic clock, never ticks: a leader
//     whose loop or ticks stall does not lengthen its lease, and a
//     follower whose ticks stall only lengthens its quiet. The third
//     between leaseFor and quietFor covers clock rates (NTP slews by at
//     most 0.05 %).
//
// Owner: the loop owns heardLead and deferred; the lease is part of the
// confirmation state, guarded by confirmMu (confirm.go).

import (
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// DefaultReadLeaseTicks is Config.ReadLeaseTicks' default: 3 ticks
// (150 ms at the default tick) of quiet, and leases of 100 ms.
const DefaultReadLeaseTicks = 3

// leaseEpoch is the origin of mono.
var leaseEpoch = time.Now()

// mono is the monotonic clock in ns (invariant 4).
func mono() int64 { return int64(time.Since(leaseEpoch)) }

// quietFor is how long a member keeps its promise (0: no leases).
func (s *shard) quietFor() int64 {
	if s.n.cfg.ReadLeaseTicks <= 0 {
		return 0
	}
	return int64(s.n.cfg.ReadLeaseTicks) * int64(s.n.cfg.Tick)
}

// leaseFor is how long after a round began its lease lasts.
func (s *shard) leaseFor() int64 { return s.quietFor() * 2 / 3 }

// quiet (the loop) reports whether this member still keeps its promise.
func (s *shard) quiet() bool {
	q := s.quietFor()
	return q > 0 && mono() < s.heardLead+q
}

// noteLeaderMessage (the loop, before the message is stepped) starts the
// quiet again when m is a leader's.
func (s *shard) noteLeaderMessage(m *pb.Message) {
	switch m.GetType() {
	case pb.MsgApp, pb.MsgHeartbeat, pb.MsgSnap, pb.MsgTimeoutNow:
		s.heardLead = mono()
	}
}

// campaignTransfer is etcd raft's context of a transfer's votes.
const campaignTransfer = "CampaignTransfer"

// deferVote (the loop) holds a vote request that comes while this member
// is quiet; afterQuiet steps it once the quiet ends. One per sender: a
// later request replaces an earlier one.
func (s *shard) deferVote(m *pb.Message) bool {
	t := m.GetType()
	if (t != pb.MsgPreVote && t != pb.MsgVote) || m.GetFrom() == s.n.cfg.NodeID || string(m.GetContext()) == campaignTransfer || !s.quiet() {
		return false
	}
	s.votesDeferred.Add(1)
	if len(s.deferred) == 0 {
		s.wakeAfterQuiet()
	}
	for i, o := range s.deferred {
		if o.GetFrom() == m.GetFrom() {
			s.deferred[i] = m
			return true
		}
	}
	s.deferred = append(s.deferred, m)
	return true
}

// afterQuiet (the loop, at every pass) steps the held vote requests and
// makes the fast election's owed campaign (failover.go) once the quiet
// has ended.
func (s *shard) afterQuiet() {
	if (len(s.deferred) == 0 && !s.fast.owed) || s.quiet() {
		return
	}
	if s.fast.owed {
		s.fast.owed = false
		if s.fast.armed && s.rn.BasicStatus().Lead == raft.None {
			s.campaignFast()
		}
	}
	held := s.deferred
	s.deferred = nil
	for _, m := range held {
		s.step(m)
	}
}

// wakeAfterQuiet (the loop) wakes the loop when the quiet ends.
func (s *shard) wakeAfterQuiet() {
	if d := s.heardLead + s.quietFor() - mono(); d > 0 {
		time.AfterFunc(time.Duration(d), s.wakeLoop)
	}
}

// leaseAnswerLocked (ConfirmLead, confirmMu held) answers from the lease: true
// if this member holds a lease of term now. wake: the caller must wake the
// loop to refresh it.
func (s *shard) leaseAnswerLocked(term uint64) (ok, wake bool) {
	c := &s.conf
	if term == 0 || c.leaseTerm != term {
		return false, false
	}
	left := c.leaseUntil - mono()
	if left <= 0 {
		return false, false
	}
	if !c.refresh && left < s.leaseFor()/2 {
		c.refresh = true
		wake = true
	}
	return true, wake
}

// extendLeaseLocked (the loop, confirmMu held) extends the lease with a
// round begun at `at` that a majority acknowledged in the term the loop
// leads.
func (s *shard) extendLeaseLocked(at int64) {
	c := &s.conf
	if s.leaseFor() <= 0 || s.leaderOf == 0 || s.leaderOf == c.noLease {
		return
	}
	until := at + s.leaseFor()
	if c.leaseTerm != s.leaderOf {
		c.leaseTerm, c.leaseUntil = s.leaderOf, until
	} else if until > c.leaseUntil {
		c.leaseUntil = until
	}
}

// endLease (the loop) ends the lease of the term this member leads for
// good: a transfer is under way (invariant 2).
func (s *shard) endLease() {
	s.confirmMu.Lock()
	s.conf.leaseTerm, s.conf.leaseUntil = 0, 0
	s.conf.noLease = s.leaderOf
	s.confirmMu.Unlock()
}
