package cluster

// docs/operations.md, "What survives what", a node's power lost (one node):
// "with --sync interval too, since the other two hold every acknowledged
// change: that node may hold less than it acknowledged, so the others
// replace it in every shard at its start and it catches up" (append.go
// invariant 4, rejoin.go). TestClusterPowerLoss loses power on every node
// in --sync always, the kill -9 tests lose nothing a member acknowledged,
// and TestClusterOlderCopyOfANodeIsReplaced puts back a copy of a stopped
// node's directory (--sync always): none loses the unflushed tail of one
// member that acknowledged it, which is what --sync interval allows.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/wal"
)

// TestClusterOneNodesPowerLossWithSyncInterval: a follower whose log
// (--sync interval, an interval longer than the test, no checkpoint: nothing
// it acknowledged is flushed) loses power keeps only what was flushed at
// its start. Started again on that image, it must be replaced, catch up
// with every message, and be a voter again; the leader's queue keeps them
// all. Without the replacement the leader takes it as holding what it
// acknowledged, never sends those entries again, and it never catches up
// (or panics on a commit index beyond its log).
func TestClusterOneNodesPowerLossWithSyncInterval(t *testing.T) {
	pl := int(preferredLeader(0, []uint64{1, 2, 3})) - 1
	victim := (pl + 1) % 3
	fss := []*wal.MemFS{wal.NewMemFS(), wal.NewMemFS(), wal.NewMemFS()}
	var image *wal.MemFS // the victim's log after the power loss
	c := startTestCluster(&testCluster{t: t, nodes: make([]*Node, 3), shards: 1,
		cfgTweak: func(_ int, cfg *Config) { cfg.SyncAlways = false },
		tweak: func(i int, o *engine.Options) {
			o.WAL.FS = fss[i]
			o.WAL.Sync, o.WAL.SyncInterval = wal.SyncInterval, time.Hour
			if i == victim {
				// Nothing flushes its log while it runs: no checkpoint
				// (which syncs first), no segment roll.
				o.CheckpointInterval, o.CheckpointRecords, o.CheckpointBytes = time.Hour, 1<<40, 1<<40
				o.WAL.SegmentBytes = 64 << 20
				if image != nil {
					o.WAL.FS = image
				}
			}
		}})
	n := 100 // batches of 16
	if testing.Short() {
		n = 40
	}
	c.createQ()
	c.sendBatches("w", n)
	want := int64(n * 16)
	c.holds(victim, want, 20*time.Second) // it applied, so acknowledged, every one
	if li, _ := c.leader("q"); li == victim {
		t.Fatalf("node %d leads: the test wants a follower", victim+1)
	}

	// The victim's power fails: its directory as it is, then its log as
	// flushed (CrashClone(nil): nothing written since the last fsync).
	saved := filepath.Join(t.TempDir(), "saved")
	if out, err := exec.Command("cp", "-a", c.dirs[victim], saved).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	image = wal.CrashCloneAll(nil, fss[victim])[0]
	c.stop(victim)
	if err := os.RemoveAll(c.dirs[victim]); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", saved, c.dirs[victim]).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	c.start(victim)

	c.holds(victim, want, 30*time.Second)
	eventually(t, fmt.Sprintf("node %d a voter of every shard again", victim+1), func() error {
		for _, nd := range c.nodes {
			for _, s := range nd.shards {
				if v := s.st.votersNow(); !slices.Contains(v, uint64(victim+1)) || len(v) != 3 {
					return fmt.Errorf("node %d, shard %d: voters %v", nd.cfg.NodeID, s.id, v)
				}
			}
		}
		return nil
	})
	// It was replaced (so the loss was real, and found). It used to be
	// told by a snapshot installed, but a fresh place in the shard catches
	// up from the log when the leader has not compacted it past what the
	// member kept yet (2 runs of 4 under -short, stop 65).
	if k := c.nodes[victim].replacedTimes.Load(); k == 0 {
		t.Fatalf("node %d caught up after its power loss without being replaced: it lost nothing (the test tested nothing)", victim+1)
	}
	t.Logf("node %d: %d snapshots installed after its power loss", victim+1, c.nodes[victim].snapshots.Load())
	li, _ := c.leader("q")
	c.holds(li, want, 10*time.Second)
}
