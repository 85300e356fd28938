package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
)

// Replicas whose clocks differ: records carry the leader's times, and a
// new leader behind the old one works from them (from the clock audit,
// 2026-12-06; each failed before its fix in the engine).

// skewClock is a shared fake clock seen through a node's own offset.
type skewClock struct {
	*engine.FakeClock
	off atomic.Int64
}

func (c *skewClock) Now() time.Time { return c.FakeClock.Now().Add(time.Duration(c.off.Load())) }

// A message sent with no delay by a leader 2 minutes ahead of the others
// is active on every replica and received at once by the next leader. It
// was Delayed on the others, and the next leader answered MessageNotExist
// until its clock caught up (apply.go, recovery.go).
func TestClusterNewLeaderBehindReceivesAMessageSentWithNoDelay(t *testing.T) {
	newLeaderBehind(t, false, 2*time.Minute, 30*time.Second)
}

// The documented tolerable skew (docs/operations.md: ±2 s) and the spec's
// smallest visibility timeout (1 s): a message received on the first
// leader and its visibility changed on the next, 2 s behind, comes back.
// The visibility offset, unsigned from the enqueue time, wrapped to 49.7
// days (NextVisibleTime 2027-01-23): a message received and not deleted
// never came back (queue.go, ChangeVisibility).
func TestClusterNewLeaderBehindChangesVisibility(t *testing.T) {
	newLeaderBehind(t, true, 2*time.Second, time.Second)
}

func newLeaderBehind(t *testing.T, changeVis bool, skew, vis time.Duration) {
	fc := engine.NewFakeClock(time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC))
	clks := []*skewClock{{FakeClock: fc}, {FakeClock: fc}, {FakeClock: fc}}
	c := &testCluster{t: t, nodes: make([]*Node, 3), shards: 1, tweak: func(i int, o *engine.Options) { o.Clock = clks[i] }}
	startTestCluster(c)

	l0, _ := c.leader("q")
	for i := range clks {
		if i != l0 {
			clks[i].off.Store(int64(-skew)) // the others' clocks are behind, from the start
		}
	}
	cfg := engine.DefaultQueueConfig()
	cfg.Retention = 24 * time.Hour
	c.onLeaderIdempotent("q", func(b *engine.Broker) error { _, err := b.CreateQueue("q", cfg); return err })
	c.onLeader("q", func(b *engine.Broker) error {
		q, err := b.Queue("q")
		if err != nil {
			return err
		}
		_, err = q.Send([]engine.SendEntry{{Body: []byte("m")}}, nil)
		return err
	})
	var h engine.ReceiptHandle
	if changeVis {
		c.onLeader("q", func(b *engine.Broker) error {
			q, err := b.Queue("q")
			if err != nil {
				return err
			}
			ms, err := q.Receive(context.Background(), engine.ReceiveOptions{}, nil)
			if err == nil {
				h = ms[0].Handle
				t.Logf("received on the first leader: NextVisible %v", ms[0].NextVisibleTime)
			}
			return err
		})
	}
	for i := range c.nodes {
		eventually(t, fmt.Sprintf("node %d holds the message", i+1), func() error {
			info, err := c.counts(i, "q")
			if err != nil {
				return err
			}
			if info.Active+info.Inactive+info.Delayed != 1 {
				return fmt.Errorf("%+v", info)
			}
			if !changeVis && info.Active != 1 {
				// Sent without a delay, it is visible on every replica,
				// whatever its clock (one behind counted it Delayed).
				return fmt.Errorf("node %d at its time %v: %+v, want it active", i+1, clks[i].Now(), info)
			}
			return nil
		})
	}
	li, _ := c.leader("q")
	c.stop(li)
	var got engine.Message
	eventually(t, "a receive on the new leader", func() error {
		for i, n := range c.nodes {
			if n == nil {
				continue
			}
			b, _, err := n.Route("q")
			if err != nil || b == nil {
				continue
			}
			q, err := b.Queue("q")
			if err != nil {
				return err
			}
			if changeVis {
				_, next, err := q.ChangeVisibility(h, vis)
				if err != nil {
					return fmt.Errorf("node %d: %v", i+1, err)
				}
				t.Logf("ChangeVisibility(%v) on node %d at its time %v: NextVisibleTime %v", vis, i+1, clks[i].Now(), next)
				got.NextVisibleTime, got.EnqueueTime, got.FirstDequeueTime = next, clks[i].Now(), clks[i].Now()
				return nil
			}
			ms, err := q.Receive(context.Background(), engine.ReceiveOptions{}, nil)
			if err != nil {
				return fmt.Errorf("node %d: %v", i+1, err)
			}
			got = ms[0]
			t.Logf("received on node %d at its time %v: Enqueue %v FirstDequeue %v NextVisible %v", i+1, clks[i].Now(), got.EnqueueTime, got.FirstDequeueTime, got.NextVisibleTime)
			return nil
		}
		return fmt.Errorf("no leader yet")
	})
	if d := got.NextVisibleTime.Sub(got.EnqueueTime); d > time.Hour {
		t.Errorf("visibility %v: NextVisibleTime is %v after EnqueueTime (or the change's time)", vis, d)
	}
	if d := got.FirstDequeueTime.Sub(got.EnqueueTime); d > time.Hour || d < 0 {
		t.Errorf("FirstDequeueTime is %v after EnqueueTime", d)
	}
	// Not deleted: it must come back within a few minutes.
	for k := 0; k < 30; k++ {
		fc.Advance(time.Hour)
		for _, n := range c.nodes {
			if n == nil {
				continue
			}
			if b, _, err := n.Route("q"); err == nil && b != nil {
				q, _ := b.Queue("q")
				if ms, err := q.Receive(context.Background(), engine.ReceiveOptions{}, nil); err == nil {
					t.Logf("back after %d h (DequeueCount %d)", k+1, ms[0].DequeueCount)
					return
				}
			}
		}
	}
	t.Errorf("a received, undeleted message did not come back in 30 h (retention 24 h)")
}

