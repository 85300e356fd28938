package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/wal"
)

// TestClusterLeaderLogWriteFails: a leader's log starts failing with no
// warning (its free-space figure still shows room, so no hand-over ran
// first: a disk that fills within the second between two samples, or a
// device that fails). The failed shards must not keep the
// failing node as their leader: the others elect a leader and take sends,
// no request routed to the failed node's replica hangs, nothing
// acknowledged is lost, and once the writes succeed again the node
// serves its shards again without a restart.
//
// Two faults: every write fails with ENOSPC, or every fsync fails with
// EIO (a failing device). Opening the log writes and fsyncs its tail again
// (the engine's start-up resync), so under either the shards stay out,
// backing off, until the fault clears; with three of them waiting, GET
// /cluster used to hang.
//
// A third fault is the node's shared flush failing with EIO
// (wal.SharedSyncFS, the default with --sync always): every shard of the
// node whose log held unsynced writes fails, and each restarts once the
// flushes succeed again. (Its flush here only fails or not: this test is
// about availability, and the power-loss test covers what a flush makes
// durable.)
//
// The first two run with --sync interval too ("interval/..."), where the
// append worker waits for the write (append.go invariant 4).
func TestClusterLeaderLogWriteFails(t *testing.T) {
	for _, interval := range []bool{false, true} {
		for _, f := range []struct {
			name string
			arm  func(*wal.FaultFS)
		}{
			{"writes-ENOSPC", func(f *wal.FaultFS) { f.FailWrites(syscall.ENOSPC) }},
			{"fsyncs-EIO", func(f *wal.FaultFS) { f.FailSyncs(syscall.EIO) }},
		} {
			name := f.name
			if interval {
				name = "interval/" + name
			}
			t.Run(name, func(t *testing.T) {
				ffs := wal.NewFaultFS(wal.OSFS())
				testLeaderLogFails(t, ffs, func() { f.arm(ffs) }, ffs.Disarm, interval)
			})
		}
	}
	t.Run("shared-flush-EIO", func(t *testing.T) {
		var failing atomic.Bool
		shared := wal.NewSharedSync(wal.OSFS(), func() error {
			if failing.Load() {
				return &os.PathError{Op: "syncfs", Path: "node 1", Err: syscall.EIO}
			}
			return nil
		})
		testLeaderLogFails(t, shared, func() { failing.Store(true) }, func() { failing.Store(false) }, false)
	})
}

// testLeaderLogFails runs node 1 on fs; arm makes its log fail, disarm
// heals it; with --sync interval if interval.
func testLeaderLogFails(t *testing.T, fs wal.FS, arm, disarm func(), interval bool) {
	const shards = 3
	var cfgTweak func(int, *Config)
	if interval {
		cfgTweak = func(_ int, cfg *Config) { cfg.SyncAlways = false }
	}
	c := startTestCluster(&testCluster{t: t, nodes: make([]*Node, 3), shards: shards, cfgTweak: cfgTweak, tweak: func(i int, o *engine.Options) {
		if i == 0 {
			o.WAL.FS = fs
		}
		if interval {
			o.WAL.Sync, o.WAL.SyncInterval = wal.SyncInterval, 50*time.Millisecond
		}
	}})
	names, sent, _ := c.queuePerShard()
	// sendVia sends one message through the first of nodes that leads
	// name's shard, and counts it in sent once acknowledged.
	sendVia := func(name string, nodes ...int) error {
		for _, i := range nodes {
			b, _, err := c.nodes[i].Route(name)
			if err != nil || b == nil {
				continue
			}
			return sendCounted(b, name, sent)
		}
		return errors.New("no leader among the nodes asked")
	}
	eventually(t, "node 1 leads a shard", func() error {
		for sh := range shards {
			if c.nodes[0].shards[sh].ready.Load() {
				return nil
			}
		}
		return errors.New("not yet")
	})
	for _, name := range names {
		for range 5 {
			eventually(t, "send to "+name, func() error { return sendVia(name, 0, 1, 2) })
		}
	}
	arm()
	// Node 1's own replicas answer within a bound: a send routed to them
	// fails (or succeeds, if it was in before the first failed write), and
	// never hangs.
	for _, name := range names {
		b, _, err := c.nodes[0].Route(name)
		if err != nil || b == nil {
			continue
		}
		done := make(chan error, 1)
		go func() {
			q, err := b.Queue(name)
			if err == nil {
				_, err = q.Send([]engine.SendEntry{{Body: []byte("maybe")}}, nil)
			}
			done <- err
		}()
		select {
		case err := <-done:
			t.Logf("send to %s on node 1 after its writes failed: %v", name, err)
		case <-time.After(15 * time.Second):
			t.Fatalf("a send to %s routed to node 1 hangs after its log writes failed", name)
		}
	}
	for _, name := range names {
		for range 5 {
			eventually(t, "send to "+name+" through nodes 2 and 3", func() error { return sendVia(name, 1, 2) })
		}
	}
	eventually(t, "node 1 routes no queue to its failed replicas", func() error {
		for _, name := range names {
			if b, _, _ := c.nodes[0].Route(name); b != nil {
				return fmt.Errorf("node 1 still takes %s", name)
			}
		}
		return nil
	})
	// While its writes fail, node 1's shards try to restart with their
	// backoff and fail; the failure shows in its health and status.
	eventually(t, "node 1 reports the failure", func() error {
		if err := c.nodes[0].Health(); err == nil || !(errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EIO)) {
			return fmt.Errorf("health: %v", err)
		}
		for _, sh := range c.nodes[0].Status().Shards {
			if sh.Failure != "" {
				return nil
			}
		}
		return errors.New("no shard in the status shows the failure")
	})
	// While a shard of node 1 waits to restart, node 1 forwards its
	// requests to the leader the others elected, so a client whose one
	// endpoint is node 1 goes on.
	forwarded := map[string]bool{}
	eventually(t, "node 1 forwards every queue while its shard waits to restart", func() error {
		for _, name := range names {
			s := c.nodes[0].shards[c.nodes[0].ShardOf(name)]
			if b, lead, err := c.nodes[0].Route(name); s.failure.Load() != nil && b == nil && err == nil && lead != 1 {
				forwarded[name] = true
			}
			if !forwarded[name] {
				sendVia(name, 1, 2)
			}
		}
		if len(forwarded) < len(names) {
			return fmt.Errorf("forwarded only %v while waiting", forwarded)
		}
		return nil
	})
	for _, name := range names {
		eventually(t, "send to "+name+" through nodes 2 and 3", func() error { return sendVia(name, 1, 2) })
	}
	// The writes succeed again: node 1 catches up and takes its share,
	// each shard at its next attempt (up to restartMax away).
	disarm()
	eventuallyWithin(t, restartMax+20*time.Second, "node 1's shards restarted", func() error {
		for sh := range shards {
			if f := c.nodes[0].shards[sh].failure.Load(); f != nil {
				return f
			}
		}
		return nil
	})
	for _, name := range names {
		c.holdsAll(0, name, sent[name])
		c.holdsAll(1, name, sent[name])
	}
	eventually(t, "node 1 healthy", c.nodes[0].Health)
	for _, name := range names {
		eventually(t, "send to "+name+" through any node", func() error { return sendVia(name, 0, 1, 2) })
	}
}

