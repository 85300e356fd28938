package cluster

// A follower whose acknowledgements stopped: the leader probes it again.
//
// etcd raft's leader sends a follower in StateReplicate entries ahead of
// its acknowledgements and moves its Match only on an answer. If the
// answers of entries it sent are lost, the follower's heartbeat answers
// make the leader send an empty append, whose answer carries where the
// follower's log ends; if those are lost too, or not sent, the leader's
// view never moves. The long chaos runs saw that shape a few times
// (docs/chaos.md, "Open findings": a follower holding every entry, its
// append worker idle, its leader with no acknowledgement past one index
// for 90 s and more) without the route being found. etcd raft's remedy for
// messages the transport lost is ReportUnreachable: the follower goes to
// StateProbe, and the next append is sent from its last acknowledged
// index with the entries themselves, whose answer moves Match whatever
// was lost before.
//
// Invariants:
//  1. A follower is probed again only when, while this member leads, it is
//     in StateReplicate, its Match is behind the leader's last index, its
//     Match has not moved for stuckAfter, and it was heard from within
//     that time (a follower cut off is not stuck but away: its connection
//     ending reports it, node.go peerDown). Then once per stuckAfter.
//  2. Raft's safety does not depend on it: ReportUnreachable only changes
//     where the leader sends from next.
//  3. Each episode is logged once at Warn with the leader's view, and
//     counted (Status: reprobes); its end (Match moved) at Info.
//
// Owner: the shard's loop (stuckTick, every tick).

import (
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/tracker"
)

// stuckElections is stuckAfter in election timeouts: 5 s at smqd's
// default tick (50 ms, 10 ticks).
const stuckElections = 10

// stuckWatch is the loop's view of each follower's Match.
type stuckWatch struct {
	seen     map[uint64]stuckSeen
	reprobes atomic.Int64 // Status reads it
}

type stuckSeen struct {
	match   uint64
	since   time.Time
	probed  bool // this episode was logged
	probeAt time.Time
}

// stuckTick (the loop, every tick) probes again the followers whose
// acknowledgements stopped (the invariants above).
func (s *shard) stuckTick() {
	w := &s.watch
	if s.leaderOf == 0 {
		clear(w.seen)
		return
	}
	if w.seen == nil {
		w.seen = map[uint64]stuckSeen{}
	}
	last, _ := s.st.LastIndex()
	now := time.Now()
	after := time.Duration(stuckElections*s.n.cfg.ElectionTicks) * s.n.cfg.Tick
	var probe [8]uint64
	due := probe[:0]
	s.rn.WithProgress(func(id uint64, typ raft.ProgressType, pr tracker.Progress) {
		if typ != raft.ProgressTypePeer || id == s.n.cfg.NodeID {
			return
		}
		v, ok := w.seen[id]
		switch {
		case pr.State != tracker.StateReplicate || pr.Match >= last || !ok || v.match != pr.Match:
			moved := ok && v.match != pr.Match
			if moved && v.probed {
				s.log.Info("a follower probed again acknowledges once more", "member", id, "match", pr.Match)
			}
			// The episode goes on (the probe put the follower in
			// StateProbe) until its Match moves.
			w.seen[id] = stuckSeen{match: pr.Match, since: now, probed: ok && !moved && v.probed, probeAt: v.probeAt}
		case now.Sub(v.since) >= after && now.Sub(v.probeAt) >= after && now.Sub(s.heard[id]) < after:
			if !v.probed {
				s.log.Warn("a follower's acknowledgements stopped: probing it again", "member", id, "match", pr.Match,
					"next", pr.Next, "paused", pr.MsgAppFlowPaused, "last", last, "for", now.Sub(v.since).Round(time.Millisecond))
			}
			v.probed, v.probeAt = true, now
			w.seen[id] = v
			due = append(due, id)
		}
	})
	for _, id := range due {
		w.reprobes.Add(1)
		s.rn.ReportUnreachable(id)
	}
}
