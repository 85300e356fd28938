package ctl

// Dead-letter audit (2026-12-07): a dead-letter queue on another shard
// than its source, its messages over the wire, and smqctl queue redrive,
// all through a node that leads neither shard.

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/smqd/smqd/cmd/internal/testnet"
)

func TestClusterRedriveThroughNeitherLeader(t *testing.T) {
	c := &testCluster{raft: map[uint64]string{}}
	for i := range 3 {
		c.raft[uint64(i+1)] = testnet.FreeLoopback(t) // fixed ports met other processes' (an audit's)
	}
	for i := range 3 {
		c.start(t, uint64(i+1), false)
	}
	deadline := time.Now().Add(20 * time.Second)
	for c.nodes[0].Health() != nil || c.nodes[1].Health() != nil || c.nodes[2].Health() != nil {
		if time.Now().After(deadline) {
			t.Fatal("no leaders")
		}
		time.Sleep(20 * time.Millisecond)
	}
	const src = "rd-src"
	dlq := ""
	for k := 0; dlq == ""; k++ {
		if n := "rd-dlq-" + strconv.Itoa(k); c.nodes[0].ShardOf(n) != c.nodes[0].ShardOf(src) {
			dlq = n
		}
	}
	leads := func(i int, q string) bool {
		b, _, err := c.nodes[i].Route(q)
		return err == nil && b != nil
	}
	x := -1
	for i := range 3 {
		if !leads(i, src) && !leads(i, dlq) {
			x = i
		}
	}
	if x < 0 {
		t.Skip("no node leads neither shard")
	}
	t.Logf("through node %d, which leads neither %s nor %s", x+1, src, dlq)
	ctl := c.ctl(t, x)
	ctl.ok("queue", "create", dlq)
	ctl.ok("queue", "create", src, "--visibility-timeout", "1", "--dead-letter-queue", dlq, "--max-receive-count", "1")
	const n = 64
	ids := map[string]string{}
	for i := range n {
		out := ctl.ok("send", src, fmt.Sprintf("m-%d", i), "--priority", strconv.Itoa(i%16+1), "--property", "i:NUMBER="+strconv.Itoa(i), "--json")
		ids[fmt.Sprintf("m-%d", i)] = decodeJSON[struct {
			ID string `json:"message_id"`
		}](t, out).ID
	}
	for got := 0; got < n; {
		got += len(decodeJSON[[]Message](t, ctl.ok("receive", src, "--count", "16", "--json")))
	}
	time.Sleep(1200 * time.Millisecond)
	if ms := decodeJSON[[]Message](t, ctl.ok("receive", src, "--count", "16", "--json")); len(ms) != 0 {
		t.Fatalf("received again: %+v", ms[0])
	}
	// The dead letters over the wire. A hop that failed (the target's
	// leader slow to answer on a loaded machine) leaves the rest of its
	// receive's moves hidden in the source for its visibility timeout,
	// and only another receive of the source moves them: it hands none
	// out.
	var dl []Message
	deadline = time.Now().Add(20 * time.Second)
	for len(dl) < n {
		if ms := decodeJSON[[]Message](t, ctl.ok("receive", src, "--count", "16", "--json")); len(ms) != 0 {
			t.Fatalf("received again: %+v", ms[0])
		}
		dl = append(dl, decodeJSON[[]Message](t, ctl.ok("receive", dlq, "--count", "16", "--json"))...)
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d in %s", len(dl), n, dlq)
		}
	}
	for _, m := range dl {
		var i int
		fmt.Sscanf(m.MessageBody, "m-%d", &i)
		if m.Priority != i%16+1 || m.DequeueCount != 1 || m.system(sysDLQOriginID) != ids[m.MessageBody] ||
			m.system(sysDLQSourceArn) != "acs:mns:local:0:/queues/"+src || len(m.UserProperties) != 1 || m.UserProperties[0].Value != strconv.Itoa(i) {
			t.Errorf("dead letter %+v", m)
		}
	}
	// Visible again, then the redrive through node x.
	time.Sleep(31 * time.Second) // the dead-letter queue's default 30 s visibility
	res := decodeJSON[redriveResult](t, ctl.ok("queue", "redrive", dlq, "--json"))
	if res.Moved != n || res.To[src] != n || len(res.Left) != 0 {
		t.Errorf("redrive through node %d: %+v", x+1, res)
	}
	back := decodeJSON[[]Message](t, ctl.ok("peek", src, "--count", "16", "--json"))
	for _, m := range back {
		var i int
		fmt.Sscanf(m.MessageBody, "m-%d", &i)
		if m.Priority != i%16+1 || len(m.SystemProperties) != 0 || len(m.UserProperties) != 1 {
			t.Errorf("redriven %+v", m)
		}
	}
	info := decodeJSON[Queue](t, ctl.ok("queue", "get", src, "--json"))
	dinfo := decodeJSON[Queue](t, ctl.ok("queue", "get", dlq, "--json"))
	if info.ActiveMessages != n || dinfo.ActiveMessages+dinfo.InactiveMessages != 0 {
		t.Errorf("after the redrive: %s %d active, %s %d+%d", src, info.ActiveMessages, dlq, dinfo.ActiveMessages, dinfo.InactiveMessages)
	}
}
