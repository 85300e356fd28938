package server

import (
	"context"
	"net"
	"testing"
)

// A forward registers context.AfterFunc on a receive's context, then the
// request's state is reused: no goroutine of the context package may call
// Done after that (clientwatch.go invariant 4). With a context type that
// had no AfterFunc method, one did, after finish zeroed the pooled state:
// a nil dereference or "sync: unlock of unlocked mutex", found in review
// (both tests below crashed the process).
func TestClientCtxAfterFuncEndsWithTheRequest(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cli, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	srv, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	set := &watchSet{base: base}
	var x clientCtx // one, reused, as in the pooled request state
	for range 20000 {
		x.reset(base, set, srv)
		var ctx context.Context = &x
		if ctx.Done() != nil { // as engine/cluster/forward.go
			stop := context.AfterFunc(ctx, func() {})
			stop() // the answer came
		}
		x.finish()
	}
	set.mu.Lock()
	defer set.mu.Unlock()
	if len(set.watches) != 0 {
		t.Fatalf("%d watches left", len(set.watches))
	}
}

// Receives through a node that does not lead the queue's shard.
func TestClusterForwardedReceivesInARow(t *testing.T) {
	c := startCluster(t, 3, 1)
	c.ready()
	wantStatus(t, c.envs[0].client().put("/queues/fw", ""), 201)
	lead := c.leaderOf("fw")
	fc := c.envs[(lead+1)%3].client()
	for i := range 1000 {
		if r := fc.get("/queues/fw/messages"); r.status != 404 {
			t.Fatalf("receive %d: %d", i, r.status)
		}
	}
}
