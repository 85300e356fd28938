package cluster

// The node's view of the cluster, for GET /cluster and the metrics.

import (
	"slices"
	"sort"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/tracker"

	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/wal"
)

// Status is a node's view of the cluster (GET /cluster).
type Status struct {
	NodeID  uint64         `json:"node_id"`
	API     string         `json:"api"`
	Version string         `json:"version,omitempty"` // Config.Version
	Healthy bool           `json:"healthy"`
	Problem string         `json:"problem,omitempty"`
	Members []MemberStatus `json:"members"`
	Shards  []ShardStatus  `json:"shards"`
	// Forwarded: requests this node forwarded to a leader and got answered.
	Forwarded int64 `json:"forwarded"`
	// RefusedHandshakes: connections refused, by this node or by the peer
	// it dialled: a wrong or missing key, a certificate the other refused.
	RefusedHandshakes  int64 `json:"refused_handshakes"`
	SnapshotsInstalled int64 `json:"snapshots_installed"`
	// DeadLetterHops: batches of dead letters this node's leaders handed
	// to another shard's queue and saw stored; DeadLetterHopsFailed: those
	// whose hop gave up (the messages stay hidden and are moved later, or
	// were stored and their answer lost).
	DeadLetterHops       int64 `json:"dead_letter_hops"`
	DeadLetterHopsFailed int64 `json:"dead_letter_hops_failed"`
	// TopicRelayHops and TopicRelayHopsFailed count the same for batches
	// of a topic's deliveries to a queue of another shard (failed: retried
	// 1 s later, doubling to every 16 s, for up to a day);
	// TopicRelayHopsDropped those whose queue was deleted (dropped, as a
	// single node drops deliveries to a deleted queue).
	TopicRelayHops        int64 `json:"topic_relay_hops"`
	TopicRelayHopsFailed  int64 `json:"topic_relay_hops_failed"`
	TopicRelayHopsDropped int64 `json:"topic_relay_hops_dropped"`
	// DiskFull: this node's disk is below the free-space reserve, so it
	// hands the shards it leads to members with room (DiskFullHandoffs
	// counts the transfers it started).
	DiskFull         bool  `json:"disk_full"`
	DiskFullHandoffs int64 `json:"disk_full_handoffs"`
	// SharedFlushes: flushes of the file system the shards' logs made
	// together (Config.FileFlush unset; absent when each log flushes its
	// own files).
	SharedFlushes *uint64 `json:"shared_flushes,omitempty"`
	// VotersNotMembers: voters of some shard for which this node has no
	// Raft address: it sends them nothing, and they count in the shard's
	// quorum. Either this node has not learnt a member's address yet (a
	// node joined while that member was down, without it in
	// --cluster-peers: review G; it asks the other members every few
	// seconds, addresses.go, and members of builds before 2026-12-06 do
	// not answer), or the voter is no member at all (a member removed and
	// started again on an empty directory while an older member, before
	// 2026-12-06, ran was taken back so, and the cluster lost its fault
	// tolerance with every member listed healthy: upgrade audit). Another
	// member's list tells the two apart.
	VotersNotMembers []uint64 `json:"voters_not_members,omitempty"`
	// VoteHeld: this node may have lost what it acknowledged (it started
	// empty, or an earlier start held its vote and was not released): it
	// grants no vote and takes no lead until a member answers that it was
	// replaced, or that the cluster is new (votehold.go).
	VoteHeld bool `json:"vote_held,omitempty"`
}

// MemberStatus is a member as this node knows it.
type MemberStatus struct {
	NodeID uint64 `json:"node_id"`
	Raft   string `json:"raft"`
	API    string `json:"api,omitempty"` // learned in the transport's handshake
	// DiskFull: the member said within the last few seconds that its disk
	// is full (this node's own state for itself).
	DiskFull bool `json:"disk_full"`
}

