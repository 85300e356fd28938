package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smqd/smqd/cmd/internal/testnet"
)

// runSDKCluster runs the SDK scripts against a 3-node cluster of bin
// (TestSDKCompatibility's "sdk-cluster"): each script through another
// node, so that most requests are forwarded to their shard's leader, and
// every answer must be what a single node gives, every step run. The
// scripts learn every node's endpoint (SMQD_CLUSTER_ENDPOINTS) and accept
// only what a cluster does otherwise than a single node, by design:
//   - a queue subscription whose queue is on another shard than the topic
//     gets its delivery relayed after the publish's answer, at least once
//     (engine/topic_relay.go; MNS too fans out after answering, topic spec
//     §2.11): the topic steps receive with a long poll on a single node
//     too, and in a cluster a second message in a subscribed queue may be
//     a copy of the same notification;
//   - the topic shard's leader makes the HTTP pushes, signed with its own
//     key, and x-mns-signing-cert-url names its own address: push.js takes
//     the certificate URL of any node, and fetches it from that node.
//
// A subscription's dead-letter queue may be on another shard than its
// topic (a cluster moves exhausted notifications there), so the dead-
// letter steps run as on one node. server's TestClusterTopics covers these
// paths with a failover. The scripts start once every shard is led by its
// preferred leader, so that they run against a settled cluster (the
// balancer's hand-overs after a start used to end long polls early, 404,
// which the scripts' timing checks took for a fault; a poll now goes on on
// the new leader), and so that every push comes from one leader: push.js
// counts pushes exactly, as on one node, and a lead that moved while a
// push was in flight would push it again once its lease ends. Then every
// node must stop cleanly on SIGTERM.
func runSDKCluster(t *testing.T, node, dir, bin string) {
	const n = 3
	creds := filepath.Join(t.TempDir(), "credentials")
	const keyID, secret = "sdkcluster", "sdk-cluster-secret-0123456789"
	if err := os.WriteFile(creds, []byte(keyID+" "+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	raft, api, peers := clusterAddrs(t, n)
	nodes := make([]*clusterDaemon, n)
	for i := range n {
		nodes[i] = startClusterDaemon(t, bin, i+1, raft[i], api[i], peers, creds)
	}
	waitCluster(t, "the cluster settles", 60*time.Second, func() error { return preferredLeadersReady(api) })
	ep := func(i int) string { return "http://" + api[i] }
	var eps []string
	for i := range n {
		eps = append(eps, ep(i))
	}
	common := append(nodeEnv(), "SMQD_ACCESS_KEY_ID="+keyID, "SMQD_ACCESS_KEY_SECRET="+secret,
		"SMQD_CLUSTER_ENDPOINTS="+strings.Join(eps, ","))
	t.Run("scripts", func(t *testing.T) {
		runNodeScripts(t, node, dir, common, []nodeRun{
			{"alicloud-mns via node 2", "alicloud-mns.js", []string{"SMQD_ENDPOINT=" + ep(1)}},
			{"ali-mns-url-override via node 3", "ali-mns.js", []string{"SMQD_ENDPOINT=" + ep(2), "SMQD_ALIMNS_MODE=url"}},
			{"ali-mns-http-proxy via node 1", "ali-mns.js", []string{"SMQD_ENDPOINT=" + ep(0), "SMQD_ALIMNS_MODE=proxy", "HTTP_PROXY=" + ep(0)}},
			{"limits via node 1", "limits.js", []string{"SMQD_ENDPOINT=" + ep(0)}},
		})
	})
	var forwarded int64
	for i := range n {
		var st struct {
			Forwarded int64 `json:"forwarded"`
		}
		if err := json.Unmarshal([]byte(httpGet(t, ep(i)+"/cluster")), &st); err != nil {
			t.Fatal(err)
		}
		forwarded += st.Forwarded
	}
	if forwarded == 0 {
		t.Error("no request was forwarded: the run did not test forwarding")
	}
	for _, d := range nodes {
		d.stop(t)
	}
}

// clusterAddrs picks n nodes' Raft and API addresses and returns them
// with the --cluster-peers value.
func clusterAddrs(t *testing.T, n int) (raft, api []string, peers string) {
	raft, api = make([]string, n), make([]string, n)
	var p []string
	for i := range n {
		raft[i], api[i] = testnet.FreeLoopback(t), testnet.FreeLoopback(t)
		p = append(p, fmt.Sprintf("%d=%s", i+1, raft[i]))
	}
	return raft, api, strings.Join(p, ",")
}

// waitCluster polls cond every 100 ms until it holds, and fails the test
// if it does not within limit.
func waitCluster(t *testing.T, what string, limit time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, limit, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// signedDo returns a function that makes one request signed with the key
// pair and gives its status and body.
func signedDo(t *testing.T, keyID, secret string) func(method, url, body string) (int, string) {
	return func(method, url, body string) (int, string) {
		r := signedRequestBody(t, method, url, body, keyID, secret)
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return r.StatusCode, string(b)
	}
}

type clusterDaemon struct {
	id     int
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan error
}

// startClusterDaemon starts node id of a cluster and waits until its API
// answers. extra flags come last (a repeated flag's last value wins).
func startClusterDaemon(t *testing.T, bin string, id int, raft, api, peers, creds string, extra ...string) *clusterDaemon {
	t.Helper()
	args := []string{"--node-id", fmt.Sprint(id), "--raft-listen", raft, "--cluster-peers", peers,
		"--listen", api, "--data-dir", filepath.Join(t.TempDir(), "data"), "--sync", "always",
		"--credentials-file", creds, "--console=false"}
	cmd := exec.Command(bin, append(args, extra...)...)
	cmd.Env = append(daemonEnv(), "SMQD_CLUSTER_KEY=sdk-cluster-test-key-0123456789abcdef")
	orphanProof(cmd)
	d := &clusterDaemon{id: id, cmd: cmd, stderr: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = d.stderr, d.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			d.cmd.Process.Kill()
			<-d.done
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := http.Get("http://" + api + "/cluster")
		if err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				return d
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d does not answer on %s after 30 s:\n%s", id, api, d.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop sends SIGTERM and requires a clean exit within 20 s, with no error,
// race or panic in the log.
func (d *clusterDaemon) stop(t *testing.T) {
	t.Helper()
	d.cmd.Process.Signal(syscall.SIGTERM)
	var err error
	select {
	case err = <-d.done:
	case <-time.After(20 * time.Second):
		d.cmd.Process.Signal(syscall.SIGQUIT)
		time.Sleep(time.Second)
		d.cmd.Process.Kill()
		err = <-d.done
		t.Errorf("node %d did not stop within 20 s of SIGTERM", d.id)
	}
	log := d.stderr.String()
	if err != nil {
		t.Errorf("node %d exit: %v\n%s", d.id, err, log)
	}
	for _, bad := range []string{"WARNING: DATA RACE", "panic", "level=ERROR"} {
		if strings.Contains(log, bad) {
			t.Errorf("node %d logged %q:\n%s", d.id, bad, log)
		}
	}
}

// preferredLeadersReady tells whether every shard is led, taking changes,
// by its preferred leader (engine/cluster/balance.go: its voters in id
// order, shard i preferring the (i mod voters)-th).
func preferredLeadersReady(api []string) error {
	type shard struct {
		Shard  int      `json:"shard"`
		Ready  bool     `json:"ready"`
		Voters []uint64 `json:"voters"`
	}
	var st []struct {
		NodeID uint64  `json:"node_id"`
		Shards []shard `json:"shards"`
	}
	for _, a := range api {
		r, err := http.Get("http://" + a + "/cluster")
		if err != nil {
			return err
		}
		var s struct {
			NodeID uint64  `json:"node_id"`
			Shards []shard `json:"shards"`
		}
		err = json.NewDecoder(r.Body).Decode(&s)
		r.Body.Close()
		if err != nil {
			return err
		}
		st = append(st, s)
	}
	for i, sh := range st[0].Shards {
		v := slices.Clone(sh.Voters)
		slices.Sort(v)
		if len(v) == 0 {
			return fmt.Errorf("shard %d: no voters", i)
		}
		want := v[i%len(v)]
		ok := false
		for _, s := range st {
			if s.NodeID == want && i < len(s.Shards) && s.Shards[i].Ready {
				ok = true
			}
		}
		if !ok {
			return fmt.Errorf("shard %d: its preferred leader, node %d, does not lead it yet", i, want)
		}
	}
	return nil
}

// settledDaemonCluster builds smqd, writes a credentials file holding one
// key, starts a 3-node cluster of 3 shards with it, and returns once every
// shard is led by its preferred leader.
func settledDaemonCluster(t *testing.T, keyID, secret string) (bin, creds string, api []string, nodes []*clusterDaemon) {
	t.Helper()
	bin, err := buildDaemon(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	creds = filepath.Join(t.TempDir(), "credentials")
	if err := os.WriteFile(creds, []byte(keyID+" "+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	raft, api, peers := clusterAddrs(t, 3)
	nodes = make([]*clusterDaemon, 3)
	for i := range nodes {
		nodes[i] = startClusterDaemon(t, bin, i+1, raft[i], api[i], peers, creds, "--shards", "3")
	}
	waitCluster(t, "the cluster settles", 60*time.Second, func() error { return preferredLeadersReady(api) })
	return bin, creds, api, nodes
}
