package server

// The context of a client's receive (clientCtx): it ends with the
// server's base context (shutdown), or when the client closes its
// connection. A long poll whose client had gone took the next message all
// the same: the message stayed hidden for its visibility timeout, its
// dequeue count rose (with MaxReceiveCount 1 it went to the dead-letter
// queue unseen), and the poll held one of --max-long-polls for its whole
// wait (soak and hostile-client audits, 2026-12-06).
//
// Invariants:
//  1. Nothing is read from the connection: the watcher asks the kernel
//     whether the peer has closed its side (POLLRDHUP), so a request the
//     client pipelined behind the poll stays for fasthttp.
//  2. It costs nothing until Done is asked for: the engine asks only when
//     a receive is about to wait (a forwarded receive asks at once); then
//     one goroutine looks every clientWatchEvery until the request ends.
//  3. A connection smqd cannot look at (not TCP, or not Linux) is never
//     taken for closed: the context is the base's.
//
// Owner: the request's goroutine (reset, finish); Done and Err may be
// called from any goroutine (mu). The watcher writes err under mu before
// it closes done, and closes exited when it returns.

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// clientWatchEvery is how often a waiting receive looks for its client's
// close: a message that arrives in the interval after it may still go to
// the poll that is ending.
const clientWatchEvery = 50 * time.Millisecond

type clientCtx struct {
	base   context.Context
	rc     syscall.RawConn // nil: nothing to watch (invariant 3)
	mu     sync.Mutex
	done   chan struct{} // guarded by mu; made by the first Done
	err    error         // guarded by mu
	quit   chan struct{} // closed by finish
	exited chan struct{} // closed by the watcher when it returns
}

// clientContext returns the context of a receive of the client of ctx,
// made once per request.
func (s *Server) clientContext(ctx *fasthttp.RequestCtx, st *reqState) context.Context {
	if st.cctx.base == nil {
		st.cctx.reset(s.base, ctx.Conn())
	}
	return &st.cctx
}

// reset readies x for a request on c.
func (x *clientCtx) reset(base context.Context, c net.Conn) {
	*x = clientCtx{base: base}
	if !canWatchPeer {
		return
	}
	c = rawConn(c)
	if sc, ok := c.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			x.rc = rc
		}
	}
}

// finish ends the watcher, if one runs, before the request's state is
// reused.
func (x *clientCtx) finish() {
	if x.quit != nil {
		close(x.quit)
		<-x.exited
	}
	*x = clientCtx{}
}

func (x *clientCtx) Deadline() (time.Time, bool) { return x.base.Deadline() }
func (x *clientCtx) Value(key any) any           { return x.base.Value(key) }

func (x *clientCtx) Done() <-chan struct{} {
	if x.rc == nil {
		return x.base.Done() // invariant 3
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.done == nil {
		x.done, x.quit, x.exited = make(chan struct{}), make(chan struct{}), make(chan struct{})
		go x.watch()
	}
	return x.done
}

func (x *clientCtx) Err() error {
	if x.rc == nil {
		return x.base.Err()
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.done == nil {
		return x.base.Err()
	}
	return x.err
}

func (x *clientCtx) watch() {
	defer close(x.exited)
	t := time.NewTicker(clientWatchEvery)
	defer t.Stop()
	for {
		select {
		case <-x.base.Done():
			x.end(x.base.Err())
			return
		case <-x.quit:
			return
		case <-t.C:
			if peerClosed(x.rc) {
				x.end(context.Canceled)
				return
			}
		}
	}
}

func (x *clientCtx) end(err error) {
	x.mu.Lock()
	x.err = err
	close(x.done)
	x.mu.Unlock()
}

// rawConn returns the TCP connection under the server's wrappers: TLS
// (tlsplain.go), the PROXY protocol, the connection limit.
func rawConn(c net.Conn) net.Conn {
	for {
		switch w := c.(type) {
		case *httpsConn:
			c = w.Conn
		case *tls.Conn:
			c = w.NetConn()
		case *proxyConn:
			c = w.Conn
		case *limitConn:
			c = w.Conn
		default:
			return c
		}
	}
}
