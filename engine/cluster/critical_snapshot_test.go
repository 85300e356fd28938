package cluster

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3/tracker"

	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/wal"
)

// TestClusterCriticallyFullFollowerCatchesUpFromASnapshot: docs/operations.md,
// "A full disk on one node": a follower whose disk is critically full takes
// no replicated entries, and "once it has room again it catches up". While
// it was critical its leader compacted past it and sent it a snapshot
// (MsgSnap), which it dropped (shard.go step) without telling the leader.
// etcd raft's leader then waits for that snapshot's report and sends no
// other while the connection between them stays up; the stuck-follower
// probe (stuck.go) covers StateReplicate only. With real processes (survive
// audit: three smqd, one on a full 128 MiB tmpfs, then freed) the member
// stayed 19,589 entries behind in one shard for minutes, its leader showing
// it in state "snapshot", while its /healthz said ok and its caught_up
// true.
func TestClusterCriticallyFullFollowerCatchesUpFromASnapshot(t *testing.T) {
	// fullDiskCluster, with node 2's log in memory: a snapshot install
	// moves the log's files through Options.WAL.FS, and one over the
	// same paths as the directory (wal.OSFS) makes the swap's rename fail.
	free := new(atomic.Int64)
	free.Store(1 << 40)
	c := startTestCluster(&testCluster{t: t, nodes: make([]*Node, 3), shards: 1,
		tweak: func(i int, o *engine.Options) {
			o.FreeSpaceReserve = 8 << 20
			if i == 1 {
				o.WAL.FS = spaceFS{wal.NewMemFS(), free}
			}
		}})
	defer c.stopAll()
	names, sent, send := c.queuePerShard()
	name := names[0]
	free.Store(1 << 20)
	eventually(t, "node 2 critical, leading nothing", func() error {
		if b := c.nodes[1].Broker(0); b != nil && !b.DiskCritical() {
			send(name) // an append makes the broker sample
			return fmt.Errorf("not critical yet")
		}
		if c.nodes[1].shards[0].ready.Load() {
			return fmt.Errorf("node 2 leads")
		}
		return nil
	})
	// Enough for checkpoints, and a log compacted past node 2 (the test
	// cluster keeps 20 entries for the followers), until its leader waits
	// to send it a snapshot.
	li := -1
	eventuallyWithin(t, 60*time.Second, "node 2 waiting for a snapshot", func() error {
		for range 50 {
			if err := send(name); err != nil {
				return err
			}
		}
		li, _ = c.leader(name)
		s := c.nodes[li].shards[0]
		var state tracker.StateType
		done := make(chan struct{})
		s.do(func() {
			state = s.rn.Status().Progress[2].State
			close(done)
		})
		<-done
		if state != tracker.StateSnapshot {
			return fmt.Errorf("node 2 is in state %v at its leader", state)
		}
		return nil
	})
	free.Store(1 << 40)
	c.holdsAll(1, name, sent[name])
}
