package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
)

// A forward connection kept idle in the pool goes stale when the node at
// its other end restarts. The next forwarded request must not be sent
// down it: it would never be answered, and the client would be told that
// its request may or may not have run. The pool notices the closed
// connection and opens a new one.
func TestForwardAfterTheLeaderRestarts(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	echo := func(_ context.Context, from uint64, req, dst []byte) []byte {
		return append(append(dst, "re:"...), req...)
	}
	c.nodes[1].SetForwardHandler(context.Background(), echo)
	for i := 0; i < 3; i++ { // three in a row: one pooled connection, reused
		got, err := c.nodes[0].Forward(context.Background(), 2, []byte("one"), nil, 5*time.Second)
		if err != nil || string(got) != "re:one" {
			t.Fatalf("forward %d: %q, %v", i, got, err)
		}
	}
	c.stop(1)
	c.start(1)
	c.nodes[1].SetForwardHandler(context.Background(), echo)
	// The restarted node closed the pooled connection's other end; give
	// its FIN time to arrive, as it does long before a real next request.
	time.Sleep(100 * time.Millisecond)
	got, err := c.nodes[0].Forward(context.Background(), 2, []byte("two"), nil, 5*time.Second)
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

// Closing a node settles the operations waiting on its shards. A shard
// leader cut off from its quorum holds a send, made here and one forwarded
// from another node, that can never commit; Close must fail both (never
// acknowledge them) and return. Before, Close stopped the shards' loops,
// then waited for the transport's connections to end, and a forwarded
// request waited for a commit that no loop would ever make: a SIGTERM
// under load hung the process for good.
func TestCloseSettlesOperationsInFlight(t *testing.T) {
	// A 3 s election timeout: the leader left without its quorum steps
	// down one election timeout after the last stop (CheckQuorum), and
	// with 200 ms it did so before the two sends were proposed on a
	// loaded machine ("both sends proposed: 0 proposed", seen).
	c := startTestCluster(&testCluster{t: t, nodes: make([]*Node, 5), shards: 1, electionTicks: 150})
	c.preferredLeaders() // the leader picked here keeps the lead until the stops
	li, b := c.leader("q")
	if _, err := b.CreateQueue("q", engine.DefaultQueueConfig()); err != nil {
		t.Fatal(err)
	}
	fi := (li + 1) % 5
	for i := range c.nodes {
		if i != li && i != fi {
			c.stop(i)
		}
	}
	send := func() error {
		q, err := b.Queue("q")
		if err != nil {
			return err
		}
		_, err = q.Send([]engine.SendEntry{{Body: []byte("never committed")}}, nil)
		return err
	}
	c.nodes[li].SetForwardHandler(context.Background(), func(_ context.Context, from uint64, req, dst []byte) []byte {
		if err := send(); err != nil {
			return append(dst, "error: "+err.Error()...)
		}
		return append(dst, "ok"...)
	})
	sh := c.nodes[li].shards[0]
	before := sh.proposals.Load()
	direct := make(chan error, 1)
	go func() { direct <- send() }()
	forwarded := make(chan string, 1)
	go func() {
		got, err := c.nodes[fi].Forward(context.Background(), uint64(li+1), []byte("send"), nil, time.Minute)
		if err != nil {
			got = []byte("error: " + err.Error())
		}
		forwarded <- string(got)
	}()
	eventually(t, "both sends proposed", func() error {
		if n := sh.proposals.Load() - before; n < 2 {
			return fmt.Errorf("%d proposed", n)
		}
		return nil
	})
	closed := make(chan error, 1)
	go func() { closed <- c.nodes[li].Close() }()
	bound := time.After(20 * time.Second) // a hang, not a timing
	for done := 0; done < 3; done++ {
		select {
		case <-closed:
		case err := <-direct:
			if err == nil {
				t.Error("a send that cannot have committed was acknowledged")
			}
		case got := <-forwarded:
			if got == "ok" {
				t.Error("a forwarded send that cannot have committed was acknowledged")
			}
		case <-bound:
			t.Fatalf("Close, the send or the forwarded send still waits after 20 s (%d of 3 done)", done)
		}
	}
	c.nodes[li] = nil
}

// The context of a forwarded request: a long poll that ends by itself
// leaves the connection usable for the next request; the end of the base
// context ends the wait and the answer still goes back.
func TestForwardedRequestContext(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.nodes[1].SetForwardHandler(base, func(ctx context.Context, from uint64, req, dst []byte) []byte {
		select {
		case <-ctx.Done(): // a long poll: starts the watch
			return append(dst, "ended: "+ctx.Err().Error()...)
		case <-time.After(50 * time.Millisecond): // "a message came"
			if ctx.Err() != nil {
				return append(dst, "err after the wait"...)
			}
			return append(dst, "message"...)
		}
	})
	for i := 0; i < 3; i++ {
		got, err := c.nodes[0].Forward(context.Background(), 2, []byte("poll"), nil, 5*time.Second)
		if err != nil || string(got) != "message" {
			t.Fatalf("poll %d: %q, %v", i, got, err)
		}
	}
	c.nodes[0].fwd.mu.Lock()
	n := c.nodes[0].fwd.open[2]
	c.nodes[0].fwd.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d connections opened for three polls in a row, want 1 (reused)", n)
	}
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	got, err := c.nodes[0].Forward(context.Background(), 2, []byte("poll"), nil, 5*time.Second)
	if err != nil || string(got) != "ended: context canceled" {
		t.Fatalf("poll at the base's end: %q, %v", got, err)
	}
}

