package server

import (
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
)

// In a cluster a node reports the queues of the shards it leads, and a
// replica counts what it applies as a follower too: a queue whose lead came
// back to a node brought its whole history, and the node's totals took it
// again at each return (cluster ops audit, 2026-12-06: 4,825 sends summed
// over the nodes for 3,301). The totals take from a returning queue only
// what it counts from then on; a queue created since the last scrape
// counts from zero; a single node's totals are as before.
func TestClusterTotalsCountALeadThatComesBackOnce(t *testing.T) {
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	old := at.Add(-time.Hour)
	q := func(name string, sent int64, created time.Time) engine.QueueStats {
		return engine.QueueStats{Name: name, Sent: sent, Created: created}
	}
	c := &brokerCollector{seen: map[string]seenQueue{}}
	steps := []struct {
		qs   []engine.QueueStats
		want int64
	}{
		{[]engine.QueueStats{q("a", 100, old)}, 100}, // the first scrape: what this process counted
		{[]engine.QueueStats{q("a", 110, old)}, 110}, // 10 more sent here
		{nil, 110}, // the lead moved away: retired
		{[]engine.QueueStats{q("a", 300, old)}, 110},                                           // back, with what the others counted meanwhile
		{[]engine.QueueStats{q("a", 305, old), q("b", 7, at.Add(9*time.Minute))}, 110 + 5 + 7}, // 5 more; b new since the last scrape
	}
	for i, s := range steps {
		at = at.Add(2 * time.Minute)
		if got := c.totals(s.qs, true, at); got.sent != s.want {
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
		{[]engine.QueueStats{q("a", 100, old)}, 100},
		{nil, 100},
		{[]engine.QueueStats{q("a", 3, old)}, 103},
		{[]engine.QueueStats{q("a", 1, old)}, 104}, // made again between two scrapes
	} {
		if got := c.totals(s.qs, false, at.Add(time.Duration(i)*time.Minute)); got.sent != s.want {
			t.Fatalf("single node, scrape %d: sent total %d, want %d", i+1, got.sent, s.want)
		}
	}
}
