package server

// The cluster collector: a cluster node's view of its shards (Raft role,
// term, commit and apply lag, followers' lag, proposal latency, elections,
// rebuilds) and its node-wide counters (forwarded requests, refused
// handshakes, snapshots installed, disk-full hand-overs), read from one cluster.Node.Status per
// scrape. Registered only on a cluster node.
//
// Series per shard: a few gauges and counters labelled shard, the role as
// a state set (one series per role, 1 for the current one), and each
// follower's lag on the shard's leader (labelled follower; a follower
// reports none). Counters are monotonic across a shard's broker rebuilds
// (engine/cluster keeps what a replaced broker counted).

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/smqd/smqd/engine/cluster"
)

// clusterRoles are the role label's values (cluster.ShardStatus.Role).
var clusterRoles = []string{"leader", "follower", "candidate", "pre-candidate", "unknown"}

type clusterCollector struct {
	c     *cluster.Node
	descs []*prometheus.Desc

	healthy, forwarded, refused, snapshots             *prometheus.Desc
	handoffs, sharedFlushes, hops, relays              *prometheus.Desc
	role, ready, leader, term                          *prometheus.Desc
	commit, applied, applyLag, followerLag             *prometheus.Desc
	followerActive                                     *prometheus.Desc
	elections, proposals, failed, pending              *prometheus.Desc
	proposalSeconds, rebuilds, rebuildsSkips, restarts *prometheus.Desc
	silences, silenceMax, fastCampaigns                *prometheus.Desc
	leadConfirms, leadUnconfirmed                      *prometheus.Desc
	leaseReads, votesDeferred, bumpsDropped            *prometheus.Desc
	beatsDropped, strangers, voteHeld                  *prometheus.Desc
	unlogged, unloggedDropped, caughtUp                *prometheus.Desc
}