// As TestClusterNewLeaderBehindReceivesAMessageSentWithNoDelay, for a
// message the dead-letter policy moved: it was stored visible from the
// move (visOff now-enq, not 0), so a replica behind counted it Delayed and
// the next leader could not receive it from the dead-letter queue until
// its clock caught up (found in review).
func TestClusterNewLeaderBehindReceivesADeadLetter(t *testing.T) {
	skew := 2 * time.Minute
	fc := engine.NewFakeClock(time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC))
	clks := []*skewClock{{FakeClock: fc}, {FakeClock: fc}, {FakeClock: fc}}
	c := &testCluster{t: t, nodes: make([]*Node, 3), shards: 1, tweak: func(i int, o *engine.Options) { o.Clock = clks[i] }}
	startTestCluster(c)
	l0, _ := c.leader("q")
	for i := range clks {
		if i != l0 {
			clks[i].off.Store(int64(-skew))
		}
	}
	cfg := engine.DefaultQueueConfig()
	cfg.Retention = 24 * time.Hour
	cfg.VisibilityTimeout = time.Second
	c.onLeaderIdempotent("q", func(b *engine.Broker) error { _, err := b.CreateQueue("dlq", cfg); return err })
	qc := cfg
	qc.DeadLetterQueue, qc.MaxReceiveCount = "dlq", 1
	c.onLeaderIdempotent("q", func(b *engine.Broker) error { _, err := b.CreateQueue("q", qc); return err })
	c.onLeader("q", func(b *engine.Broker) error {
		q, _ := b.Queue("q")
		_, err := q.Send([]engine.SendEntry{{Body: []byte("m")}}, nil)
		return err
	})
	c.onLeader("q", func(b *engine.Broker) error {
		q, _ := b.Queue("q")
		_, err := q.Receive(context.Background(), engine.ReceiveOptions{}, nil)
		return err
	})
	fc.Advance(2 * time.Second) // its visibility ends; the next receive moves it
	c.onLeader("q", func(b *engine.Broker) error {
		q, _ := b.Queue("q")
		_, err := q.Receive(context.Background(), engine.ReceiveOptions{}, nil)
		if err != nil && !errors.Is(err, engine.ErrMessageNotExist) {
			return err
		}
		d, _ := b.Queue("dlq")
		info, _ := d.Attributes()
		if info.Active != 1 {
			return fmt.Errorf("dlq on the leader: %+v", info)
		}
		return nil
	})
	for i := range c.nodes {
		eventually(t, fmt.Sprintf("node %d holds the dead letter", i+1), func() error {
			info, err := c.counts(i, "dlq")
			if err != nil {
				return err
			}
			if info.Active+info.Inactive+info.Delayed != 1 {
				return fmt.Errorf("%+v", info)
			}
			if info.Active != 1 {
				t.Logf("node %d (clock %v behind=%v): dlq %+v", i+1, clks[i].Now(), i != l0, info)
			}
			return nil
		})
	}
	li, _ := c.leader("q")
	c.stop(li)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for i, n := range c.nodes {
			if n == nil {
				continue
			}
			b, _, err := n.Route("dlq")
			if err != nil || b == nil {
				continue
			}
			d, err := b.Queue("dlq")
			if err != nil {
				continue
			}
			ms, err := d.Receive(context.Background(), engine.ReceiveOptions{}, nil)
			if err == nil {
				t.Logf("received on node %d: %s", i+1, ms[0].ID)
				return
			}
			if errors.Is(err, engine.ErrMessageNotExist) {
				info, _ := d.Attributes()
				t.Errorf("new leader node %d (clock %v): the dead letter is not receivable: %+v", i+1, clks[i].Now(), info)
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("no new leader")
}
