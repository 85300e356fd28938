package cluster

// Commit bumps a follower learns of later.
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
// Owner: the shard's loop (handleReady).

import (
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
	to, pure := m.GetTo(), false
	s.rn.WithProgress(func(id uint64, typ raft.ProgressType, pr tracker.Progress) {
		if id == to && typ == raft.ProgressTypePeer {
			pure = pr.State == tracker.StateReplicate && !pr.MsgAppFlowPaused && pr.Match+1 == pr.Next
		}
	})
	if pure {
		s.bumpsDropped.Add(1)
	}
	return pure
}
