package cluster

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
)

// TestClusterSendDuringAFailedLeaderTransfer (shard.go run): while a leader
// hands the lead over (balance.go), Raft drops proposals. When the
// transfer then fails (here: its target is down, so it times out after an
// election timeout), the leader goes on leading. A send proposed during
// the transfer used to be dropped and its proposal stayed pending for
// good: the send never returned, its message lived in the leader's state
// only, and the shard's checkpoints stopped at it. Now proposals are held
// while a transfer runs, and the send commits once it has failed.
func TestClusterSendDuringAFailedLeaderTransfer(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	li, q := c.leaderQueue("q")
	target := (li + 1) % 3
	c.stop(target)
	s := c.nodes[li].shards[0]
	sent := make(chan error, 1)
	started := make(chan struct{})
	s.do(func() {
		s.rn.TransferLeader(uint64(target + 1))
		if s.rn.BasicStatus().LeadTransferee != uint64(target+1) {
			t.Error("no transfer under way")
		}
		go func() {
			_, err := q.Send([]engine.SendEntry{{Body: []byte("during the transfer")}}, nil)
			sent <- err
		}()
		// The send's proposal is queued for the loop's next round, which
		// finds the transfer still under way (it lasts an election timeout).
		for i := 0; i < 1000; i++ {
			s.pmu.Lock()
			n := len(s.props)
			s.pmu.Unlock()
			if n > 0 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		close(started)
	})
	<-started
	select {
	case err := <-sent:
		if err != nil {
			t.Fatalf("send during a failed transfer: %v", err)
		}
	case <-time.After(30 * time.Second):
		// A liveness bound, not a timing assertion: without the fix the
		// send never returns.
		t.Fatal("the send proposed during a failed leader transfer never returned")
	}
	other := 3 - li - target
	eventually(t, "the other follower has the message", func() error {
		info, err := c.counts(other, "q")
		if err != nil {
			return err
		}
		if info.Active != 1 {
			return fmt.Errorf("active %d, want 1", info.Active)
		}
		return nil
	})
}

// TestClusterStepDownRebuildsOnlyADivergedBroker (shard.go handleSoftState):
// a leader that loses the lead with a change never committed in its state
// (here a send whose followers are gone) reopens its broker from the log,
// so that it holds only what was committed; a leader whose every change
// was committed goes on with its broker (no rebuild).
func TestClusterStepDownRebuildsOnlyADivergedBroker(t *testing.T) {
	// A 3 s election timeout: the leader left alone steps down one
	// election timeout after the followers' stops (CheckQuorum); with
	// 200 ms it could do so before the delete below was proposed on a
	// loaded machine, and nothing diverged (0 rebuilds; the pattern of
	// TestCloseSettlesOperationsInFlight's failure under load).
	c := startTestCluster(&testCluster{t: t, nodes: make([]*Node, 3), shards: 1, electionTicks: 150})
	c.preferredLeaders() // no balancer hand-over under the send and the receive
	li, q := c.leaderQueue("q")
	if _, err := q.Send([]engine.SendEntry{{Body: []byte("committed")}}, nil); err != nil {
		t.Fatal(err)
	}
	msgs, err := q.Receive(context.Background(), engine.ReceiveOptions{Max: 1}, nil)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("receive: %d messages, %v", len(msgs), err)
	}
	for i := range c.nodes { // the receive is committed everywhere
		eventually(t, fmt.Sprintf("node %d has the receive", i+1), func() error {
			info, err := c.counts(i, "q")
			if err != nil {
				return err
			}
			if info.Inactive != 1 {
				return fmt.Errorf("inactive %d", info.Inactive)
			}
			return nil
		})
	}
	s := c.nodes[li].shards[0]
	for i := range c.nodes {
		if i != li {
			c.stop(i)
		}
	}
	// Alone, the leader takes a delete it can never commit (the message
	// leaves its state at once), then steps down (CheckQuorum): the delete
	// fails, and the message must be back in its state.
	errs := make([]error, 1)
	if _, err := q.Delete([]engine.ReceiptHandle{msgs[0].Handle}, errs); !errors.Is(errors.Join(err, errs[0]), engine.ErrNotLeader) {
		t.Fatalf("delete without a majority: %v / %v, want ErrNotLeader", err, errs[0])
	}
	eventually(t, "the old leader holds the message its failed delete took", func() error {
		info, err := c.counts(li, "q")
		if err != nil {
			return err
		}
		if n := info.Active + info.Inactive + info.Delayed; n != 1 {
			return fmt.Errorf("%d messages", n)
		}
		return nil
	})
	if n := s.rebuilds.Load(); n != 1 {
		t.Fatalf("%d rebuilds, want 1", n)
	}
	// Back to three; a clean hand-over of the lead needs no rebuild.
	for i := range c.nodes {
		if i != li {
			c.start(i)
		}
	}
	c.preferredLeaders() // the leader picked here keeps the lead until the transfer below
	ni, nb := c.leader("q")
	nq, err := nb.Queue("q")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nq.Send([]engine.SendEntry{{Body: []byte("after")}}, nil); err != nil {
		t.Fatal(err)
	}
	// The failed delete's entry is still in node li's log: if li won the
	// election it committed it after all (a client told a delete failed
	// may find it done). Every replica agrees either way.
	ninfo, err := nq.Attributes()
	if err != nil {
		t.Fatal(err)
	}
	total := func(i engine.QueueInfo) int64 { return i.Active + i.Inactive + i.Delayed }
	want := total(ninfo)
	if want != 1 && want != 2 {
		t.Fatalf("the new leader holds %d messages, want 2 (or 1)", want)
	}
	to := (ni + 1) % 3
	ns := c.nodes[ni].shards[0]
	before := ns.rebuilds.Load()
	eventually(t, "node caught up before the hand-over", func() error {
		info, err := c.counts(to, "q")
		if err != nil {
			return err
		}
		if total(info) != want {
			return fmt.Errorf("%d messages, want %d", total(info), want)
		}
		return nil
	})
	ns.do(func() { ns.rn.TransferLeader(uint64(to + 1)) })
	eventually(t, "the lead moved", func() error {
		if b, _, err := c.nodes[to].Route("q"); err != nil || b == nil {
			return fmt.Errorf("node %d does not lead yet", to+1)
		}
		return nil
	})
	if ns.rebuilds.Load() != before || ns.rebuildsSkipped.Load() == 0 {
		t.Fatalf("a clean hand-over: %d rebuilds (want %d), %d skipped (want > 0)", ns.rebuilds.Load(), before, ns.rebuildsSkipped.Load())
	}
	for i := range c.nodes {
		eventually(t, fmt.Sprintf("node %d holds the leader's messages", i+1), func() error {
			info, err := c.counts(i, "q")
			if err != nil {
				return err
			}
			if total(info) != want {
				return fmt.Errorf("%d messages, want %d", total(info), want)
			}
			return nil
		})
	}
}

