package cluster

import (
	"errors"
	"testing"
	"time"
)

// A forward connection kept idle in the pool goes stale when the node at
// its other end restarts. The next forwarded request must not be sent
// down it: it would never be answered, and the client would be told that
// its request may or may not have run. The pool notices the closed
// connection and opens a new one.
func TestForwardAfterTheLeaderRestarts(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	echo := func(from uint64, req, dst []byte) []byte { return append(append(dst, "re:"...), req...) }
	c.nodes[1].SetForwardHandler(echo)
	for i := 0; i < 3; i++ { // three in a row: one pooled connection, reused
		got, err := c.nodes[0].Forward(2, []byte("one"), nil, 5*time.Second)
		if err != nil || string(got) != "re:one" {
			t.Fatalf("forward %d: %q, %v", i, got, err)
		}
	}
	c.stop(1)
	c.start(1)
	c.nodes[1].SetForwardHandler(echo)
	// The restarted node closed the pooled connection's other end; give
	// its FIN time to arrive, as it does long before a real next request.
	time.Sleep(100 * time.Millisecond)
	got, err := c.nodes[0].Forward(2, []byte("two"), nil, 5*time.Second)
	if err != nil {
		if errors.Is(err, ErrNotSent) {
			t.Fatalf("forward after the restart was refused (retryable, but the node was up): %v", err)
		}
		t.Fatalf("forward after the restart sent down a dead pooled connection: %v", err)
	}
	if string(got) != "re:two" {
		t.Fatalf("forward after the restart: %q", got)
	}
}