// ShardStatus is one shard's Raft group seen from this node.
type ShardStatus struct {
	Shard     int      `json:"shard"`
	Role      string   `json:"role"`  // leader, follower, candidate, pre-candidate
	Ready     bool     `json:"ready"` // leads and takes changes
	Leader    uint64   `json:"leader"`
	Term      uint64   `json:"term"`
	Commit    uint64   `json:"commit_index"`
	Applied   uint64   `json:"applied_index"`
	Voters    []uint64 `json:"voters"`
	Elections int64    `json:"elections"` // leader changes this node saw
	// FastCampaigns: campaigns this member made because its leader's
	// connection closed and no leader followed (failover.go).
	FastCampaigns int64 `json:"fast_campaigns"`
	// LeadConfirms: rounds this member, leading, ran to confirm its lead
	// before answering receives and peeks (confirm.go); LeadUnconfirmed:
	// answers it withheld because no majority confirmed it in time or it
	// stepped down meanwhile.
	LeadConfirms    int64 `json:"lead_confirm_rounds"`
	LeadUnconfirmed int64 `json:"lead_confirms_failed"`
	// LeaseReads: receives and peeks this member, leading, answered from
	// its read lease, with no round (lease.go); VotesDeferred: vote
	// requests it held because it had heard from its leader too recently.
	LeaseReads    int64 `json:"lease_reads"`
	VotesDeferred int64 `json:"votes_deferred"`
	// BumpsDropped: empty appends this member, leading, did not send
	// because their only news was a commit index the follower learns with
	// the next append or heartbeat (bump.go).
	BumpsDropped int64 `json:"commit_bumps_dropped"`
	// BeatsDropped: heartbeats this member, leading, did not send to a
	// caught-up follower it had sent an append within the tick (bump.go).
	BeatsDropped int64 `json:"heartbeats_dropped"`
	// Silences: times this node, leading the shard, went over half the
	// election timeout without a message of any follower (it steps down
	// after a whole one); SilenceMax: the longest it went, in seconds.
	Silences   int64   `json:"leader_silences"`
	SilenceMax float64 `json:"leader_silence_max_seconds"`
	Proposals  int64   `json:"proposals"`
	// Rebuilds: the shard's broker reopened from the log after a step-down
	// that left changes never committed in its state; RebuildsSkipped:
	// step-downs that left none (the broker went on as a follower).
	Rebuilds        int64 `json:"rebuilds"`
	RebuildsSkipped int64 `json:"rebuilds_skipped"`
	// Restarts: the shard restarted in place after its log failed
	// (restart.go); Failure: the failure while it waits to restart.
	Restarts int64  `json:"restarts"`
	Failure  string `json:"failure,omitempty"`
	// LastIndex: the last entry of this member's log; AppendQueued and
	// AppendBusy: its append worker's backlog (append.go), for a member
	// whose acknowledgements do not come.
	LastIndex    uint64 `json:"last_index"`
	AppendQueued int    `json:"append_queued"`
	AppendBusy   bool   `json:"append_busy"`
	// Installing: a snapshot install is under way (appends are not taken
	// meanwhile); AppendsRefused: appends this member did not take, for an
	// install under way or a disk too full.
	Installing     bool  `json:"installing"`
	AppendsRefused int64 `json:"appends_refused"`
	// CaughtUp: this member applied what the leader had committed after
	// its start or its last snapshot install (caughtup.go); /healthz waits
	// for it in every shard.
	CaughtUp bool `json:"caught_up"`
	// Reprobes: followers this member, leading, probed again because
	// their acknowledgements stopped while they were heard from (stuck.go).
	Reprobes int64 `json:"reprobes"`
	// Followers: on the leader only, each follower's progress.
	Followers []FollowerStatus `json:"followers,omitempty"`
	// Replica: the shard broker's replication counters.
	ProposalSeconds  []float64 `json:"-"`
	ProposalCounts   []uint64  `json:"-"`
	ProposalSum      float64   `json:"-"`
	ProposalsFailed  uint64    `json:"proposals_failed"`
	ProposalsPending int       `json:"proposals_pending"`
	// UnloggedExpiries: expiries this replica made that no entry has
	// logged yet (engine/replica_expiry.go: the next leader logs them);
	// UnloggedExpiriesDropped: those it had no room to remember.
	UnloggedExpiries        int    `json:"unlogged_expiries"`
	UnloggedExpiriesDropped uint64 `json:"unlogged_expiries_dropped"`
}