// TestNodeReleaseMemoryCollectsOnce (node.go): a node releases its shards'
// storage and then forces one collection; it forced one per shard (each
// broker's ReleaseMemory), 8 full collections of a busy heap every other
// second when smqd's idle trim ran during a catch-up.
func TestNodeReleaseMemoryCollectsOnce(t *testing.T) {
	c := newTestCluster(t, 3, 8)
	c.leader("q")
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.NumForcedGC
	c.nodes[0].ReleaseMemory()
	runtime.ReadMemStats(&ms)
	if n := ms.NumForcedGC - before; n != 1 {
		t.Fatalf("%d forced collections for a node of 8 shards, want 1", n)
	}
}

// TestNodeActivityFollowsReplication (node.go Activity): smqd's idle trim
// counts a node's replication as traffic; sends through another node's
// leader move this node's activity although it serves no request.
func TestNodeActivityFollowsReplication(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	li, q := c.leaderQueue("q")
	fi := (li + 1) % 3
	before := []uint64{c.nodes[li].Activity(), c.nodes[fi].Activity()}
	if _, err := q.Send([]engine.SendEntry{{Body: []byte("m")}}, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the leader's and a follower's activity moved", func() error {
		if a := c.nodes[li].Activity(); a == before[0] {
			return fmt.Errorf("leader's activity still %d", a)
		}
		if a := c.nodes[fi].Activity(); a == before[1] {
			return fmt.Errorf("follower's activity still %d", a)
		}
		return nil
	})
}

// leaderQueue creates queue name through its shard's leader and returns
// the leader's index and the queue there.
func (c *testCluster) leaderQueue(name string) (int, *engine.Queue) {
	c.t.Helper()
	// Again on the next leader after a leader change (a balancer's
	// hand-over refuses it; one with the proposal in flight fails it): a
	// create with the same attributes is idempotent (onLeaderIdempotent).
	var li int
	var q *engine.Queue
	eventually(c.t, "queue "+name+" created on its leader", func() error {
		var b *engine.Broker
		li, b = c.leader(name)
		_, err := b.CreateQueue(name, engine.DefaultQueueConfig())
		if err == nil {
			q, err = b.Queue(name)
		}
		if err != nil && !errors.Is(err, engine.ErrNotLeader) {
			c.t.Fatal(err)
		}
		return err
	})
	return li, q
}

// A leader's silences (the metrics' near misses of a step-down) are gaps
// between its followers' messages over half the election timeout; the
// longest gap is kept.
func TestLeaderSilences(t *testing.T) {
	s := &shard{n: &Node{cfg: Config{Tick: 50 * time.Millisecond, ElectionTicks: 10}}}
	t0 := time.Unix(1000, 0)
	s.quietSince = t0
	for _, step := range []struct {
		gap      time.Duration
		silences int64
		max      time.Duration
	}{
		{200 * time.Millisecond, 0, 200 * time.Millisecond},
		{250 * time.Millisecond, 0, 250 * time.Millisecond}, // half the timeout is not over it
		{251 * time.Millisecond, 1, 251 * time.Millisecond},
		{50 * time.Millisecond, 1, 251 * time.Millisecond},
		{900 * time.Millisecond, 2, 900 * time.Millisecond},
	} {
		t0 = t0.Add(step.gap)
		s.noteSilence(t0)
		if got, max := s.silences.Load(), time.Duration(s.silenceMax.Load()); got != step.silences || max != step.max {
			t.Fatalf("after a gap of %v: %d silences, longest %v; want %d, %v", step.gap, got, max, step.silences, step.max)
		}
	}
}
