package main

// The rolling restart of docs/operations.md ("Upgrading") with a node that
// comes back needing snapshots (shutdown audit, 2026-12-07).

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestDaemonRollingRestartWithALaggingNode follows the rolling restart
// as docs/operations.md wrote it ("stop a node (SIGTERM), start it, wait
// for /healthz 200 on it, go on to the next; with the hand-over, clients
// see no error from it") on a 3-node cluster whose first node stays down
// while 25 s of sends pass the leaders' checkpoints, so that it needs a
// snapshot when it is back. Found by the shutdown audit (2026-12-07):
// node 1's /healthz says 200 at once, before it installed its snapshots;
// node 2, stopped then, hands its shards to node 3, whose proposals can
// commit only once node 1 holds their entries, while node 1's snapshot
// waits for those proposals to settle (engine/replica_role.go
// exportFence, "proposals in flight did not settle within 10s", every
// 10 s): the shards took no change until node 2 was back, and every send
// to them hung (4 runs of 6). Now the leader gives those proposals up
// (engine/cluster giveUpIfAsked): their clients get a retryable 503 ("may
// or may not have run"), the snapshot goes, and within 60 s of node 2's
// stop 300 sends through node 3 succeed, none hanging (the client's
// timeout is 30 s). Seen failing with giveUpIfAsked doing nothing. And
// /healthz now says 200 only once node 1 caught up with every shard's
// leader (engine/cluster caughtup.go), so no proposal is given up and no
// send is answered 503 "may or may not have run" at all.
func TestDaemonRollingRestartWithALaggingNode(t *testing.T) {
	if testing.Short() {
		t.Skip("a minute of real daemons")
	}
	const keyID, secret = "rolling", "rolling-restart-secret-0123456789"
	bin, err := buildDaemon(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	creds := filepath.Join(t.TempDir(), "credentials")
	if err := os.WriteFile(creds, []byte(keyID+" "+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	raft, api, peers := clusterAddrs(t, 3)
	dirs := make([]string, 3)
	nodes := make([]*clusterDaemon, 3)
	for i := range nodes {
		dirs[i] = filepath.Join(t.TempDir(), fmt.Sprintf("data-%d", i+1))
		nodes[i] = startClusterDaemon(t, bin, i+1, raft[i], api[i], peers, creds, "--shards", "3", "--data-dir", dirs[i])
	}
	waitCluster(t, "the cluster settles", 60*time.Second, func() error { return preferredLeadersReady(api) })
	send := timedSigner(keyID, secret, 30*time.Second)
	var queues []string
	for k := range 9 {
		q := fmt.Sprintf("roll-%d", k)
		if st, body, err := send("PUT", "http://"+api[2]+"/queues/"+q, ""); err != nil || st != 201 {
			t.Fatalf("create %s: %d %s %v", q, st, body, err)
		}
		queues = append(queues, q)
	}
	// 1 KiB of hex per message: the snapshots take a moment to install.
	pad := make([]byte, 512)
	rand.Read(pad)
	msg := "<Message><MessageBody>" + hex.EncodeToString(pad) + "</MessageBody></Message>"
	var retried, unknown atomic.Int64
	load := func(vias []string, workers int, until func() bool, failures *[]string, mu *sync.Mutex, ok *atomic.Int64) *sync.WaitGroup {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 0; k < 1_000_000 && !until(); k++ {
					via := vias[(w+k)%len(vias)]
					q := queues[(w+k)%len(queues)]
					began := time.Now()
					st, body, err := send("POST", "http://"+via+"/queues/"+q+"/messages", msg)
					if err == nil && st == 201 {
						ok.Add(1)
						continue
					}
					if err == nil && st == 503 && strings.Contains(body, "did not run") {
						// A hand-over slower than --cluster-leader-wait
						// (seen under -race): retryable, and nothing ran.
						retried.Add(1)
						continue
					}
					if err == nil && st == 503 && strings.Contains(body, "may or may not have run") {
						// Proposals a leader gave up so that a member
						// gets its snapshot (engine/cluster
						// giveUpIfAsked): retryable.
						unknown.Add(1)
						continue
					}
					mu.Lock()
					*failures = append(*failures, fmt.Sprintf("send to %s via %s at %s (took %s): %d %.200s %v",
						q, via, began.UTC().Format("15:04:05.000"), time.Since(began).Round(time.Millisecond), st, body, err))
					mu.Unlock()
				}
			}()
		}
		return &wg
	}
	// Node 1 stops; 25 s of sends pass the leaders' checkpoints (every
	// 10 s), which compact their logs past what node 1 holds.
	nodes[0].stop(t)
	var mu sync.Mutex
	var failures []string
	var sent atomic.Int64
	end := time.Now().Add(25 * time.Second)
	load([]string{api[1], api[2]}, 6, func() bool { return time.Now().After(end) }, &failures, &mu, &sent).Wait()
	if len(failures) > 0 {
		t.Fatalf("%d sends failed with node 1 down, first: %s", len(failures), failures[0])
	}
	t.Logf("%d sends while node 1 was down", sent.Load())
	// Start it again and wait for /healthz 200, then stop the next node
	// while clients send through the third.
	nodes[0] = startClusterDaemon(t, bin, 1, raft[0], api[0], peers, creds, "--shards", "3", "--data-dir", dirs[0])
	waitCluster(t, "node 1's /healthz says 200", 60*time.Second, func() error {
		r, err := http.Get("http://" + api[0] + "/healthz")
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != 200 {
			return fmt.Errorf("%d %s", r.StatusCode, b)
		}
		return nil
	})
	var halt atomic.Bool
	sent.Store(0)
	wg := load([]string{api[2]}, 4, halt.Load, &failures, &mu, &sent)
	nodes[1].stop(t)
	after := sent.Load()
	limit := time.Now().Add(60 * time.Second)
	for sent.Load() < after+300 && time.Now().Before(limit) {
		mu.Lock()
		n := len(failures)
		mu.Unlock()
		if n > 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	halt.Store(true)
	wg.Wait()
	if len(failures) > 0 || sent.Load() < after+300 {
		for _, d := range nodes {
			t.Logf("node %d's log:\n%s", d.id, tail(d.stderr.String(), 4000))
		}
		if len(failures) > 0 {
			t.Fatalf("%d sends via node 3 failed after node 2's stop (%d succeeded after it), first: %s", len(failures), sent.Load()-after, failures[0])
		}
		t.Fatalf("only %d sends via node 3 within 60 s of node 2's stop", sent.Load()-after)
	}
	if n := retried.Load(); n > 0 {
		t.Logf("%d sends answered 503 (did not run, retryable) during a hand-over", n)
	}
	if n := unknown.Load(); n > 0 {
		// /healthz waits until node 1 caught up (engine/cluster
		// caughtup.go): no member waits for a snapshot when node 2 stops.
		t.Errorf("%d sends answered 503 (may or may not have run, retryable): proposals given up for a snapshot after /healthz said 200", n)
	}
	nodes[2].stop(t)
	nodes[0].stop(t)
}

// timedSigner returns a function that makes one request signed with the
// key pair, with a client timeout (a hung request is an error, and no
// t.Fatal runs outside the test's goroutine).
func timedSigner(keyID, secret string, timeout time.Duration) func(method, url, body string) (int, string, error) {
	client := &http.Client{Timeout: timeout}
	return func(method, url, body string) (int, string, error) {
		var rd io.Reader
		ctype := ""
		if body != "" {
			rd, ctype = strings.NewReader(body), "text/xml;charset=utf-8"
		}
		r, err := http.NewRequest(method, url, rd)
		if err != nil {
			return 0, "", err
		}
		date := time.Now().UTC().Format(http.TimeFormat)
		r.Header.Set("Date", date)
		r.Header.Set("x-mns-version", "2015-06-06")
		if ctype != "" {
			r.Header.Set("Content-Type", ctype)
		}
		signMNS(r, ctype, date, keyID, secret)
		resp, err := client.Do(r)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
}
