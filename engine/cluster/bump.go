package cluster

// Commit bumps a follower learns of later, and heartbeats a busy
// follower does not need.
//
// etcd raft's leader answers every advance of its commit index with an
// append to each follower (bcastAppend): with new entries if it has any,
// else an empty one whose only news is the commit index. A follower steps
// that empty append, takes a Ready to apply what it made committed, and
// answers it, so at batch 1 each round of replication costs two more
// frames per follower and a pass of its loop and its append worker. The
// follower learns the same index with the shard's next append (the next
// round, milliseconds later under load) or its next heartbeat (every
// tick), and nothing waits on a follower's apply: receives and sends are
// answered by the leader, and a read barrier's heartbeats carry the commit
// index themselves (read.go).
//
// So the loop drops an empty append to a follower when it is a pure commit
// bump: the follower is in StateReplicate, its flow not paused, and it
// acknowledged every entry sent to it (Match+1 = Next). Anything else an
// empty append does is kept:
//
// Invariants:
//  1. A probe is never dropped: in StateProbe or StateSnapshot the empty
//     append asks where the follower's log ends.
//  2. A throttled follower's empty append is never dropped: with its
//     inflights full (MsgAppFlowPaused) it is what frees them if entries
//     sent were lost.
//  3. An empty append to a follower with entries unacknowledged is never
//     dropped: if those entries were lost, that append is what the
//     follower rejects, and the rejection starts the probe that resends
//     them (with it dropped, an idle shard would leave the follower
//     behind until its inflights filled).
//  4. Dropping is what a lossy link may do anyway: Raft's safety does not
//     depend on any message arriving.
//
// Heartbeats. etcd raft's leader sends every follower a heartbeat each
// tick, appends or not. Under load the appends already do what a
// heartbeat does: the follower steps a message of its leader (its
// election timer and its read-lease promise start again, lease.go), and
// the leader hears back from it (CheckQuorum). So the loop drops a tick's
// heartbeat to a follower in StateReplicate, not throttled, that it sent
// an append within the last tick (invariants 1 and 2 hold for heartbeats
// too: a heartbeat's answer is how a probed or throttled follower is sent
// its next append). Entries in flight do not keep it: were they lost, the
// next append shows the gap (the follower rejects it), and on a shard
// gone idle so does the heartbeat of invariant 6, whose answer is
// followed by an append.
//  5. A heartbeat carrying a read's context (a confirmation round,
//     confirm.go; a read barrier, read.go) is never dropped: it is the
//     round.
//  6. A follower goes at most two ticks without a leader's message while
//     this member leads: a tick with no append sends the heartbeat. Its
//     commit index then trails by at most that much on an idle shard.
//  7. A heartbeat to a follower this member has not heard from within the
//     tick is never dropped. A follower answers an append only once it is
//     durable, a heartbeat at once: while a follower's flushes are slow (a
//     busy disk), its heartbeat answers are what CheckQuorum can count.
//
// Owner: the shard's loop (handleReady), and appSent.

import (
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// pureBump (the loop) reports whether m, an append to another member, is
// a pure commit bump (the invariants above).
func (s *shard) pureBump(m *pb.Message) bool {
	if m.GetType() != pb.MsgApp || len(m.Entries) != 0 || s.leaderOf == 0 {
		return false
	}
	flowing, acked := s.flowing(m.GetTo())
	pure := flowing && acked
	if pure {
		s.bumpsDropped.Add(1)
	}
	return pure
}

// flowing (the loop) reports whether follower to is replicating and not
// throttled, and whether it acknowledged every entry sent to it.
func (s *shard) flowing(to uint64) (flowing, acked bool) {
	s.rn.WithProgress(func(id uint64, typ raft.ProgressType, pr tracker.Progress) {
		if id == to && typ == raft.ProgressTypePeer {
			flowing = pr.State == tracker.StateReplicate && !pr.MsgAppFlowPaused
			acked = pr.Match+1 == pr.Next
		}
	})
	return flowing, acked
}

// needlessBeat (the loop) reports whether m, a message to another member,
// is a heartbeat that follower does not need (invariants 5 to 7), and
// notes the appends that leave.
func (s *shard) needlessBeat(m *pb.Message, now time.Time) bool {
	switch m.GetType() {
	case pb.MsgApp:
		if s.appSent == nil {
			s.appSent = map[uint64]time.Time{}
		}
		s.appSent[m.GetTo()] = now
		return false
	case pb.MsgHeartbeat:
		if s.leaderOf == 0 || len(m.Context) > 0 {
			return false
		}
		to := m.GetTo()
		sent, ok := s.appSent[to]
		if !ok || now.Sub(sent) >= s.n.cfg.Tick {
			return false
		}
		if heard, ok := s.heard[to]; !ok || now.Sub(heard) >= s.n.cfg.Tick {
			return false // invariant 7
		}
		if flowing, _ := s.flowing(to); !flowing {
			return false
		}
		s.beatsDropped.Add(1)
		return true
	}
	return false
}

// malformedBeat (the loop) reports whether m is a heartbeat or a
// heartbeat's answer whose context etcd raft cannot read, and logs it: the
// caller drops it. etcd raft's heartbeat contexts are empty or 8 bytes
// (its read position), and a leader reads 8 bytes from every answer's; a
// follower echoes a heartbeat's context, so one malformed heartbeat panics
// the leader that gets the echo. A node-state frame (handoff.go) is a
// heartbeat with a 2-byte context that is no shard's; one reached a shard
// once in `make test` (2026-12-05), and the leader panicked. Its route was
// a test's (TestPeerDownStepsWhatThePeerSentFirst put the last message it
// held back into a shard's inbox, and that was once a node-state frame);
// the transport routes node-state frames away from the shards. Whatever
// the route, such a message stops here.
func (s *shard) malformedBeat(m *pb.Message) bool {
	if t := m.GetType(); t != pb.MsgHeartbeat && t != pb.MsgHeartbeatResp {
		return false
	}
	if c := len(m.GetContext()); c != 0 && c != 8 {
		s.log.Warn("a heartbeat with a malformed context dropped", "from", m.GetFrom(), "type", m.GetType().String(), "context_bytes", c)
		return true
	}
	return false
}

// noteSilence (the loop, leading) ends a silence of the followers at now.
func (s *shard) noteSilence(now time.Time) {
	gap := now.Sub(s.quietSince)
	s.quietSince = now
	if gap > time.Duration(s.n.cfg.ElectionTicks)*s.n.cfg.Tick/2 {
		s.silences.Add(1)
	}
	if int64(gap) > s.silenceMax.Load() {
		s.silenceMax.Store(int64(gap))
	}
}
