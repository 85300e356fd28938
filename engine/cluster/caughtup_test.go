package cluster

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestClusterHealthWaitsForCatchUp: a member started after its leader
// compacted its log past what the member holds needs a snapshot. Until it
// has applied what the leader had committed after its start, Health says
// ErrCatchingUp (caughtup.go invariant 1), though it knows the leader and
// reaches it: the rolling restart of docs/operations.md stops the next
// node once /healthz says 200, and a stop while this one waited for its
// snapshot stalled the shard (shutdown audit, 2026-12-07). Once Health is
// nil, the member's applied index is at least the leader's, read after
// the member started (invariant 2).
func TestClusterHealthWaitsForCatchUp(t *testing.T) {
	c := startTestCluster(&testCluster{t: t, nodes: make([]*Node, 3), shards: 1})
	c.createQ()
	li, _ := c.leader("q")
	fi := (li + 1) % 3
	c.stop(fi)
	c.sendBatches("w", 300) // past the leader's checkpoints: node fi needs a snapshot
	held, release := holdNextSnapshot(t)
	c.start(fi)
	held()
	eventually(t, "the restarted member says it is catching up", func() error {
		if err := c.nodes[fi].Health(); !errors.Is(err, ErrCatchingUp) {
			return fmt.Errorf("Health: %v", err)
		}
		return nil
	})
	if st := c.nodes[fi].Status(); st.Shards[0].CaughtUp {
		t.Fatalf("status says caught up while the snapshot is held: %+v", st.Shards[0])
	}
	_, lb := c.leader("q")
	want, _ := lb.Applied()
	release()
	eventuallyWithin(t, 60*time.Second, "the restarted member is healthy", func() error { return c.nodes[fi].Health() })
	if got := c.nodes[fi].shards[0].applied(); got < want {
		t.Fatalf("healthy at applied index %d, below the leader's %d read after the member started", got, want)
	}
	if st := c.nodes[fi].Status(); !st.Shards[0].CaughtUp {
		t.Fatalf("status does not say caught up: %+v", st.Shards[0])
	}
}
