package server

import (
	"context"
	"net"
	"testing"
	"time"
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
	c.settled() // the lead picked below stays: no balancer hand-over moves it
	wantStatus(t, c.envs[0].client().put("/queues/fw", ""), 201)
	lead := c.leaderOf("fw")
	fc := c.envs[(lead+1)%3].client()
	for i := range 1000 {
		if r := fc.get("/queues/fw/messages"); r.status != 404 {
			t.Fatalf("receive %d: %d", i, r.status)
		}
	}
}

// The watcher runs an AfterFunc's f (context.AfterFunc's: it calls
// parent.Err() and Cause(parent) on the clientCtx) after it releases
// watchSet.mu; the request goroutine may see Done closed, stop, finish and
// reset the pooled clientCtx meanwhile: finish waits for that f (it
// panicked, "context: internal error: missing cancel error"; review).
func TestClientCtxAfterFuncRacesFinish(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	set := &watchSet{base: base}
	// a spare connection to reset onto (as a reused reqState would be)
	spareC, _ := net.Dial("tcp", ln.Addr().String())
	spare, _ := ln.Accept()
	defer spareC.Close()
	defer spare.Close()
	const n = 100
	deadline := time.Now().Add(time.Second) // a bounded run
	for round := 0; time.Now().Before(deadline); round++ {
		xs := make([]clientCtx, n)
		clis := make([]net.Conn, n)
		srvs := make([]net.Conn, n)
		for i := range n {
			clis[i], _ = net.Dial("tcp", ln.Addr().String())
			srvs[i], _ = ln.Accept()
			xs[i].reset(base, set, srvs[i])
		}
		done := make(chan struct{}, n)
		for i := range n {
			go func(i int) {
				x := &xs[i]
				var ctx context.Context = x
				d := ctx.Done()
				stop := context.AfterFunc(ctx, func() {})
				<-d // woken by the client's close, as a receive is
				stop()
				x.finish()
				x.reset(base, set, spare) // the pooled state reused by another request
				done <- struct{}{}
			}(i)
		}
		for i := range n {
			clis[i].Close()
		}
		for range n {
			<-done
		}
		for i := range n {
			xs[i].finish()
			srvs[i].Close()
		}
	}
}
