package chaos

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestFailover measures failover under load, by hand:
//
//	SMQD_CHAOS_FAILOVER=20 go test -run TestFailover -v ./engine/cluster/chaos
//
// or, with SMQD_CHAOS_FAILOVER_FAULT=isolate, cuts it off instead (a host
// that vanishes: no connection closes, the survivors wait out an election
// timeout).
//
// Each repetition kills (SIGKILL) the leader of a queue's shard while
// producers and consumers run through every node, and measures the time
// from the kill to the first successful send to that queue, through a
// surviving node, among sends invoked after the kill. It reports the
// median and the maximum; it asserts no speed, only that no request ran
// into its client timeout and that the history holds.
func TestFailover(t *testing.T) {
	reps, _ := strconv.Atoi(os.Getenv("SMQD_CHAOS_FAILOVER"))
	if reps <= 0 {
		t.Skip("a measurement run by hand: SMQD_CHAOS_FAILOVER=20 (repetitions)")
	}
	// SMQD_CHAOS_FAILOVER_FAULT=isolate cuts the leader's links both ways
	// (a host that vanishes: no connection closes) instead of killing it.
	isolate := os.Getenv("SMQD_CHAOS_FAILOVER_FAULT") == "isolate"
	verb := "killed"
	if isolate {
		verb = "isolated"
	}
	const shards = 3
	c := startCluster(t, 3, shards)
	queues := queuesOnShards(shards)
	w := newWorkload(c, queues)
	stop := runLoad(t, w, 30*time.Second)
	probe := w.H // the probes are sends like any other: checked too
	var took []time.Duration
	for rep := 0; rep < reps && !t.Failed(); rep++ {
		if err := c.WaitHealthy(90 * time.Second); err != nil {
			t.Fatal(err)
		}
		q := queues[rep%len(queues)]
		leader := c.Leader(rep % len(queues))
		if leader == 0 {
			t.Fatalf("no leader of shard %d", rep%len(queues))
		}
		via := leader%len(c.Nodes) + 1 // a survivor
		cl := NewClient(c.Nodes[via-1].API, c.AccessID, c.Secret, 15*time.Second)
		start := time.Now()
		if isolate {
			c.Isolate(leader, true, true)
		} else {
			c.Kill(leader)
		}
		var d time.Duration
		for k := 0; d == 0 && time.Since(start) < 60*time.Second; k++ {
			op := probe.Invoke(Op{Process: -2, Kind: OpSend, Node: via, Queue: q, Body: fmt.Sprintf("probe-%d-%d", rep, k)})
			rctx, rcancel := context.WithTimeout(context.Background(), 15*time.Second)
			id, err := cl.Send(rctx, q, op.Body)
			rcancel()
			probe.Done(op, err, func(o *Op) { o.MessageID = id })
			if err == nil {
				d = op.Complete.Sub(start)
			}
		}
		cl.Close()
		if d == 0 {
			t.Fatalf("repetition %d: no send through node %d succeeded within 60 s after node %d was %s", rep, via, leader, verb)
		}
		took = append(took, d)
		t.Logf("repetition %d: %s node %d (leader of %s's shard); first send through node %d after %v", rep+1, verb, leader, q, via, d.Round(time.Millisecond))
		if isolate {
			c.Heal()
		} else if err := c.StartNode(leader); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	r := finish(t, c, w)
	slices.Sort(took)
	var ms []string
	for _, d := range took {
		ms = append(ms, fmt.Sprint(d.Milliseconds()))
	}
	t.Logf("failover: %d faults (%s) of a shard leader; time to the first successful send through a survivor: p50 %v, max %v (all, ms: %s)",
		len(took), verb, took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond), strings.Join(ms, " "))
	if r.TimedOut > 0 {
		t.Errorf("%d requests ran into their client timeout (15 s)", r.TimedOut)
	}
}
