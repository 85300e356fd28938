package cluster

// Fast elections after a leader's connection closes.
//
// A killed leader's connections close at once, and every surviving member
// learns it then (peerDown, node.go): it forgets that leader, and the
// lowest surviving voter campaigns at once. That alone left the shard to
// an election timeout (10-20 ticks, 0.5-1 s at the default 50 ms tick)
// when its one campaign failed (4 to 9 kills of 20 took 0.5-0.9 s in the
// failover measurement; docs/chaos.md):
//
//   - the other survivor steps the campaigner's pre-vote before its own
//     peerDown has run: it still holds the leader's lease and ignores it
//     (seen in the nodes' debug logs of a slow kill);
//   - the campaigner's log is behind the other survivor's, which refuses
//     it, and only its own election timeout makes the other campaign
//     (possible whenever the leader reached one follower first).
//
// So a member that forgot its leader in peerDown stays "leaderless" for up
// to one election timeout, and while no leader is known every surviving
// voter campaigns again in turn: the voter of rank r among the survivors
// (ordered by id, the lowest 0) at the ticks t with
// t mod (fastEvery × k) = fastEvery × r, k survivors; rank 0 also at t = 0
// (peerDown itself). With read leases, t counts from the end of the
// member's quiet (invariant 4).
//
// Invariants:
//  1. Only a member with no known leader that is not leading campaigns
//     here, and only within ElectionTicks ticks of the loss; after that
//     Raft's own randomized election timeout takes over, as before.
//  2. Every campaign is a pre-vote (PreVote is on): it changes no term
//     until a majority would grant it, so a campaign that comes while
//     another member already won disturbs nobody (that leader and its
//     followers ignore it: CheckQuorum's lease).
//  3. Survivors campaign one at a time (fastEvery ticks apart), so that
//     their pre-votes do not split a three-member group's votes.
//  4. No campaign while this member is quiet (lease.go: it promised its
//     leader's read lease to help nobody lead): rank 0's first campaign
//     is made as soon as the quiet ends (the other survivors hold its
//     vote requests until theirs ends), and the turns above count ticks
//     from then, not from the loss.
//
// Owner: the shard's loop (run) owns fast; ticks is atomic for the tests.

import (
	"slices"
	"sync/atomic"

	"go.etcd.io/raft/v3"
)

// testHookPeerDown, when set (tests), runs at the start of every
// peerDown of node, before any shard learns of it; it may block.
var testHookPeerDown atomic.Pointer[func(node, peer uint64)]

// fastEvery is the ticks between two survivors' campaigns (100 ms at the
// default tick: several round trips on a LAN).
const fastEvery = 2

// fastElect is a member's leaderless state after peerDown forgot its
// leader (the loop).
type fastElect struct {
	armed bool
	owed  bool // rank 0's first campaign waits for the quiet to end
	ticks int  // ticks since the loss
	turn  int  // ticks since the quiet ended
	rank  int  // this member among the surviving voters, lowest id 0
	of    int  // surviving voters
}

// leaderLost (the loop) arms the fast election after the connection to
// peer, this member's leader, ended, and campaigns at once if this member
// is the lowest surviving voter.
func (s *shard) leaderLost(peer uint64) {
	var survivors []uint64
	for _, id := range s.st.votersNow() {
		if id != peer {
			survivors = append(survivors, id)
		}
	}
	slices.Sort(survivors)
	rank := slices.Index(survivors, s.n.cfg.NodeID)
	if rank < 0 {
		return // not a voter (a learner, or removed): it campaigns for nothing
	}
	s.fast = fastElect{armed: true, rank: rank, of: len(survivors)}
	if rank == 0 && !s.campaignFast() {
		s.fast.owed = true
		s.wakeAfterQuiet()
	}
}

// fastElectTick (the loop, at every tick) campaigns on this member's turn
// while the shard has no leader, for at most an election timeout.
func (s *shard) fastElectTick() {
	f := &s.fast
	if !f.armed {
		return
	}
	f.ticks++
	st := s.rn.BasicStatus()
	if st.Lead != raft.None || st.RaftState == raft.StateLeader || f.ticks >= s.n.cfg.ElectionTicks {
		f.armed = false // invariant 1
		return
	}
	if f.owed || s.quiet() {
		return // afterQuiet (lease.go) makes rank 0's first campaign
	}
	f.turn++ // the turns count from the quiet's end (invariant 4)
	if f.turn%(fastEvery*f.of) == fastEvery*f.rank {
		s.campaignFast()
	}
}

// campaignFast campaigns unless this member is quiet (invariant 4); false
// if it did not.
func (s *shard) campaignFast() bool {
	if s.quiet() || s.n.voteHeld.Load() { // votehold.go: no vote, not even its own
		return false
	}
	s.fastCampaigns.Add(1)
	if err := s.rn.Campaign(); err != nil {
		s.log.Debug("campaign", "err", err)
	}
	return true
}
