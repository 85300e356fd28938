package cluster

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
)

// hookWriter calls hook once, when more than after bytes were written.
type hookWriter struct {
	w     bytes.Buffer
	after int
	fired bool
	hook  func()
}

func (h *hookWriter) Write(p []byte) (int, error) {
	if !h.fired && h.w.Len() > h.after {
		h.fired = true
		h.hook()
	}
	return h.w.Write(p)
}

// Dead-letter moves made while a cluster backup runs are held (holdmoves.go):
// the backup reads a shard queue by queue (here a-dlq before m-fill before
// z-src), and a consumer that receives z-src's exhausted messages after
// a-dlq was read and before z-src is read moved them into neither part of
// the backup (backup audit, 2026-12-06: 50 of 50 missing from the restored
// cluster). With moves held they stay hidden in z-src, so the backup holds
// every message acknowledged before it started; once it ends they move.
// Without the hold, the test fails with every message missing.
func TestClusterBackupHoldsDeadLetterMoves(t *testing.T) {
	c := newTestCluster(t, 3, 1) // one shard: every queue in it
	cfg := engine.DefaultQueueConfig()
	for _, name := range []string{"a-dlq", "m-fill"} {
		c.onLeaderIdempotent(name, func(b *engine.Broker) error { _, err := b.CreateQueue(name, cfg); return err })
	}
	src := cfg
	src.VisibilityTimeout = time.Second
	src.DeadLetterQueue, src.MaxReceiveCount = "a-dlq", 1
	c.onLeaderIdempotent("z-src", func(b *engine.Broker) error { _, err := b.CreateQueue("z-src", src); return err })
	send := func(queue string, body []byte) {
		c.onLeader(queue, func(b *engine.Broker) error {
			q, err := b.Queue(queue)
			if err == nil {
				_, err = q.Send([]engine.SendEntry{{Body: body}}, nil)
			}
			return err
		})
	}
	big := []byte(strings.Repeat("x", 60000))
	for range 40 { // 2.4 MB read between a-dlq and z-src
		send("m-fill", big)
	}
	const n = 50
	for k := range n {
		send("z-src", []byte{'s', byte('A' + k%26), byte('a' + k/26)})
	}
	receiveAll := func() int {
		got := 0
		for range 10 {
			c.onLeader("z-src", func(b *engine.Broker) error {
				q, err := b.Queue("z-src")
				if err != nil {
					return err
				}
				ms, err := q.Receive(context.Background(), engine.ReceiveOptions{Max: 16, HasWait: true}, nil)
				if err != nil && !errors.Is(err, engine.ErrMessageNotExist) {
					return err
				}
				got += len(ms)
				return nil
			})
		}
		return got
	}
	if got := receiveAll(); got != n {
		t.Fatalf("first receives took %d of %d", got, n)
	}
	c.converged("z-src", 0, n)
	c.converged("z-src", n, 0) // visible again after their 1 s: the next receive moves them
	lead, _ := c.leader("z-src")
	hw := &hookWriter{after: 1 << 20, hook: func() { receiveAll() }} // a-dlq read, z-src not yet
	if _, err := c.nodes[lead].Backup(hw, BackupOptions{}); err != nil {
		t.Fatal(err)
	}
	if !hw.fired {
		t.Fatal("the consumer never ran during the backup")
	}
	// Once the backup ended, the moves are made.
	eventually(t, "the held moves made after the backup", func() error {
		receiveAll()
		info, err := c.counts(lead, "a-dlq")
		if err != nil || info.Active != n {
			return errors.New("not yet")
		}
		return nil
	})
	c.stopAll()
	r := restoredCluster(t, hw.w.Bytes(), 1, nil)
	r.leader("z-src")
	held := func(q string) int64 {
		info, err := r.counts(0, q)
		if err != nil {
			t.Fatal(err)
		}
		return info.Active + info.Inactive + info.Delayed
	}
	if got := held("a-dlq") + held("z-src"); got != n {
		t.Fatalf("the restored cluster holds %d of the %d messages acknowledged before the backup", got, n)
	}
}

// The node that runs a backup asks every member to hold moves, over the
// links between nodes, and ends the hold when it returns (a backup
// through a node that does not lead a shard fetches the shard's export
// whole from its leader, where the moves are made). Two backups through
// two nodes at once: the first to end must not end the other's hold, on
// any member (invariant 2; review: a single deadline per node was
// overwritten by the first release). With the request ignored by the
// members, or one deadline per node, the test fails.
func TestClusterHoldMovesReachesEveryMember(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	c.leader("q")
	heldEverywhere := func(want bool, when string) {
		t.Helper()
		for i, n := range c.nodes {
			if n.movesHeld() != want {
				t.Errorf("node %d: moves held %v %s", i+1, !want, when)
			}
		}
	}
	release := c.nodes[0].holdMovesEverywhere()
	heldEverywhere(true, "during a backup")
	release()
	heldEverywhere(false, "after the backup")
	releaseA := c.nodes[0].holdMovesEverywhere()
	releaseB := c.nodes[1].holdMovesEverywhere()
	releaseA()
	heldEverywhere(true, "while backup B still runs")
	releaseB()
	heldEverywhere(false, "after both backups")
}