func newClusterCollector(c *cluster.Node) *clusterCollector {
	cc := &clusterCollector{c: c}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		d := prometheus.NewDesc(name, help, labels, nil)
		cc.descs = append(cc.descs, d)
		return d
	}
	cc.healthy = desc("smqd_cluster_healthy", "1 while this node can serve every shard (/healthz ready), else 0.")
	cc.strangers = desc("smqd_cluster_voters_not_members", "Voters of some shard for which this node knows no address: it sends them nothing and they count in every quorum. If another member lists one, this node learns its address from the members within a minute (else restart it with it in --cluster-peers); if none does, remove it (smqctl cluster rm ID).")
	cc.voteHeld = desc("smqd_cluster_vote_held", "1 while this node holds its vote: it started empty, or its machine restarted under --sync interval or none (or an earlier start held it and was not released), and grants no vote and leads no shard until a member has replaced it, or a majority answered that the cluster is new (or, after a power loss, that they lost power too).")
	cc.forwarded = desc("smqd_cluster_forwarded_requests_total", "Client requests this node forwarded to a shard's leader and got answered.")
	cc.refused = desc("smqd_cluster_refused_handshakes_total", "Inter-node connections refused, by this node or by the peer it dialled: a wrong or missing cluster key, or a certificate the other side refused.")
	cc.snapshots = desc("smqd_cluster_snapshots_installed_total", "Shard snapshots this node installed (it was too far behind, new or wiped).")
	cc.handoffs = desc("smqd_cluster_disk_full_handoffs_total", "Leadership transfers this node started because its disk was full (the shards went to members with room).")
	cc.hops = desc("smqd_cluster_dead_letter_hops_total", "Batches of dead letters this node's shard leaders handed to a queue of another shard: stored, or failed (the hop gave up; the messages stay hidden and a later receive moves them, or they were stored and the answer lost).", "outcome")
	cc.relays = desc("smqd_cluster_topic_relay_hops_total", "Batches of a topic's deliveries this node's shard leaders handed to a queue of another shard: stored, failed (retried 1 s later, doubling to every 16 s, for up to a day; a lost answer delivers twice), or dropped (the queue was deleted).", "outcome")
	cc.sharedFlushes = desc("smqd_cluster_shared_flushes_total", "Flushes of the data directory's file system (syncfs) the node's shard logs made together (--cluster-flush shared); each log's waits for them count in smqd_wal_fsyncs_total.")
	cc.role = desc("smqd_cluster_shard_role", "This node's Raft role in the shard: 1 for the current role.", "shard", "role")
	cc.ready = desc("smqd_cluster_shard_ready", "1 if this node leads the shard and takes changes.", "shard")
	cc.caughtUp = desc("smqd_cluster_shard_caught_up", "1 once this node applied what the shard's leader had committed after the node started (or after its last snapshot install began, or its last restart in place); /healthz waits for it in every shard.", "shard")
	cc.leader = desc("smqd_cluster_shard_leader", "The shard's leader as this node knows it (node id; 0: none).", "shard")
	cc.term = desc("smqd_cluster_shard_term", "The shard's Raft term on this node.", "shard")
	cc.commit = desc("smqd_cluster_shard_commit_index", "The shard's commit index on this node.", "shard")
	cc.applied = desc("smqd_cluster_shard_applied_index", "The last entry of the shard this node applied.", "shard")
	cc.applyLag = desc("smqd_cluster_shard_apply_lag", "Committed entries of the shard this node has not applied yet.", "shard")
	cc.followerLag = desc("smqd_cluster_shard_follower_lag", "On the shard's leader: entries each follower lacks. A follower that went down while this node led shows 0 on a shard with nothing new; one not heard from since this node became leader shows the commit index: see smqd_cluster_shard_follower_active.", "shard", "follower")
	cc.followerActive = desc("smqd_cluster_shard_follower_active", "On the shard's leader: 1 if it heard from the follower within two election timeouts, 0 if the follower is not answering (down, or cut off).", "shard", "follower")
	cc.elections = desc("smqd_cluster_shard_elections_total", "Leader changes of the shard this node saw.", "shard")
	cc.proposals = desc("smqd_cluster_shard_proposals_total", "Proposals this node handed to the shard's Raft group.", "shard")
	cc.failed = desc("smqd_cluster_shard_proposals_failed_total", "Proposals of this node that never committed (it lost the lead first).", "shard")
	cc.pending = desc("smqd_cluster_shard_proposals_pending", "Proposals of this node in flight.", "shard")
	cc.proposalSeconds = desc("smqd_cluster_shard_proposal_duration_seconds", "From a leader's proposal of its records to their commit.", "shard")
	cc.rebuilds = desc("smqd_cluster_shard_rebuilds_total", "Times the shard's broker was reopened from the log (a step-down left uncommitted changes in it).", "shard")
	cc.rebuildsSkips = desc("smqd_cluster_shard_rebuilds_skipped_total", "Step-downs that left no uncommitted change: the broker went on as a follower.", "shard")
	cc.restarts = desc("smqd_cluster_shard_restarts_total", "Times the shard restarted in place after its log failed (a full disk, a failing device).", "shard")
	cc.fastCampaigns = desc("smqd_cluster_shard_fast_campaigns_total", "Campaigns this node made for the shard because its leader's connection closed and no leader followed (the survivors take turns for up to an election timeout).", "shard")
	cc.leadConfirms = desc("smqd_cluster_shard_lead_confirm_rounds_total", "Heartbeat rounds this node, leading the shard, ran to confirm its lead before answering receives and peeks (one round serves every receive waiting).", "shard")
	cc.leadUnconfirmed = desc("smqd_cluster_shard_lead_confirms_failed_total", "Receives and peeks this node withheld because a majority did not confirm its lead (it was cut off, or stepped down meanwhile); the messages they took come back after their visibility timeout.", "shard")
	cc.leaseReads = desc("smqd_cluster_shard_lease_reads_total", "Receives and peeks this node, leading the shard, answered from its read lease, with no round of heartbeats.", "shard")
	cc.votesDeferred = desc("smqd_cluster_shard_votes_deferred_total", "Vote requests this node held until its promise to its last leader's read lease ended.", "shard")
	cc.bumpsDropped = desc("smqd_cluster_shard_commit_bumps_dropped_total", "Empty appends this node, leading the shard, did not send because their only news was a commit index the follower learns with the next append or heartbeat.", "shard")
	cc.beatsDropped = desc("smqd_cluster_shard_heartbeats_dropped_total", "Heartbeats this node, leading the shard, did not send to a caught-up follower it had sent an append within the tick (the append does what the heartbeat would).", "shard")
	cc.silences = desc("smqd_cluster_shard_leader_silences_total", "Times this node, leading the shard, went over half the election timeout without a message of any follower (a leader steps down after a whole one).", "shard")
	cc.silenceMax = desc("smqd_cluster_shard_leader_silence_max_seconds", "The longest this node, leading the shard, went without a message of any follower.", "shard")
	cc.unlogged = desc("smqd_cluster_shard_unlogged_expiries", "Retention expiries this node's replica made that no log entry holds yet (the shard's next leader logs them).", "shard")
	cc.unloggedDropped = desc("smqd_cluster_shard_unlogged_expiries_dropped_total", "Expiries this node's replica made and had no room to remember: those messages stay in its index until a restart.", "shard")
	return cc
}