// TestClusterStatusWithStalledLoops: Status answers within its bound when
// several shard loops do not (a shard waiting to restart, or one busy
// with a long step), reporting their role as unknown. Its one-second
// deadline once fired for the first such shard only, and the second wait
// never ended.
func TestClusterStatusWithStalledLoops(t *testing.T) {
	const shards = 3
	c := newTestCluster(t, 3, shards)
	n := c.nodes[0]
	release := make(chan struct{})
	defer close(release)
	for _, sh := range []int{0, 2} {
		blocked := make(chan struct{})
		n.shards[sh].do(func() { close(blocked); <-release })
		<-blocked
	}
	done := make(chan Status, 1)
	go func() { done <- n.Status() }()
	select {
	case st := <-done:
		for _, sh := range []int{0, 2} {
			if role := st.Shards[sh].Role; role != "unknown" {
				t.Errorf("shard %d, its loop stalled: role %q, want unknown", sh, role)
			}
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Status did not answer with two shard loops stalled")
	}
}

// TestClusterLeaderCheckpointFsyncFails: a leader's broker that fails on
// its own, with no append failing (an idle leader's checkpoint meets a
// failed fsync), restarts its shard: the others take its queues. The
// shard kept the lead and answered every request with an error until
// the process restarted (disk-full audit, 2026-12-06).
func TestClusterLeaderCheckpointFsyncFails(t *testing.T) {
	ffs := wal.NewFaultFS(wal.OSFS())
	ffs.Filter = func(p string) bool {
		return strings.Contains(p, string(filepath.Separator)+"shards"+string(filepath.Separator)+"0"+string(filepath.Separator))
	}
	c := newTestClusterWith(t, 3, 2, func(i int, o *engine.Options) {
		if i == 0 {
			o.WAL.FS = ffs
			o.CheckpointInterval = 100 * time.Millisecond
		}
	})
	names, sent, _ := c.queuePerShard()
	name := names[0]
	// Five sends through node 1 while it leads shard 0. A leader change
	// under a loaded machine refuses one (ErrNotLeader): node 1 campaigns
	// again and the send is made again.
	for range 5 {
		eventually(t, "a send through node 1 leading shard 0", func() error {
			c.nodes[0].shards[0].do(func() {
				if c.nodes[0].shards[0].rn.Status().Lead != 1 {
					c.nodes[0].shards[0].rn.Campaign()
				}
			})
			b, _, err := c.nodes[0].Route(name)
			if err != nil || b == nil {
				return fmt.Errorf("not yet: %v", err)
			}
			if err := sendCounted(b, name, sent); err != nil {
				if !errors.Is(err, engine.ErrNotLeader) {
					t.Fatal(err)
				}
				return err
			}
			return nil
		})
	}
	ffs.FailNthSync(1, syscall.EIO) // the next fsync of shard 0's log on node 1: a checkpoint's
	eventually(t, "the fsync failing", func() error {
		if ffs.Injected() == 0 {
			return errors.New("not yet")
		}
		return nil
	})
	eventuallyWithin(t, 30*time.Second, "a send to "+name+" through any node", func() error {
		for i := range c.nodes {
			if nb, _, err := c.nodes[i].Route(name); err == nil && nb != nil {
				return sendCounted(nb, name, sent)
			}
		}
		return errors.New("no node takes it")
	})
}
