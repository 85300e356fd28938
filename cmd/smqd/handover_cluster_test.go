package main

// SIGTERM on a cluster node hands its leads over before it stops
// (engine/cluster/transfer.go HandOverLeads): real daemons, a client
// sending through the other nodes the whole time. No send fails, the
// stopping node says it handed every lead over, and the others lead every
// shard at once, with no election timeout to wait out.

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestDaemonClusterSIGTERMHandsLeadsOver(t *testing.T) {
	const keyID, secret = "handover", "hand-over-cluster-secret-0123456789"
	_, _, api, nodes := settledDaemonCluster(t, keyID, secret)
	do := signedDo(t, keyID, secret)
	// Queues on every shard: node 1 leads one of the three (the preferred
	// leaders), so it has a lead to hand over.
	var queues []string
	for k := range 9 {
		q := fmt.Sprintf("ho-%d", k)
		if st, body := do("PUT", "http://"+api[1]+"/queues/"+q, ""); st != 201 {
			t.Fatalf("create %s: %d %s", q, st, body)
		}
		queues = append(queues, q)
	}
	var (
		stop     atomic.Bool
		sends    atomic.Int64
		mu       sync.Mutex
		failures []string
	)
	var wg sync.WaitGroup
	for w := range 4 {
		via := api[1+w%2] // nodes 2 and 3, which keep running
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; !stop.Load() && k < 100000; k++ {
				q := queues[(w+k)%len(queues)]
				began := time.Now()
				st, body := do("POST", "http://"+via+"/queues/"+q+"/messages", "<Message><MessageBody>x</MessageBody></Message>")
				sends.Add(1)
				if st != 201 {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("send to %s via %s (at %s, took %s): %d %s",
						q, via, began.UTC().Format("15:04:05.000"), time.Since(began).Round(time.Millisecond), st, body))
					mu.Unlock()
				}
			}
		}()
	}
	waitSends := func(n int64) {
		limit := time.Now().Add(30 * time.Second)
		for sends.Load() < n {
			if time.Now().After(limit) {
				t.Fatalf("only %d sends within 30 s", sends.Load())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitSends(100)
	nodes[0].stop(t) // SIGTERM, a clean exit required
	waitSends(sends.Load() + 100)
	stop.Store(true)
	wg.Wait()
	if !strings.Contains(nodes[0].stderr.String(), "every lead handed over") {
		t.Errorf("node 1 did not hand its leads over:\n%s", tail(nodes[0].stderr.String(), 3000))
	}
	if len(failures) > 0 {
		for _, d := range nodes {
			t.Logf("node %d's log:\n%s", d.id, tail(d.stderr.String(), 60))
		}
		t.Fatalf("%d sends failed while node 1 stopped, first: %v", len(failures), failures[0])
	}
	// The others lead every shard.
	var st struct {
		Shards []struct {
			Leader uint64 `json:"leader"`
		} `json:"shards"`
	}
	if err := json.Unmarshal([]byte(httpGet(t, "http://"+api[1]+"/cluster")), &st); err != nil {
		t.Fatal(err)
	}
	for i, sh := range st.Shards {
		if sh.Leader == 1 || sh.Leader == 0 {
			t.Errorf("shard %d: leader %d after node 1 stopped", i, sh.Leader)
		}
	}
	for _, d := range nodes[1:] {
		d.stop(t)
	}
}
