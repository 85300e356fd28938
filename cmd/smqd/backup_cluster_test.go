package main

// A cluster's backup and its restore with real daemons, as an operator
// would run them: GET /backup through any node, every node stopped, `smqd
// restore` of the one file on each member of a new cluster (new
// directories, new addresses), the new cluster started with the restore's
// flags, and every message there.

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestDaemonClusterBackupAndRestore(t *testing.T) {
	const keyID, secret = "backup", "cluster-backup-secret-0123456789"
	bin, creds, api, nodes := settledDaemonCluster(t, keyID, secret)
	n := len(nodes)
	do := signedDo(t, keyID, secret)
	want := map[string][]string{}
	for k := range 6 {
		q := fmt.Sprintf("bk-%d", k)
		if st, body := do("PUT", "http://"+api[1]+"/queues/"+q, ""); st != 201 {
			t.Fatalf("create %s: %d %s", q, st, body)
		}
		for m := range 5 {
			b := fmt.Sprintf("%s-m%d", q, m)
			if st, body := do("POST", "http://"+api[k%n]+"/queues/"+q+"/messages", "<Message><MessageBody>"+b+"</MessageBody></Message>"); st != 201 {
				t.Fatalf("send to %s: %d %s", q, st, body)
			}
			want[q] = append(want[q], b)
		}
	}
	resp := signedRequest(t, "GET", "http://"+api[2]+"/backup", keyID, secret)
	backup, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /backup: %d, %v: %.300s", resp.StatusCode, err, backup)
	}
	file := filepath.Join(t.TempDir(), "cluster.smqd")
	if err := os.WriteFile(file, backup, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, d := range nodes {
		d.stop(t)
	}

	// Without --node-id: told it is a cluster's backup, not that the
	// binary is too old (docs audit, 2026-12-06).
	if out, err := exec.Command(bin, "restore", "--from", file, "--data-dir", filepath.Join(t.TempDir(), "single")).CombinedOutput(); err == nil ||
		!strings.Contains(string(out), "this is a cluster's backup") || strings.Contains(string(out), "this version reads") {
		t.Errorf("a cluster's backup restored as a single node's: %v\n%s", err, out)
	}
	raft2, api2, peers2 := clusterAddrs(t, n)
	// The shards open with the sizes given (review N: a cluster's restore
	// ignored them, and could not fit a small volume).
	if out, err := exec.Command(bin, "restore", "--from", file, "--data-dir", filepath.Join(t.TempDir(), "small"),
		"--node-id", "1", "--cluster-peers", peers2, "--free-space-reserve", "1000000000000000000").CombinedOutput(); err == nil ||
		!strings.Contains(string(out), "restore again with the values smqd will start with") {
		t.Errorf("a cluster's restore whose sizes do not fit the free space: %v\n%s", err, out)
	}
	dirs := make([]string, n)
	for i := range n {
		dirs[i] = filepath.Join(t.TempDir(), "restored")
		out, err := exec.Command(bin, "restore", "--from", file, "--data-dir", dirs[i],
			"--node-id", fmt.Sprint(i+1), "--cluster-peers", peers2).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "3 shards, 6 queues, 30 messages") {
			t.Fatalf("smqd restore on member %d: %v\n%s", i+1, err, out)
		}
	}
	for i := range n {
		nodes[i] = startClusterDaemon(t, bin, i+1, raft2[i], api2[i], peers2, creds, "--shards", "3", "--data-dir", dirs[i])
	}
	waitCluster(t, "the restored cluster settles", 60*time.Second, func() error { return preferredLeadersReady(api2) })
	bodyRE := regexp.MustCompile(`<MessageBody>([^<]*)</MessageBody>`)
	for q, bodies := range want {
		var got []string
		for range 10 {
			st, body := do("GET", "http://"+api2[0]+"/queues/"+q+"/messages?numOfMessages=16", "")
			if st == 404 && strings.Contains(body, "MessageNotExist") {
				break
			}
			if st != 200 {
				t.Fatalf("receive from %s: %d %s", q, st, body)
			}
			for _, m := range bodyRE.FindAllStringSubmatch(body, -1) {
				got = append(got, m[1])
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, bodies) {
			t.Fatalf("the restored %s holds %v, want %v", q, got, bodies)
		}
	}
	for _, d := range nodes {
		d.stop(t)
	}
}
