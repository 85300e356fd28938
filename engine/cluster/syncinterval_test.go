package cluster

// The cluster in --sync interval and none beside --sync always: a kill -9
// of every node under slowed writes, after a disk failure, during
// leadership transfers; a failing and a full log (append.go invariant 4:
// a member acknowledges an entry or a vote only once it is written).

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/wal"
)

// TestClusterSpareStallWithSyncInterval: node 2's log file system fills
// up (wal.MemFS capacity: no new segment file can be made, so a roll
// stalls, wal.ErrSpareFailed) while sends run, in --sync always and in
// --sync interval, where the append worker now waits for the write
// (append.go invariant 4) and so meets the stall. Sends go on through the
// others without hanging, node 2 reports it, and once space is back node
// 2's replicas catch up with every acknowledged send.
func TestClusterSpareStallWithSyncInterval(t *testing.T) {
	for _, interval := range []bool{false, true} {
		t.Run(fmt.Sprintf("interval=%v", interval), func(t *testing.T) { spareStallRound(t, interval) })
	}
}

func spareStallRound(t *testing.T, interval bool) {
	fs := wal.NewMemFS()
	var cfgTweak func(int, *Config)
	if interval {
		cfgTweak = func(_ int, cfg *Config) { cfg.SyncAlways = false }
	}
	c := startTestCluster(&testCluster{t: t, nodes: make([]*Node, 3), shards: 3, cfgTweak: cfgTweak, tweak: func(i int, o *engine.Options) {
		if i == 1 {
			o.WAL.FS = fs
		}
		if interval {
			o.WAL.Sync, o.WAL.SyncInterval = wal.SyncInterval, 50*time.Millisecond
		}
		// No checkpoint recycles a segment into a spare.
		o.CheckpointInterval, o.CheckpointRecords, o.CheckpointBytes = time.Hour, 1<<40, 1<<40
	}})
	names, sent, _ := c.queuePerShard()
	body := make([]byte, 8<<10) // incompressible
	crand.Read(body)
	send := func(name string) error {
		_, q := c.route(name)
		if q == nil {
			return errors.New("no leader")
		}
		if _, err := q.Send([]engine.SendEntry{{Body: body}}, nil); err != nil {
			return err
		}
		sent[name]++
		return nil
	}
	for _, name := range names {
		for range 5 {
			eventually(t, "send to "+name, func() error { return send(name) })
		}
	}
	fs.SetCapacity(fs.Used() + 32<<10) // no new 256 KiB segment file fits
	t.Logf("node 2's file system full at %d bytes", fs.Used())
	for round := range 120 {
		for _, name := range names {
			eventually(t, fmt.Sprintf("send %d to %s", round, name), func() error { return send(name) })
		}
	}
	stalled := false
	for sh := range c.shards {
		t.Logf("node 2 shard %d: files %v", sh, fs.Files(filepath.Join(c.dirs[1], "shards", fmt.Sprint(sh), "wal")))
	}
	t.Logf("used %d", fs.Used())
	done := make(chan error, 1)
	go func() { done <- c.nodes[1].Health() }()
	select {
	case err := <-done:
		t.Logf("node 2's health with a full disk: %v", err)
		stalled = err != nil
	case <-time.After(15 * time.Second):
		t.Fatal("node 2's Health hangs")
	}
	if !stalled {
		t.Logf("note: node 2 reports no failure (capacity %d, used %d)", fs.Used()+32<<10, fs.Used())
	}
	fs.SetCapacity(0)
	for _, name := range names {
		eventuallyWithin(t, restartMax+30*time.Second, "node 2 catches up on "+name, func() error {
			info, err := c.counts(1, name)
			if err != nil {
				return err
			}
			if got := info.Active + info.Inactive + info.Delayed; got < int64(sent[name]) {
				return fmt.Errorf("%d of %d", got, sent[name])
			}
			return nil
		})
	}
	eventuallyWithin(t, restartMax+30*time.Second, "node 2 healthy", c.nodes[1].Health)
}

// TestClusterKill9WithSyncNone is TestClusterKill9WithSyncInterval with
// --sync none.
func TestClusterKill9WithSyncNone(t *testing.T) {
	lossRounds(t, 10, lossCase{kill: true, mode: wal.SyncNone})
}

// TestClusterKill9WithSyncIntervalAfterADiskFailure: a round of
// TestClusterKill9WithSyncInterval in which node 2's log writes start
// failing with ENOSPC a moment into the load (its shards leave their
// groups and back off, the others go on), then every node is killed.
// Restarted from the images (the fault gone), nothing acknowledged is
// lost.
func TestClusterKill9WithSyncIntervalAfterADiskFailure(t *testing.T) {
	for r := range 3 {
		t.Run(fmt.Sprint(r), func(t *testing.T) {
			var first *wal.MemFS
			var ffs *wal.FaultFS
			wrap := func(i int, m *wal.MemFS) wal.FS {
				if i != 1 || (first != nil && m != first) {
					return m
				}
				if first == nil {
					first, ffs = m, wal.NewFaultFS(m)
				}
				return ffs
			}
			// Armed once the load runs (not at a time after the start:
			// under -race the nodes bootstrapped after it).
			load := func(ctx context.Context, _ *testCluster) {
				select {
				case <-ctx.Done():
				case <-time.After(time.Duration(100+50*r) * time.Millisecond):
					ffs.FailWrites(syscall.ENOSPC)
				}
			}
			lossRound(t, uint64(r), lossCase{kill: true, mode: wal.SyncInterval, wrap: wrap, load: load})
		})
	}
}

// TestClusterKill9WithSyncIntervalDuringTransfers: rounds of
// TestClusterKill9WithSyncInterval after the shards' leads moved every
// 20-60 ms for the first 200 ms (leadership transfers: elections, so votes
// and new terms are persisted and acknowledged under slow writes too).
func TestClusterKill9WithSyncIntervalDuringTransfers(t *testing.T) {
	kill9DuringTransfers(t, wal.SyncInterval)
}

// Control: the same with --sync always.
func TestClusterKill9WithSyncAlwaysDuringTransfers(t *testing.T) {
	kill9DuringTransfers(t, wal.SyncAlways)
}

func kill9DuringTransfers(t *testing.T, mode wal.SyncMode) {
	var moves atomic.Int64
	load := func(ctx context.Context, c *testCluster) {
		rnd := mrand.New(mrand.NewPCG(7, 7))
		// Moves only in the first 200 ms (the kill comes 300 to 1000 ms
		// in): a step-down may rebuild its broker, which rewrites the
		// index directory that lossRound copies with cp before the kill,
		// assuming it does not change.
		until := time.Now().Add(200 * time.Millisecond)
		for ctx.Err() == nil && time.Now().Before(until) {
			sh := rnd.IntN(c.shards)
			for li, n := range c.nodes {
				if n != nil && n.Leading(sh) {
					to := uint64((li+1+rnd.IntN(2))%len(c.nodes) + 1)
					s := n.shards[sh]
					s.do(func() { s.rn.TransferLeader(to) })
					moves.Add(1)
					break
				}
			}
			time.Sleep(time.Duration(20+rnd.IntN(40)) * time.Millisecond)
		}
	}
	lossRounds(t, 10, lossCase{kill: true, mode: mode, load: load})
	t.Logf("%d transfers asked", moves.Load())
}