// Long polls forwarded to a leader may hold only some of the connections
// to it: 2,100 long polls through one node held all 2,048, and that node's
// sends to the same leader waited for one and failed with 503 "no
// reachable leader" (scale audit, 2026-12-06). Here, with 4 connections of
// which polls may hold 2, four waiting polls: two wait, two are refused at
// once, and a send still goes through.
func TestForwardedPollsLeaveRoomForOtherRequests(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	release := make(chan struct{})
	c.nodes[1].SetForwardHandler(context.Background(), func(ctx context.Context, from uint64, req, dst []byte) []byte {
		if string(req) == "poll" {
			select {
			case <-release:
			case <-ctx.Done():
			case <-time.After(20 * time.Second):
			}
		}
		return append(append(dst, "re:"...), req...)
	})
	defer close(release)
	n := c.nodes[0]
	n.fwd.mu.Lock()
	n.fwd.capConns, n.fwd.capPolls = 4, 2
	n.fwd.mu.Unlock()
	refused := make(chan error, 4)
	for range 4 {
		go func() {
			_, err := n.ForwardPoll(context.Background(), -1, 2, []byte("poll"), nil, 30*time.Second) // no shard: not watched
			refused <- err
		}()
	}
	for range 2 {
		select {
		case err := <-refused:
			if !errors.Is(err, ErrTooManyForwards) {
				t.Fatalf("a poll beyond the polls' share: %v, want ErrTooManyForwards", err)
			}
		case <-time.After(10 * time.Second): // a hang, not a timing
			t.Fatal("no poll was refused: polls may take every connection")
		}
	}
	got, err := n.Forward(context.Background(), 2, []byte("send"), nil, 5*time.Second)
	if err != nil || string(got) != "re:send" {
		t.Fatalf("a send while polls wait: %q, %v", got, err)
	}
}

// A request another node forwarded here and still running when this node
// closes gets its answer to the forwarding node: Close closed the
// connections first, and the forwarding node told its client "may or may
// not have run" for a request that had not run (drain audit, 2026-12-06).
func TestClusterCloseLetsForwardedRequestsAnswer(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	started := make(chan struct{})
	c.nodes[1].SetForwardHandler(context.Background(), func(_ context.Context, from uint64, req, dst []byte) []byte {
		close(started)
		time.Sleep(30 * time.Millisecond) // a handler that answers after the stop began
		return append(dst, "not-run"...)
	})
	type res struct {
		got []byte
		err error
	}
	done := make(chan res, 1)
	go func() {
		got, err := c.nodes[0].Forward(context.Background(), 2, []byte("DELETE /queues/q/messages"), nil, 5*time.Second)
		done <- res{got, err}
	}()
	<-started
	c.stop(1)
	if r := <-done; r.err != nil || string(r.got) != "not-run" {
		t.Fatalf("the forwarding node got %q, %v; want the answer", r.got, r.err)
	}
}