// FollowerStatus is one follower's progress on its leader.
type FollowerStatus struct {
	NodeID uint64 `json:"node_id"`
	Match  uint64 `json:"match_index"`
	Lag    uint64 `json:"lag"`   // entries behind the leader's last
	State  string `json:"state"` // probe, replicate or snapshot
	// Active: the leader heard from it within two election timeouts. A
	// member that is down shows a lag of 0 on a shard with nothing new to
	// send; Active says it is down. (Raft's RecentActive, shown before
	// 2026-12-06, is cleared every election timeout with CheckQuorum and
	// read false for live followers at times.)
	Active bool `json:"active"`
	// Next: the next entry the leader sends it; Paused: its flow is
	// throttled (in-flight appends full, or a probe sent); Inflight:
	// appends sent and not yet acknowledged.
	Next     uint64 `json:"next_index"`
	Paused   bool   `json:"paused"`
	Inflight int    `json:"inflight"`
}

// Status returns the node's view. A shard whose loop does not answer
// within a second is reported from what the node last saw of it.
func (n *Node) Status() Status {
	st := Status{NodeID: n.cfg.NodeID, API: n.cfg.APIAddr, Version: n.cfg.Version,
		Forwarded: n.forwarded.Load(), RefusedHandshakes: n.refused.Load(), SnapshotsInstalled: n.snapshots.Load(),
		DiskFull: n.diskFull.Load(), DiskFullHandoffs: n.handoffs.Load(), VoteHeld: n.voteHeld.Load(),
		DeadLetterHops: n.hopsStored.Load(), DeadLetterHopsFailed: n.hopsFailed.Load(),
		TopicRelayHops: n.relaysStored.Load(), TopicRelayHopsFailed: n.relaysFailed.Load(),
		TopicRelayHopsDropped: n.relaysDropped.Load()}
	if n.flushFS != nil {
		f := n.flushFS.Flushes()
		st.SharedFlushes = &f
	}
	if err := n.Health(); err != nil {
		st.Problem = err.Error()
	} else {
		st.Healthy = true
	}
	n.bookMu.Lock()
	for id, addr := range n.book {
		api, _ := n.tr.peerAPI(id)
		st.Members = append(st.Members, MemberStatus{NodeID: id, Raft: addr, API: api})
	}
	n.bookMu.Unlock()
	for i := range st.Members {
		st.Members[i].DiskFull = n.peerFull(st.Members[i].NodeID)
	}
	sort.Slice(st.Members, func(i, j int) bool { return st.Members[i].NodeID < st.Members[j].NodeID })
	// Raft's view and the append worker are the loop's (a restart
	// replaces both).
	type loopView struct {
		rs         raft.Status
		queued     int
		busy       bool
		installing bool
		active     map[uint64]bool // on a leader: the members heard from lately (activeMember)
	}
	res := make([]chan loopView, len(n.shards))
	for i, s := range n.shards {
		res[i] = make(chan loopView, 1)
		s.do(func() {
			v := loopView{rs: s.rn.Status(), installing: s.installing != nil}
			v.queued, v.busy = s.app.backlog()
			if v.rs.RaftState == raft.StateLeader {
				v.active = make(map[uint64]bool, len(v.rs.Progress))
				for id := range v.rs.Progress {
					v.active[id] = s.activeMember(id)
				}
			}
			res[i] <- v
		})
	}
	// Closed after a second: every shard whose loop has not answered by
	// then is reported without Raft's view. (A time.After channel fires
	// once: with two loops not answering, the second wait never ended.)
	deadline, ended := make(chan struct{}), make(chan struct{})
	close(ended)
	t := time.AfterFunc(time.Second, func() { close(deadline) })
	defer t.Stop()
	for i, s := range n.shards {
		ss := ShardStatus{Shard: s.id, Leader: s.lead.Load(), Term: s.term.Load(), Ready: s.ready.Load(),
			Role: "unknown", Voters: s.st.votersNow(), Elections: s.elections.Load(), FastCampaigns: s.fastCampaigns.Load(), Proposals: s.proposals.Load(),
			LeadConfirms: s.confirmRounds.Load(), LeadUnconfirmed: s.confirmsFailed.Load(),
			LeaseReads: s.leaseReads.Load(), VotesDeferred: s.votesDeferred.Load(), BumpsDropped: s.bumpsDropped.Load(),
			BeatsDropped: s.beatsDropped.Load(),
			Silences:     s.silences.Load(), SilenceMax: time.Duration(s.silenceMax.Load()).Seconds(),
			Rebuilds: s.rebuilds.Load(), RebuildsSkipped: s.rebuildsSkipped.Load(), Restarts: s.restarts.Load()}
		wait := deadline
		if f := s.failure.Load(); f != nil {
			ss.Failure = f.err.Error()
			wait = ended // its loop waits to restart, or refuses a damaged copy: no answer comes (review M)
		}
		ss.LastIndex, _ = s.st.LastIndex()
		ss.AppendsRefused = s.appendsRefused.Load()
		ss.Reprobes = s.watch.reprobes.Load()
		ss.CaughtUp = s.caughtUp.Load()
		select {
		case v := <-res[i]:
			rs := v.rs
			ss.AppendQueued, ss.AppendBusy, ss.Installing = v.queued, v.busy, v.installing
			ss.Role = roleName(rs.RaftState)
			ss.Term, ss.Commit, ss.Applied = rs.GetTerm(), rs.GetCommit(), rs.Applied
			if rs.RaftState == raft.StateLeader {
				last, _ := s.st.LastIndex()
				for id, pr := range rs.Progress {
					if id == n.cfg.NodeID {
						continue
					}
					lag := uint64(0)
					if last > pr.Match {
						lag = last - pr.Match
					}
					fs := FollowerStatus{NodeID: id, Match: pr.Match, Lag: lag,
						State: progressName(pr.State), Active: v.active[id], Next: pr.Next, Paused: pr.MsgAppFlowPaused}
					if pr.Inflights != nil {
						fs.Inflight = pr.Inflights.Count()
					}
					ss.Followers = append(ss.Followers, fs)
				}
				sort.Slice(ss.Followers, func(a, b int) bool { return ss.Followers[a].NodeID < ss.Followers[b].NodeID })
			}
		case <-wait:
		}
		s.statsMu.Lock()
		var lat wal.Histogram
		lat.Add(s.retiredLat)
		ss.ProposalsFailed = s.retiredFailed
		ss.UnloggedExpiriesDropped = s.retiredDrops
		s.statsMu.Unlock()
		if b := s.broker(); b != nil {
			if rs, ok := b.ReplicaStats(); ok {
				lat.Add(rs.ProposalSeconds)
				ss.ProposalsFailed += rs.ProposalsFailed
				ss.ProposalsPending = rs.Pending
				ss.UnloggedExpiries = rs.UnloggedExpiries
				ss.UnloggedExpiriesDropped += rs.UnloggedDropped
				if ss.Applied == 0 {
					ss.Applied = rs.Applied
				}
			}
		}
		ss.ProposalSeconds, ss.ProposalCounts, ss.ProposalSum = lat.Bounds, lat.Counts, lat.Sum
		st.Shards = append(st.Shards, ss)
	}
	st.VotersNotMembers = votersNotMembers(st.Members, st.Shards)
	return st
}

