package cluster

// A planned leader change costs clients nothing.
//
// The lead of a shard moves on purpose in three cases: the balancer hands
// it to the shard's preferred leader (balance.go), a node with a full disk
// hands it to a member with room (handoff.go), and a node that is shutting
// down hands every lead it holds to the others (HandOverLeads). Raft's
// leadership transfer alone made each of these cost requests: the leader
// kept taking operations, held their proposals while the transfer ran
// (Raft drops them), and failed them when the lead went, so their clients
// got 503s and the old leader rebuilt its broker from the log.
//
// Invariants:
//  1. From the moment the loop decides to hand the lead over, the shard's
//     broker takes no new operation: each is refused before it changes
//     anything (engine.ErrRetryOnLeader), and the API server runs it again
//     on the shard's next leader (server/cluster.go).
//  2. Raft's transfer starts only once every proposal the broker made has
//     committed (engine.Broker.Settled), or after settleMax: nothing is
//     held and failed at the step-down, so the old leader keeps its broker
//     (no rebuild) and no client is told that a committed change failed.
//     Every other operation is admitted before it changes anything, and
//     Settled counts the admitted ones still running (engine/replica.go,
//     invariant 10); a send that passed its first check just before the
//     yield is refused at its append. A retention expiry that the
//     yielding broker's timers make is not proposed at all: it is made in
//     the live state as a follower makes it, and the next leader logs it
//     (engine/replica_expiry.go), so a queue whose messages keep ageing
//     out no longer keeps the broker from settling. Not covered: an
//     operation still running after settleMax; its proposal is held and
//     failed as before (its client gets a 503, and the old leader
//     rebuilds its broker).
//  3. A transfer that does not happen (its target did not win within an
//     election timeout, or went away) ends the yield: the leader takes
//     operations again.
//
// Owner: the shard's loop (run) owns handing and calls stepTransfer after
// every round.

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
)

// settleMax bounds how long a hand-over waits for the broker's proposals
// to commit before it starts Raft's transfer anyway (a follower too slow
// to acknowledge them would otherwise keep the lead here for good).
const settleMax = time.Second

// handing is a hand-over under way (the loop's).
type handing struct {
	to      uint64
	since   time.Time // when the broker stopped taking operations
	started bool      // Raft's transfer was started
}

// handLeadTo starts handing the lead to member to (the loop, on the
// leader): the broker stops taking operations now, and stepTransfer
// starts Raft's transfer once its proposals have committed.
func (s *shard) handLeadTo(to uint64) {
	if s.handing != nil || to == 0 || to == s.n.cfg.NodeID {
		return
	}
	b := s.broker()
	if b == nil || s.rn.BasicStatus().RaftState != raft.StateLeader {
		return
	}
	if err := b.Yield(true); err != nil {
		s.log.Warn("hand-over: the broker does not yield", "err", err)
		return
	}
	s.handing = &handing{to: to, since: time.Now()}
	s.stepTransfer()
}

// stepTransfer moves a hand-over on (the loop, after every round).
func (s *shard) stepTransfer() {
	h := s.handing
	if h == nil {
		return
	}
	st := s.rn.BasicStatus()
	b := s.broker()
	switch {
	case st.RaftState != raft.StateLeader || b == nil:
		// The lead went (to the target or elsewhere): SetLeader ended the
		// yield with the step-down.
		s.handing = nil
	case !h.started:
		if !b.Settled() && time.Since(h.since) < settleMax {
			return
		}
		h.started = true
		s.rn.TransferLeader(h.to)
	case st.LeadTransferee == raft.None:
		// Raft gave the transfer up (an election timeout without the
		// target winning): lead on.
		s.log.Info("hand-over did not happen; leading on", "to", h.to)
		b.Yield(false)
		s.handing = nil
	}
}

