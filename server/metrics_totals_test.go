package server

import (
	"testing"

	"github.com/smqd/smqd/engine"
)

// In a cluster a node reports the queues of the shards it leads, and a
// replica counts what it applies as a follower too: a queue whose lead came
// back to a node brought its whole history, and the node's totals took it
// again at each return (cluster ops audit, 2026-12-06: 4,825 sends summed
// over the nodes for 3,301). After the first scrape, the totals take from
// a queue that appears only what it counts from then on; a single node's
// totals are as before.
func TestClusterTotalsCountALeadThatComesBackOnce(t *testing.T) {
	q := func(name string, sent int64) engine.QueueStats { return engine.QueueStats{Name: name, Sent: sent} }
	c := &brokerCollector{seen: map[string]seenQueue{}}
	for i, s := range []struct {
		qs   []engine.QueueStats
		want int64
	}{
		{[]engine.QueueStats{q("a", 100)}, 100},            // the first scrape: what this process counted
		{[]engine.QueueStats{q("a", 110)}, 110},            // 10 more sent here
		{nil, 110},                                         // the lead moved away: retired
		{[]engine.QueueStats{q("a", 300)}, 110},            // back, with what the others counted meanwhile
		{[]engine.QueueStats{q("a", 305), q("b", 7)}, 115}, // 5 more; b appears (new or moved): from now on
		{[]engine.QueueStats{q("a", 305), q("b", 9)}, 117}, // 2 more in b
	} {
		if got := c.totals(s.qs, true); got.sent != s.want {
			t.Fatalf("scrape %d: sent total %d, want %d", i+1, got.sent, s.want)
		}
	}
	// A single node: a queue that goes and comes back (deleted and made
	// again, counters from zero) adds up as before.
	c = &brokerCollector{seen: map[string]seenQueue{}}
	for i, s := range []struct {
		qs   []engine.QueueStats
		want int64
	}{
		{[]engine.QueueStats{q("a", 100)}, 100},
		{nil, 100},
		{[]engine.QueueStats{q("a", 3)}, 103},
		{[]engine.QueueStats{q("a", 1)}, 104}, // made again between two scrapes
	} {
		if got := c.totals(s.qs, false); got.sent != s.want {
			t.Fatalf("single node, scrape %d: sent total %d, want %d", i+1, got.sent, s.want)
		}
	}
}