// votersNotMembers returns the voters of any shard that have no Raft
// address in members, in id order.
func votersNotMembers(members []MemberStatus, shards []ShardStatus) []uint64 {
	known := map[uint64]bool{}
	for _, m := range members {
		if m.Raft != "" {
			known[m.NodeID] = true
		}
	}
	var out []uint64
	for _, s := range shards {
		for _, v := range s.Voters {
			if !known[v] && !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	slices.Sort(out)
	return out
}

// Brokers returns this node's shard brokers (replicas: only a leader's
// takes changes), nil where one is being rebuilt.
func (n *Node) Brokers() []*engine.Broker {
	out := make([]*engine.Broker, len(n.shards))
	for i, s := range n.shards {
		out[i] = s.broker()
	}
	return out
}

func roleName(s raft.StateType) string {
	switch s {
	case raft.StateLeader:
		return "leader"
	case raft.StateFollower:
		return "follower"
	case raft.StateCandidate:
		return "candidate"
	case raft.StatePreCandidate:
		return "pre-candidate"
	}
	return "unknown"
}

func progressName(s tracker.StateType) string {
	switch s {
	case tracker.StateProbe:
		return "probe"
	case tracker.StateReplicate:
		return "replicate"
	case tracker.StateSnapshot:
		return "snapshot"
	}
	return "unknown"
}
