package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"
)

// TestClusterHealthNamesALeaderItCannotForwardTo: a follower that hears
// from its shard's leader but cannot open a forward connection to it (a
// link cut one way) answers every forwarded request 503; its Health must
// say so while that lasts, and be nil again once the leader is reachable,
// with no request forwarded meanwhile (forward_reach.go).
func TestClusterHealthNamesALeaderItCannotForwardTo(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	// The balancer's hand-over would move the lead away from the leader
	// the follower cannot reach, and make it healthy for that reason.
	c.preferredLeaders()
	var li int
	eventually(t, "a leader", func() error {
		for i, n := range c.nodes {
			if n.Leading(0) {
				li = i
				return nil
			}
		}
		return errors.New("none yet")
	})
	f := c.nodes[(li+1)%3]
	lead := uint64(li + 1)
	eventually(t, "the follower healthy", f.Health)

	// An address where nothing listens: the follower's new connections to
	// the leader fail there, its Raft connection already open stays.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	addr := f.tr.peerAddr(lead)
	if !f.tr.movePeer(lead, addr, dead) {
		t.Fatalf("the follower's address of node %d is not %s", lead, addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := f.Forward(ctx, lead, []byte("request"), nil, 5*time.Second); !errors.Is(err, ErrNotSent) {
		t.Fatalf("forward to the leader at an address where nothing listens: %v, want ErrNotSent", err)
	}
	if err := f.Health(); err == nil {
		t.Fatal("the follower says it is healthy while it cannot forward to its shard's leader")
	} else {
		t.Logf("health while the leader is unreachable: %v", err)
	}

	f.tr.movePeer(lead, dead, addr)
	eventually(t, "the follower healthy again, nothing forwarded", func() error {
		if err := f.Health(); err != nil {
			return fmt.Errorf("still: %w", err)
		}
		return nil
	})
}

// A forward dial that failed after a later one worked does not mark the
// leader unreachable (invariant 1): two requests dial at once over a
// flapping link, the first times out (1 s) after the second opened, and
// /healthz answered 503 for a leader the forwards reached, until a probe
// ran (review, 2026-12-07). A failure of a dial begun after the success
// still counts.
func TestForwardReachKeepsALaterDialsSuccess(t *testing.T) {
	n := &Node{stop: make(chan struct{})}
	close(n.stop) // no background probe: this tests the record only
	first := time.Now()
	n.fwdDialed(1, first.Add(time.Millisecond), nil)
	n.fwdDialed(1, first, errors.New("dial tcp: i/o timeout"))
	if err := n.fwdReach(1); err != nil {
		t.Fatalf("a dial that failed, begun before one that worked: fwdReach %v, want nil", err)
	}
	n.fwdDialed(1, time.Now().Add(time.Second), errors.New("connection refused"))
	if err := n.fwdReach(1); err == nil {
		t.Fatal("a dial that failed, begun after the last one that worked: fwdReach nil, want its error")
	}
}
