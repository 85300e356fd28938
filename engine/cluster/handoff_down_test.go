package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// A rolling restart of three nodes with one already down: the leader
// being stopped (SIGTERM: HandOverLeads) still has a majority with the
// remaining live member, so electable holds and every lead goes over
// (review-e, 2026-12-07: a check that the no-majority guard of handOff
// does not stop a hand-over that can succeed).
func TestClusterShutdownHandsOverWithOneOfThreeDown(t *testing.T) {
	c := newTestCluster(t, 3, 4)
	c.preferredLeaders()
	c.stop(2) // node 3 is down
	n1 := c.nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n1.HandOverLeads(ctx); err != nil {
		t.Fatalf("HandOverLeads with node 3 down: %v", err)
	}
	eventually(t, "node 2 leads every shard", func() error {
		for i, s := range c.nodes[1].shards {
			if s.lead.Load() != 2 || !s.ready.Load() {
				return fmt.Errorf("shard %d: lead %d ready %v", i, s.lead.Load(), s.ready.Load())
			}
		}
		return nil
	})
}
