package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestClusterRemovedMemberLeavesNoPooledConnections: once a member is
// removed and forgotten (settleRemovals), the other members drop the idle
// forward and dead-letter move connections they kept to it. They were
// never taken again (no request goes to a node that is no member), so each
// member held up to 64 forward and 8 move sockets per removed member, dead
// once it stopped, for the life of the process (cluster leak audit,
// 2026-12-07: 18 sockets to a removed node 3, CLOSE-WAIT and then with no
// TCP state, still held by node 1 minutes later).
func TestClusterRemovedMemberLeavesNoPooledConnections(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	c.leaderQueue("pool")
	echo := func(_ context.Context, from uint64, req, dst []byte) []byte {
		return append(append(dst, "re:"...), req...)
	}
	c.nodes[2].SetForwardHandler(context.Background(), echo)
	// A few forwards at once leave that many connections idle in node 1's
	// pool for node 3.
	const k = 4
	errs := make(chan error, k)
	for i := range k {
		go func() {
			got, err := c.nodes[0].Forward(context.Background(), 3, fmt.Appendf(nil, "r%d", i), nil, 5*time.Second)
			if err == nil && string(got) != fmt.Sprintf("re:r%d", i) {
				err = fmt.Errorf("answer %q", got)
			}
			errs <- err
		}()
	}
	for range k {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	pooled := func(n *Node) (idle, open int) {
		n.fwd.mu.Lock()
		defer n.fwd.mu.Unlock()
		return len(n.fwd.idle[3]), n.fwd.open[3]
	}
	if idle, _ := pooled(c.nodes[0]); idle == 0 {
		t.Fatal("no forward connection to node 3 pooled on node 1")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.nodes[1].RemoveMember(ctx, 3); err != nil {
		t.Fatal(err)
	}
	c.stop(2)
	eventually(t, "node 1 forgets node 3", func() error {
		if a := c.nodes[0].tr.peerAddr(3); a != "" {
			return fmt.Errorf("still dials it at %s", a)
		}
		return nil
	})
	eventually(t, "node 1's pooled connections to the removed node 3", func() error {
		if idle, open := pooled(c.nodes[0]); idle != 0 || open != 0 {
			return fmt.Errorf("%d idle, %d counted open: kept for a member that is gone", idle, open)
		}
		return nil
	})
}
