//go:build linux

package main

// A full disk on one node of a 3-node cluster, end to end: real daemons,
// node 2's data directory on a small tmpfs the test fills. Node 2 hands
// the shards it leads to the others, every queue takes sends through any
// node, the others see node 2 as full in GET /cluster, and once the space
// is freed node 2 leads its shards again; nothing acknowledged is lost
// and every node stops cleanly (engine/cluster/handoff.go).

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestDaemonClusterDiskFull(t *testing.T) {
	fs := mountTmpfs(t, 192<<20)
	bin, err := buildDaemon(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	creds := filepath.Join(t.TempDir(), "credentials")
	const keyID, secret = "diskfull", "disk-full-cluster-secret-0123456789"
	if err := os.WriteFile(creds, []byte(keyID+" "+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const n, reserve = 3, 24 << 20
	raft, api, peers := clusterAddrs(t, n)
	common := []string{"--shards", "2", "--wal-segment-bytes", "1048576", "--index-memtable-bytes", "1048576",
		"--free-space-reserve", fmt.Sprint(reserve)}
	nodes := make([]*clusterDaemon, n)
	for i := range n {
		extra := common
		if i == 1 {
			extra = append(extra, "--data-dir", filepath.Join(fs, "data"))
		}
		nodes[i] = startClusterDaemon(t, bin, i+1, raft[i], api[i], peers, creds, extra...)
	}
	waitCluster(t, "leaders on their preferred nodes", 60*time.Second, func() error { return preferredLeadersReady(api) })
	do := signedDo(t, keyID, secret)
	// Queues on both shards (8 names: all on one shard has odds 1 in 128).
	var queues []string
	for k := range 8 {
		q := fmt.Sprintf("full-%d", k)
		if st, body := do("PUT", "http://"+api[0]+"/queues/"+q, ""); st != 201 {
			t.Fatalf("create %s: %d %s", q, st, body)
		}
		queues = append(queues, q)
	}
	acked := map[string]int{}
	sendAll := func(via int) error {
		for _, q := range queues {
			st, body := do("POST", "http://"+api[via]+"/queues/"+q+"/messages", "<Message><MessageBody>x</MessageBody></Message>")
			if st != 201 {
				return fmt.Errorf("send to %s via node %d: %d %q", q, via+1, st, body)
			}
			acked[q]++
		}
		return nil
	}
	if err := sendAll(0); err != nil {
		t.Fatal(err)
	}
	// Fill node 2's disk to between the critical level (reserve / 4) and
	// the reserve: full, and still taking replicated entries.
	var sf syscall.Statfs_t
	if err := syscall.Statfs(fs, &sf); err != nil {
		t.Fatal(err)
	}
	ballast := filepath.Join(fs, "ballast")
	if err := os.WriteFile(ballast, make([]byte, int64(sf.Bavail)*sf.Bsize-14<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	type status struct {
		DiskFull bool `json:"disk_full"`
		Members  []struct {
			NodeID   uint64 `json:"node_id"`
			DiskFull bool   `json:"disk_full"`
		} `json:"members"`
		Shards []struct {
			Role string `json:"role"`
		} `json:"shards"`
	}
	clusterOf := func(i int) status {
		var st status
		if err := json.Unmarshal([]byte(httpGet(t, "http://"+api[i]+"/cluster")), &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	waitCluster(t, "node 2 full, leading nothing, and every queue taking sends through every node", 30*time.Second, func() error {
		st := clusterOf(1)
		if !st.DiskFull {
			sendAll(0) // appends make node 2 sample its space
			return fmt.Errorf("node 2 does not say its disk is full")
		}
		for i, sh := range st.Shards {
			if sh.Role == "leader" {
				return fmt.Errorf("node 2 still leads shard %d", i)
			}
		}
		for via := range n {
			if err := sendAll(via); err != nil {
				return err
			}
		}
		return nil
	})
	for _, m := range clusterOf(0).Members {
		if m.NodeID == 2 && !m.DiskFull {
			t.Error("node 1's GET /cluster does not show node 2 as full")
		}
	}
	if !strings.Contains(nodes[1].stderr.String(), "disk full: handing the lead to a member with room") {
		t.Errorf("node 2 did not log a hand-over:\n%s", tail(nodes[1].stderr.String(), 3000))
	}
	// Its /healthz says what a member does when full: it refuses no send
	// itself (until 2026-12-07 it said that new messages were refused).
	if h := httpGet(t, "http://"+api[1]+"/healthz"); !strings.Contains(h, "forwards requests to them") {
		t.Errorf("node 2's /healthz while full: %q", h)
	}
	if v := metricValue(httpGet(t, "http://"+api[1]+"/metrics"), "smqd_cluster_disk_full_handoffs_total"); v < 1 {
		t.Errorf("smqd_cluster_disk_full_handoffs_total on node 2: %v", v)
	}
	// Space comes back: node 2 leads its preferred shards again.
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	waitCluster(t, "leaders back on their preferred nodes", 30*time.Second, func() error { return preferredLeadersReady(api) })
	if err := sendAll(1); err != nil {
		t.Fatal(err)
	}
	// Nothing acknowledged was lost.
	for _, q := range queues {
		st, body := do("GET", "http://"+api[2]+"/queues/"+q, "")
		var got int
		if _, err := fmt.Sscanf(between(body, "<ActiveMessages>", "</ActiveMessages>"), "%d", &got); st != 200 || err != nil {
			t.Fatalf("attributes of %s: %d %s", q, st, body)
		}
		if got < acked[q] {
			t.Errorf("%s holds %d messages, %d acknowledged", q, got, acked[q])
		}
	}
	for _, d := range nodes {
		d.stop(t)
	}
}

// between returns the text of s between the first open and the next close.
func between(s, open, close string) string {
	_, after, ok := strings.Cut(s, open)
	if !ok {
		return ""
	}
	in, _, _ := strings.Cut(after, close)
	return in
}
