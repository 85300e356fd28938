package cluster

import (
	"fmt"
	"testing"

	"github.com/smqd/smqd/engine"
)

// A member moved to a new raft address is reached there once the others
// are restarted with it in their flags (the address book used to win over
// the flags, so the others kept dialling the old address and the moved
// member never caught up).
func TestClusterMemberMovedToANewAddress(t *testing.T) {
	c := newTestCluster(t, 3, 2)
	const queue = "moving"
	c.leaderQueue(queue)
	// A member added and removed again, as with smqctl cluster add and rm:
	// from then on each node's address book (saved at each change) holds
	// every member's address, the first members' included.
	for _, n := range c.nodes {
		n.rememberMember(9, "127.0.0.1:9", false)
		n.rememberMember(9, "", true)
	}
	c.stop(1)
	c.hold(2) // node 2's new address
	c.start(1)
	for _, i := range []int{0, 2} { // a rolling restart with the new flags
		c.stop(i)
		c.start(i)
	}
	_, b := c.leader(queue)
	q, err := b.Queue(queue)
	if err != nil {
		t.Fatal(err)
	}
	for k := range 20 {
		if _, err := q.Send([]engine.SendEntry{{Body: []byte(fmt.Sprint(k))}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "node 2, at its new address, holds every message", func() error {
		info, err := c.counts(1, queue)
		if err != nil {
			return err
		}
		if info.Active != 20 {
			return fmt.Errorf("node 2 holds %d of 20", info.Active)
		}
		return nil
	})
}
