package cluster

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
)

// TestClusterHandOverWhileMessagesExpire (transfer.go invariant 2,
// engine/replica_expiry.go): a planned hand-over of a shard whose messages
// keep ageing out. The yielding leader proposes none of the expiries its
// timers make, so its broker settles and it keeps it (no rebuild); the
// next leader logs the expiries it made as a follower that nobody logged,
// so every replica's log ends up holding every expiry: a restarted node
// finds none left to make. The nodes share one fake clock, so every
// replica makes each expiry at the same moment, and the test drives them.
func TestClusterHandOverWhileMessagesExpire(t *testing.T) {
	clk := engine.NewFakeClock(time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC))
	c := newTestClusterWith(t, 3, 1, func(_ int, o *engine.Options) { o.Clock = clk })
	cfg := engine.DefaultQueueConfig()
	cfg.Retention = engine.MinRetention
	c.onLeaderIdempotent("q", func(b *engine.Broker) error { _, err := b.CreateQueue("q", cfg); return err })
	send := func(body string) {
		c.onLeader("q", func(b *engine.Broker) error {
			q, err := b.Queue("q")
			if err != nil {
				return err
			}
			_, err = q.Send([]engine.SendEntry{{Body: []byte(body)}}, nil)
			return err
		})
	}
	holds := func(want int64) {
		t.Helper()
		for i := range c.nodes {
			eventually(t, fmt.Sprintf("node %d holds %d messages", i+1, want), func() error {
				info, err := c.counts(i, "q")
				if err != nil {
					return err
				}
				if n := info.Active + info.Inactive + info.Delayed; n != want {
					return fmt.Errorf("%d messages", n)
				}
				return nil
			})
		}
	}
	// 200 messages sent 50 ms apart (fake time): they age out one by one.
	const n, gap = 200, 50 * time.Millisecond
	for i := range n {
		send(fmt.Sprint("m", i))
		clk.Advance(gap)
	}
	holds(n)
	clk.Advance(engine.MinRetention - n*gap) // the first one's deadline

	li, lb := c.leader("q")
	ls := c.nodes[li].shards[0]
	before := ls.rebuilds.Load()
	to := (li + 1) % len(c.nodes)
	// The leader yields, and messages expire before the transfer starts:
	// nobody logs those but the next leader.
	if err := lb.Yield(true); err != nil {
		t.Fatal(err)
	}
	clk.Advance(5 * gap)
	// More keep expiring while the lead moves.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for range n {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
				clk.Advance(gap / 5)
			}
		}
	})
	ls.do(func() { ls.handLeadTo(uint64(to + 1)) })
	eventually(t, "the lead moved", func() error {
		if b, _, err := c.nodes[to].Route("q"); err != nil || b == nil {
			return errors.New("the target does not lead yet")
		}
		return nil
	})
	close(stop)
	wg.Wait()
	if got := ls.rebuilds.Load(); got != before {
		t.Fatalf("the old leader rebuilt its broker %d times in a hand-over while messages expired, want 0", got-before)
	}
	clk.Advance(n * gap) // past every deadline
	holds(0)
	// A barrier: once every node holds it, each has applied every entry
	// before it, the new leader's expiries included.
	send("last")
	holds(1)
	// Every replica has seen every expiry it made logged: it remembers none.
	for i := range c.nodes {
		if sh := c.nodes[i].Status().Shards[0]; sh.UnloggedExpiries != 0 || sh.UnloggedExpiriesDropped != 0 {
			t.Fatalf("node %d remembers %d unlogged expiries (%d dropped), want 0", i+1, sh.UnloggedExpiries, sh.UnloggedExpiriesDropped)
		}
	}
	for i := range c.nodes {
		c.stop(i)
		c.start(i)
		eventually(t, fmt.Sprintf("node %d rebuilt", i+1), func() error {
			if c.nodes[i].Broker(0) == nil {
				return errors.New("no broker yet")
			}
			return nil
		})
		if got := c.nodes[i].Broker(0).Recovery().Expired; got != 0 {
			t.Fatalf("node %d's restart expired %d messages that its log never expired, want 0", i+1, got)
		}
	}
	holds(1)
}