func (cc *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range cc.descs {
		ch <- d
	}
}

func (cc *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	st := cc.c.Status()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	healthy := 0.0
	if st.Healthy {
		healthy = 1
	}
	gauge(cc.healthy, healthy)
	gauge(cc.strangers, float64(len(st.VotersNotMembers)))
	held := 0.0
	if st.VoteHeld {
		held = 1
	}
	gauge(cc.voteHeld, held)
	counter(cc.forwarded, float64(st.Forwarded))
	counter(cc.refused, float64(st.RefusedHandshakes))
	counter(cc.snapshots, float64(st.SnapshotsInstalled))
	counter(cc.handoffs, float64(st.DiskFullHandoffs))
	counter(cc.hops, float64(st.DeadLetterHops), "stored")
	counter(cc.hops, float64(st.DeadLetterHopsFailed), "failed")
	counter(cc.relays, float64(st.TopicRelayHops), "stored")
	counter(cc.relays, float64(st.TopicRelayHopsFailed), "failed")
	counter(cc.relays, float64(st.TopicRelayHopsDropped), "dropped")
	if st.SharedFlushes != nil {
		counter(cc.sharedFlushes, float64(*st.SharedFlushes))
	}
	for _, sh := range st.Shards {
		id := strconv.Itoa(sh.Shard)
		for _, r := range clusterRoles {
			v := 0.0
			if r == sh.Role {
				v = 1
			}
			gauge(cc.role, v, id, r)
		}
		ready := 0.0
		if sh.Ready {
			ready = 1
		}
		gauge(cc.ready, ready, id)
		caught := 0.0
		if sh.CaughtUp {
			caught = 1
		}
		gauge(cc.caughtUp, caught, id)
		gauge(cc.leader, float64(sh.Leader), id)
		gauge(cc.term, float64(sh.Term), id)
		gauge(cc.commit, float64(sh.Commit), id)
		gauge(cc.applied, float64(sh.Applied), id)
		lag := 0.0
		if sh.Commit > sh.Applied {
			lag = float64(sh.Commit - sh.Applied)
		}
		gauge(cc.applyLag, lag, id)
		for _, f := range sh.Followers {
			gauge(cc.followerLag, float64(f.Lag), id, strconv.FormatUint(f.NodeID, 10))
			active := 0.0
			if f.Active {
				active = 1
			}
			gauge(cc.followerActive, active, id, strconv.FormatUint(f.NodeID, 10))
		}
		counter(cc.elections, float64(sh.Elections), id)
		counter(cc.silences, float64(sh.Silences), id)
		counter(cc.fastCampaigns, float64(sh.FastCampaigns), id)
		counter(cc.leadConfirms, float64(sh.LeadConfirms), id)
		counter(cc.leadUnconfirmed, float64(sh.LeadUnconfirmed), id)
		counter(cc.leaseReads, float64(sh.LeaseReads), id)
		counter(cc.votesDeferred, float64(sh.VotesDeferred), id)
		counter(cc.bumpsDropped, float64(sh.BumpsDropped), id)
		counter(cc.beatsDropped, float64(sh.BeatsDropped), id)
		gauge(cc.silenceMax, sh.SilenceMax, id)
		counter(cc.proposals, float64(sh.Proposals), id)
		counter(cc.failed, float64(sh.ProposalsFailed), id)
		gauge(cc.pending, float64(sh.ProposalsPending), id)
		constHistogram(ch, cc.proposalSeconds, sh.ProposalSeconds, sh.ProposalCounts, sh.ProposalSum, id)
		counter(cc.rebuilds, float64(sh.Rebuilds), id)
		counter(cc.rebuildsSkips, float64(sh.RebuildsSkipped), id)
		counter(cc.restarts, float64(sh.Restarts), id)
		gauge(cc.unlogged, float64(sh.UnloggedExpiries), id)
		counter(cc.unloggedDropped, float64(sh.UnloggedExpiriesDropped), id)
	}
}
