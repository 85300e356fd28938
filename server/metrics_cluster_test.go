package server

import (
	"fmt"
	"testing"
	"time"
)

// TestClusterMetrics: a cluster node's /metrics carries each shard's role,
// term, commit and apply lag, followers' lag, proposal latency and
// elections, and the node's forwarded requests (issue "cluster", metrics).
// Every shard has exactly one leader across the nodes, and the leader's
// proposal histogram counts the sends it committed.
func TestClusterMetrics(t *testing.T) {
	c := startCluster(t, 3, 2)
	c.ready()
	cl := c.envs[0].client()
	// Queues on both shards, sent to through every node: a shard has one
	// leader, so the other two forward.
	for q := range 4 {
		name := fmt.Sprintf("metrics-%d", q)
		wantStatus(t, cl.put("/queues/"+name, ""), 201)
		for i := range 6 {
			c.envs[i%3].client().mustSend(name, fmt.Sprint(i), "")
		}
	}
	leaders := map[string]int{}
	var proposed, forwarded float64
	for i, e := range c.envs {
		m := scrape(t, e.client())
		if v := value(t, m, "smqd_cluster_healthy"); v != 1 {
			t.Errorf("node %d: smqd_cluster_healthy %v", i+1, v)
		}
		if v := value(t, m, "smqd_cluster_voters_not_members"); v != 0 {
			t.Errorf("node %d: smqd_cluster_voters_not_members %v", i+1, v)
		}
		if v := value(t, m, "smqd_cluster_vote_held"); v != 0 {
			t.Errorf("node %d: smqd_cluster_vote_held %v (a new cluster: released once a majority answered)", i+1, v)
		}
		forwarded += value(t, m, "smqd_cluster_forwarded_requests_total")
		value(t, m, "smqd_cluster_rerouted_requests_total") // served (counted in TestClusterClosingLeaderRunsItsClientsRequestOnTheNextLeader)
		// SyncAlways on the OS file system: the shards' logs share their
		// flushes, and the sends above made some.
		if v := value(t, m, "smqd_cluster_shared_flushes_total"); v < 1 {
			t.Errorf("node %d: smqd_cluster_shared_flushes_total %v", i+1, v)
		}
		for sh := range 2 {
			id := fmt.Sprint(sh)
			roles := 0.0
			for _, r := range clusterRoles {
				roles += value(t, m, "smqd_cluster_shard_role", "shard", id, "role", r)
			}
			if roles != 1 {
				t.Errorf("node %d shard %s: %v roles set, want 1", i+1, id, roles)
			}
			if value(t, m, "smqd_cluster_shard_term", "shard", id) == 0 || value(t, m, "smqd_cluster_shard_commit_index", "shard", id) == 0 {
				t.Errorf("node %d shard %s: no term or commit index", i+1, id)
			}
			value(t, m, "smqd_cluster_shard_apply_lag", "shard", id)
			value(t, m, "smqd_cluster_shard_elections_total", "shard", id)
			value(t, m, "smqd_cluster_shard_rebuilds_total", "shard", id)
			value(t, m, "smqd_cluster_shard_unlogged_expiries", "shard", id)
			value(t, m, "smqd_cluster_shard_unlogged_expiries_dropped_total", "shard", id)
			if value(t, m, "smqd_cluster_shard_role", "shard", id, "role", "leader") == 1 {
				leaders[id]++
				for _, f := range []int{1, 2, 3} {
					if f == i+1 {
						continue
					}
					value(t, m, "smqd_cluster_shard_follower_lag", "shard", id, "follower", fmt.Sprint(f))
					if v := value(t, m, "smqd_cluster_shard_follower_active", "shard", id, "follower", fmt.Sprint(f)); v != 1 {
						t.Errorf("node %d shard %s: follower %d, a live member, has smqd_cluster_shard_follower_active %v", i+1, id, f, v)
					}
				}
				if value(t, m, "smqd_cluster_shard_ready", "shard", id) != 1 {
					t.Errorf("node %d leads shard %s but is not ready", i+1, id)
				}
				// Every follower's answer ends a silence: a leader has seen
				// some (a leader elected a moment ago, by the balancer's
				// hand-over, gets its first answer within a tick or two).
				value(t, m, "smqd_cluster_shard_leader_silences_total", "shard", id)
				value(t, m, "smqd_cluster_shard_fast_campaigns_total", "shard", id)
				value(t, m, "smqd_cluster_shard_lead_confirm_rounds_total", "shard", id)
				value(t, m, "smqd_cluster_shard_lead_confirms_failed_total", "shard", id)
				silence := value(t, m, "smqd_cluster_shard_leader_silence_max_seconds", "shard", id)
				for try := 0; silence <= 0 && try < 40; try++ {
					time.Sleep(50 * time.Millisecond)
					silence = value(t, scrape(t, e.client()), "smqd_cluster_shard_leader_silence_max_seconds", "shard", id)
				}
				if silence <= 0 {
					t.Errorf("node %d leads shard %s and saw no gap between its followers' messages", i+1, id)
				}
				proposed += value(t, m, "smqd_cluster_shard_proposal_duration_seconds_count", "shard", id)
			}
		}
	}
	for sh := range 2 {
		if n := leaders[fmt.Sprint(sh)]; n != 1 {
			t.Errorf("shard %d: %d leaders in the metrics, want 1", sh, n)
		}
	}
	// 4 queue creations and 24 sends, each a committed proposal of a leader.
	if proposed < 28 {
		t.Errorf("the leaders' proposal histograms count %v proposals, want >= 28", proposed)
	}
	if forwarded < 16 {
		t.Errorf("%v forwarded requests counted, want >= 16 (2 of every 3 sends)", forwarded)
	}
}

// A forwarded request's error answer is counted in smqd_http_errors_total
// by the node its client reached, with smqd_http_responses_total, and not
// by the leader that wrote it: the leader counted it, and the client's
// node not, so a node's errors by code did not match its 4xx and 5xx
// responses, and the errors of a node that forwards were on the others
// (metrics audit, 2026-12-07).
func TestClusterForwardedErrorsCountWhereTheClientIs(t *testing.T) {
	c := startCluster(t, 3, 1)
	c.ready()
	wantStatus(t, c.envs[0].client().put("/queues/errs", ""), 201)
	lead := c.leaderOf("errs") // one shard: every queue name's leader
	f := (lead + 1) % 3
	errs := func(i int) (notExist, handle float64) {
		m := scrape(t, c.envs[i].client())
		return value(t, m, "smqd_http_errors_total", "code", "QueueNotExist"),
			value(t, m, "smqd_http_errors_total", "code", "ReceiptHandleError")
	}
	n0, h0 := errs(f)
	ln0, lh0 := errs(lead)
	cl := c.envs[f].client()
	wantError(t, cl.get("/queues/no-such-queue"), 404, "QueueNotExist")
	wantError(t, cl.do(req{method: "DELETE", target: "/queues/errs/messages?ReceiptHandle=not-a-handle"}), 400, "ReceiptHandleError")
	n1, h1 := errs(f)
	ln1, lh1 := errs(lead)
	if n1-n0 != 1 || h1-h0 != 1 {
		t.Errorf("the client's node counted %v QueueNotExist and %v ReceiptHandleError, want 1 and 1", n1-n0, h1-h0)
	}
	if ln1-ln0 != 0 || lh1-lh0 != 0 {
		t.Errorf("the leader counted %v QueueNotExist and %v ReceiptHandleError of requests forwarded to it, want 0 and 0", ln1-ln0, lh1-lh0)
	}
}
