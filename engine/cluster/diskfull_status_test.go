package cluster

import (
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/wal"
)

// TestClusterShardsFailedOnFullDiskReportFull: a node whose every shard
// failed on a full disk (the log's writes met ENOSPC: a disk filled
// between two samples of the guard, on a file system whose segments are
// sparse) has no broker left to sample the disk while its shards wait to
// restart. It must still say its disk is full: in its status (GET
// /cluster, smqd_disk_full) and to its peers, which then hand it no lead.
// Once space is back its shards restart and it says so.
//
// Seen failing without the fix (handoff.go pollDiskFull skipped shards
// with no broker): node 1 reported disk_full false with 0 bytes free, and
// logged "disk space is back".
func TestClusterShardsFailedOnFullDiskReportFull(t *testing.T) {
	const shards = 2
	free := new(atomic.Int64)
	free.Store(1 << 40)
	ffs := wal.NewFaultFS(spaceFS{wal.OSFS(), free})
	c := newTestClusterWith(t, 3, shards, func(i int, o *engine.Options) {
		o.FreeSpaceReserve = 8 << 20
		if i == 0 {
			o.WAL.FS = ffs
		}
	})
	names, _, _ := c.queuePerShard()
	sendVia := func(name string, nodes ...int) {
		for _, i := range nodes {
			if b, _, err := c.nodes[i].Route(name); err == nil && b != nil {
				if q, err := b.Queue(name); err == nil {
					q.Send([]engine.SendEntry{{Body: []byte("x")}}, nil) // refusals are fine: this only drives writes
				}
				return
			}
		}
	}
	ffs.FailWrites(syscall.ENOSPC)
	eventually(t, "every shard of node 1 failed on ENOSPC", func() error {
		for sh, name := range names {
			f := c.nodes[0].shards[sh].failure.Load()
			if f == nil {
				sendVia(name, 0, 1, 2) // node 1's replica fails at its next write
				return fmt.Errorf("shard %d has not failed yet", sh)
			}
			if !errors.Is(f, syscall.ENOSPC) {
				return fmt.Errorf("shard %d failed with %v, want ENOSPC", sh, f)
			}
		}
		return nil
	})
	free.Store(0) // what the guard would now see, had the shards a broker
	eventually(t, "node 1 reports its disk full", func() error {
		if st := c.nodes[0].Status(); !st.DiskFull || !c.nodes[0].DiskFull() {
			return errors.New("node 1's status says disk_full false")
		}
		for i := 1; i < 3; i++ {
			if !c.nodes[i].peerFull(1) {
				return fmt.Errorf("node %d sees node 1's disk as not full", i+1)
			}
		}
		return nil
	})
	// Space is freed and the writes work again: the shards restart (at
	// their next attempt, up to restartMax away) and the node is not full.
	ffs.Disarm()
	free.Store(1 << 40)
	eventuallyWithin(t, restartMax+20*time.Second, "node 1's shards restarted and its disk not full", func() error {
		for sh := range shards {
			if f := c.nodes[0].shards[sh].failure.Load(); f != nil {
				return f
			}
		}
		if c.nodes[0].Status().DiskFull {
			return errors.New("node 1 still says its disk is full")
		}
		return nil
	})
}
