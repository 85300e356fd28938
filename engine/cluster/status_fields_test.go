package cluster

import (
	"encoding/json"
	"testing"
)

// GET /cluster has every field docs/operations.md, "Status", names, under
// the names it gives (a rename would leave the operator's jq and alerts
// reading nothing): the node's, each member's, each shard's, and on the
// leader each follower's.
func TestStatusHasTheFieldsTheDocsName(t *testing.T) {
	c := &testCluster{t: t, nodes: make([]*Node, 3), shards: 1}
	c.cfgTweak = func(i int, cfg *Config) { cfg.Version = "v-test" }
	startTestCluster(c)
	li, _ := c.leaderQueue("fields")
	b, err := json.Marshal(c.nodes[li].Status())
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	has := func(where string, m map[string]any, keys ...string) {
		t.Helper()
		for _, k := range keys {
			if _, ok := m[k]; !ok {
				t.Errorf("%s: no %q in %v", where, k, m)
			}
		}
	}
	// shared_flushes: with SyncAlways and the shared flush (the tests'
	// default), as with --sync always and --cluster-flush shared.
	has("node", st, "node_id", "version", "disk_full", "disk_full_handoffs", "members", "shards", "shared_flushes")
	members, _ := st["members"].([]any)
	if len(members) != 3 {
		t.Fatalf("members: %v", st["members"])
	}
	for _, m := range members {
		has("member", m.(map[string]any), "node_id", "raft", "api", "disk_full")
	}
	shards, _ := st["shards"].([]any)
	if len(shards) != 1 {
		t.Fatalf("shards: %v", st["shards"])
	}
	sh := shards[0].(map[string]any)
	has("shard", sh, "role", "leader", "term", "commit_index", "applied_index", "restarts",
		"last_index", "append_queued", "append_busy", "installing", "appends_refused", "caught_up", "reprobes", "followers")
	if sh["role"] != "leader" {
		t.Fatalf("role %v on the leader", sh["role"])
	}
	followers, _ := sh["followers"].([]any)
	if len(followers) != 2 {
		t.Fatalf("followers: %v", sh["followers"])
	}
	for _, f := range followers {
		has("follower", f.(map[string]any), "node_id", "lag", "next_index", "paused", "inflight")
	}
}
