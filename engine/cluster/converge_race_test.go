package cluster

import (
	"sync"
	"testing"

	"github.com/smqd/smqd/engine"
)

// TestConvergeStopBesideOps is TestConverge's fault 2 (and 8) alone: a
// node stopped on another goroutine (r.stop, which sets c.nodes[i] to nil
// under nodesMu) while the test's goroutine runs operations, each of which
// looks the leader up (onLeader → c.leader, which read c.nodes without
// nodesMu: a data race under -race).
func TestConvergeStopBesideOps(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	r := &cvRun{t: t, c: c, seed: 1}
	if err := r.onLeader("q", func(b *engine.Broker) error {
		_, err := b.CreateQueue("q", engine.DefaultQueueConfig())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		li, _ := c.leader("q")
		fi := (li + 1 + round%2) % 3 // a follower, as fault 8 stops (fault 2 stops the leader: the same race)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); r.stop(fi) }()
		for range 20 {
			if err := r.onLeader("q", func(b *engine.Broker) error {
				q, err := b.Queue("q")
				if err == nil {
					_, err = q.Send([]engine.SendEntry{{Body: []byte("x")}}, nil)
				}
				return err
			}); err != nil {
				t.Logf("send: %v", err) // a send cut short by the stop: not what this test looks at
			}
		}
		wg.Wait()
		r.start(fi)
	}
}
