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
// Appends renew the lease too. A follower that acknowledges an index L
// whose entry is of this leader's term holds that entry, which only this
// leader sent, and no sooner than the Ready that made it: stepping that
// append started the follower's quiet again. So once a majority (this
// leader counts) acknowledged entries made at or after t, the lease lasts
// until t + leaseFor, as after a round begun at t. Under load the appends
// keep the lease fresh and receives need no round of their own
// (docs/cluster-benchmarks.md, "Frames a busy shard does without").
//  5. A mark (index, time) is taken in the Ready that hands this term's
//     entries to the append worker, before any of them leaves, so the
//     time is no later than any follower's step of them. An
//     acknowledgement counts only in the term the marks were taken in,
//     and only for an index at or above a mark of that term (an entry of
//     an earlier term may have come from an earlier leader). A joint
//     configuration grants no lease from appends.
//
// Owner: the loop owns heardLead, deferred and the append marks; the
// lease is part of the confirmation state, guarded by confirmMu
// (confirm.go).

import (
	"cmp"
	"slices"
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

// appendMark: the entries of this term up to index were made at at
// (mono), in the loop's Ready.
type appendMark struct {
	index uint64
	at    int64
}

// maxAppendMarks bounds the marks kept: an acknowledgement older than
// all of them renews nothing (it only shortens a lease).
const maxAppendMarks = 64

// markAppend (the loop, in the Ready that hands this term's entries up
// to last to the append worker) takes a mark (invariant 5).
func (s *shard) markAppend(last uint64) {
	if s.leaseFor() <= 0 || s.leaderOf == 0 {
		return
	}
	if s.markTerm != s.leaderOf {
		s.marks = s.marks[:0]
		clear(s.ackedAt)
		s.markTerm = s.leaderOf
	}
	if len(s.marks) == maxAppendMarks {
		s.marks = append(s.marks[:0], s.marks[maxAppendMarks/2:]...)
	}
	s.marks = append(s.marks, appendMark{last, mono()})
}

// noteAppendAck (the loop, stepping m) renews the lease with a
// follower's acknowledgement of this term's entries (invariant 5).
func (s *shard) noteAppendAck(m *pb.Message) {
	from := m.GetFrom()
	if m.GetType() != pb.MsgAppResp || m.GetReject() || s.leaderOf == 0 || m.GetTerm() != s.leaderOf ||
		s.markTerm != s.leaderOf || from == s.n.cfg.NodeID {
		return
	}
	at := int64(-1)
	for i := len(s.marks) - 1; i >= 0; i-- {
		if s.marks[i].index <= m.GetIndex() {
			at = s.marks[i].at
			break
		}
	}
	if at < 0 || at <= s.ackedAt[from] {
		return
	}
	if s.ackedAt == nil {
		s.ackedAt = map[uint64]int64{}
	}
	s.ackedAt[from] = at
	var buf [8]uint64
	voters, joint := s.st.leaseVoters(buf[:0])
	if joint {
		return
	}
	// The times at which each other voter held this term's entries,
	// newest first; this leader and the newest need-1 others make a
	// majority.
	var times [8]int64
	others := times[:0]
	self := false
	for _, v := range voters {
		if v == s.n.cfg.NodeID {
			self = true
		} else {
			others = append(others, s.ackedAt[v])
		}
	}
	need := len(voters)/2 + 1 - 1
	if !self || need <= 0 || need > len(others) {
		return
	}
	slices.SortFunc(others, func(a, b int64) int { return cmp.Compare(b, a) })
	if t := others[need-1]; t > 0 {
		s.confirmMu.Lock()
		s.extendLeaseLocked(t)
		s.confirmMu.Unlock()
	}
}