// HandOverLeads hands every shard this node leads to another member and
// waits until it leads none and knows each one's new leader, or ctx ends
// (the error then says how many it still leads). From then on this node
// asks the others not to hand it any lead (a node-state frame, as a full
// disk does), and its own balancer hands over any lead it wins again. Requests keep working throughout:
// those this node receives are forwarded to the new leaders.
//
// For a clean shutdown (smqd calls it on SIGTERM before it stops serving):
// the other members need no election timeout to notice the leaders gone,
// and no client sees a failed request.
func (n *Node) HandOverLeads(ctx context.Context) error {
	if !n.leaving.Swap(true) {
		n.log.Info("handing over every shard this node leads (shutting down)")
		n.sendState()
	}
	return n.handOverAll(ctx)
}

// givingLeadsAway reports whether this node hands over every lead it has
// and wants none: it shuts down (leaving, set for good), or it waits to be
// replaced (rejoinLeaving, rejoin.go). Two flags, so that the end of the
// wait never clears a shutdown's (review, 2026-12-06).
func (n *Node) givingLeadsAway() bool {
	return n.leaving.Load() || n.rejoinLeaving.Load() || n.voteHeld.Load()
}

// handOverAll is HandOverLeads' wait, once givingLeadsAway holds.
func (n *Node) handOverAll(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	// A shard this node led is handed over once this node knows its new
	// leader: until then a request forwarded here for it finds no leader
	// to go to (the step-down leaves the lead unknown until the winner's
	// first message), and a node that has begun to shut down answers it
	// not-run at once (server/cluster.go). It waits for that at most an
	// election timeout after its last lead went: a leader that lost its
	// quorum (the others are down) steps down with no successor to learn
	// of.
	was := make([]bool, len(n.shards))
	var noneSince time.Time
	for round := 0; ; round++ {
		led, stuck, unknown := 0, 0, 0
		for i, s := range n.shards {
			lead := s.lead.Load()
			if s.ready.Load() || lead == n.cfg.NodeID {
				was[i] = true
				led++
				if s.noHeir.Load() {
					stuck++
				}
				if round%25 == 0 { // at start, then every half second: a transfer Raft gave up is tried again
					s.do(s.handOverForShutdown)
				}
			} else if was[i] && lead == 0 {
				unknown++
			}
		}
		if led > 0 {
			noneSince = time.Time{} // a lead won again: its step-down starts the wait anew
		} else if noneSince.IsZero() {
			noneSince = time.Now()
		}
		if led == 0 && (unknown == 0 || time.Since(noneSince) > n.cfg.Tick*time.Duration(n.cfg.ElectionTicks)) {
			return nil
		}
		if round > 0 && led > 0 && stuck == led {
			// Every other member is gone or leaving too (the whole
			// cluster stops): nobody to hand to, so no reason to wait.
			return fmt.Errorf("cluster: no member to hand %d shards to (the others are down or shutting down)", led)
		}
		select {
		case <-ctx.Done():
			if led == 0 {
				return fmt.Errorf("cluster: this node does not know the new leader of %d shards: %w", unknown, ctx.Err())
			}
			return fmt.Errorf("cluster: this node still leads %d shards: %w", led, ctx.Err())
		case <-n.stop:
			return ErrClosed
		case <-t.C:
		}
	}
}

// handOverForShutdown (the loop) hands the shard to the first member in
// its order of preference that is active and wanted as a leader.
func (s *shard) handOverForShutdown() {
	if s.handing != nil || s.rn.BasicStatus().RaftState != raft.StateLeader {
		return
	}
	s.noHeir.Store(!s.handOff(s.activeMember, "node shutting down: handing the lead over"))
}

// activeMember reports whether member id sent this member a message within
// two election timeouts (the loop's).
func (s *shard) activeMember(id uint64) bool {
	return time.Since(s.heard[id]) < 2*s.n.cfg.Tick*time.Duration(s.n.cfg.ElectionTicks)
}

// preference returns the shard's voters in its order of preference for the
// lead after its preferred leader.
func (s *shard) preference() []uint64 {
	voters := slices.Clone(s.st.votersNow())
	slices.Sort(voters)
	out := make([]uint64, 0, len(voters))
	for k := range voters {
		out = append(out, voters[(s.id+1+k)%len(voters)])
	}
	return out
}
