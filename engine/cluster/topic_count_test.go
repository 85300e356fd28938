package cluster

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/smqd/smqd/engine"
)

// Every replica counts a topic's publishes, those that deliver nowhere (no
// subscription) too: they are replicated as a publish header with no
// member. Before, only the leader counted them, so a follower answered
// MessageCount 0, and a failover lost the count.
func TestClusterTopicCountsPublishesDeliveredNowhere(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	c.onLeaderIdempotent("t", func(b *engine.Broker) error {
		_, err := b.CreateTopic("t", engine.DefaultTopicConfig())
		return err
	})
	const n = 20
	for range n {
		c.onLeader("t", func(b *engine.Broker) error {
			_, err := b.Publish("t", engine.PublishInput{Body: []byte("x")})
			return err
		})
	}
	c.countsEverywhere("t", n)
}

// A member that catches up from a snapshot counts a topic's publishes as
// the others do. The snapshot's counts are those of its index
// (engine/topic_count.go invariant 5), which the member names when it
// fetches the state (fetchSnapshot): the leader's live counts also held
// the publishes of the entries after the index, which the member then
// replayed and counted again (456 here for 400 publishes, before).
func TestClusterTopicCountAfterSnapshotInstall(t *testing.T) {
	c := startTestCluster(&testCluster{t: t, nodes: make([]*Node, 3), shards: 1, infoLogs: true})
	c.fillForSnapshots()
	c.onLeaderIdempotent("q", func(b *engine.Broker) error {
		_, err := b.CreateTopic("t", engine.DefaultTopicConfig())
		return err
	})
	const n = 400 // the last entries: past the snapshot's index, whatever it is
	for range n {
		c.onLeader("q", func(b *engine.Broker) error {
			_, err := b.Publish("t", engine.PublishInput{Body: []byte("x")})
			return err
		})
	}
	li, lb := c.leader("q")
	last, _ := lb.Applied()
	var mu sync.Mutex
	var asked []uint64
	testHookServeSnapshot = func(_ int, at uint64) {
		mu.Lock()
		asked = append(asked, at)
		mu.Unlock()
	}
	t.Cleanup(func() { testHookServeSnapshot = nil })
	wi := (li + 1) % 3
	c.wipe(wi)
	c.caughtUp(wi)
	if c.nodes[wi].snapshots.Load() == 0 {
		t.Fatal("the wiped node caught up without a snapshot: the test did not test that")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) == 0 || asked[len(asked)-1] == 0 || asked[len(asked)-1] >= last {
		t.Fatalf("snapshots asked for as of %v, the last publish's entry %d: the test needs publishes after the snapshot's index", asked, last)
	}
	c.countsEverywhere("t", n)
}

// A member asks for a snapshot as of its index; a leader of an earlier
// version reads no index and closes such a request. The member then asks
// again without the index, so that a rolling upgrade still catches a
// member up (its topic counts are then the leader's live ones, as
// before), and says so in its log.
func TestClusterSnapshotFromANodeOfAnEarlierVersion(t *testing.T) {
	var logs syncBuffer
	c := &testCluster{t: t, nodes: make([]*Node, 3), shards: 1}
	c.cfgTweak = func(i int, cfg *Config) {
		cfg.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(&logs, testWriter{t}), &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	startTestCluster(c)
	c.fillForSnapshots()
	testHookEarlierSnapshots = func() bool { return true }
	t.Cleanup(func() { testHookEarlierSnapshots = nil })
	li, _ := c.leader("q")
	wi := (li + 1) % 3
	c.wipe(wi)
	c.caughtUp(wi)
	if c.nodes[wi].snapshots.Load() == 0 {
		t.Fatal("the wiped node caught up without a snapshot: the test did not test that")
	}
	if !strings.Contains(logs.String(), "does not take a snapshot's index") {
		t.Fatal("the member did not say that it asked without the index")
	}
}

// countsEverywhere waits until every node's replica of shard 0 counts n
// publishes to topic.
func (c *testCluster) countsEverywhere(topic string, n int64) {
	c.t.Helper()
	for i := range c.nodes {
		eventually(c.t, fmt.Sprintf("node %d counts the publishes", i+1), func() error {
			b := c.nodes[i].Broker(0)
			if b == nil {
				return fmt.Errorf("rebuilding")
			}
			info, err := b.GetTopicAttributes(topic)
			if err != nil {
				return err
			}
			if info.MessageCount != n {
				return fmt.Errorf("MessageCount %d, want %d", info.MessageCount, n)
			}
			return nil
		})
	}
}
