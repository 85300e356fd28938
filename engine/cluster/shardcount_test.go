package cluster

import (
	"strings"
	"testing"
	"time"
)

// TestClusterWipedNodeWithAnotherShardCountIsUnhealthy: a node's data
// directory refuses another --shards (checkShardCount), but an emptied
// directory has no count to check. Node 3, emptied and started with 1
// shard in a cluster of 2, was replaced in shard 0, answered Health nil,
// and never took part in shard 1, whose leader probed it for good: shard 1
// ran with two voters of three, and with one more node down its queues
// had no leader although two nodes of three ran (survive audit: real
// processes, /healthz 200 on node 3, then 503 "shard 1 has no leader" on
// node 2 with node 1 killed). It must say so: Health names the shard
// count, and so does its log.
func TestClusterWipedNodeWithAnotherShardCountIsUnhealthy(t *testing.T) {
	shards := 2
	c := startTestCluster(&testCluster{t: t, nodes: make([]*Node, 3), shards: 2,
		cfgTweak: func(i int, cfg *Config) {
			if i == 2 {
				cfg.Shards = shards
			}
		}})
	defer c.stopAll()
	c.preferredLeaders()
	shards = 1
	c.wipe(2)
	eventuallyWithin(t, 30*time.Second, "node 3 unhealthy, naming the shard count", func() error {
		err := c.nodes[2].Health()
		if err == nil || !strings.Contains(err.Error(), "--shards differs") {
			return &healthErr{err}
		}
		return nil
	})
}

// TestClusterDirectoryRefusesAnotherNodeID: node 1's directory started as
// node 7 must be refused at the start (checkNodeID). It started, ran
// unhealthy for good, and wrote 7 into its member book, which node 1
// then listed as a member (members audit, 2026-12-07).
func TestClusterDirectoryRefusesAnotherNodeID(t *testing.T) {
	c := startTestCluster(&testCluster{t: t, nodes: make([]*Node, 1), shards: 1})
	c.stop(0)
	cfg := c.config(0)
	cfg.NodeID = 7
	cfg.Peers = map[uint64]string{7: cfg.RaftListen}
	n, err := Start(cfg)
	if err == nil {
		n.Close()
		t.Fatal("node 1's directory started as node 7")
	}
	if !strings.Contains(err.Error(), "node 1's data directory, not node 7's") {
		t.Fatalf("start as node 7: %v", err)
	}
	c.start(0) // its own id still starts
}

type healthErr struct{ err error }

func (h *healthErr) Error() string {
	if h.err == nil {
		return "Health nil"
	}
	return "Health: " + h.err.Error()
}
