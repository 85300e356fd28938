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
//  2. It costs nothing until Done (or AfterFunc) is asked for: the engine
//     asks only when a receive is about to wait; a forward asks at once.
//     Then the receive's connection joins the server's one watcher, which
//     looks at every watched connection with one poll(2) every
//     clientWatchEvery: one wake-up for all waiting receives, not one each
//     (a goroutine per poll waking every 50 ms cost 20 % of a CPU for
//     2,000 idle polls; the review of this change).
//  3. A connection smqd cannot look at (not TCP, or not Linux) is never
//     taken for closed: the context is the base's.
//  4. No goroutine outlives the request: clientCtx has an AfterFunc
//     method, which context.AfterFunc uses instead of starting a goroutine
//     that calls Done later (it did, after the pooled request state was
//     reused: a crash). finish takes the watch out of the watcher's set;
//     a Done after finish answers a closed channel.
//
// Owner: the request's goroutine (reset, finish, Done, Err, AfterFunc: the
// engine and the forward call them from it, or while it waits on them);
// a peerWatch's end is the watcher's or finish's, under watchSet.mu.

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/smqd/smqd/engine/cluster"
	"github.com/valyala/fasthttp"
)

// clientWatchEvery is how often the watcher looks for closed clients: a
// message that arrives in the interval after a client hung up may still
// go to its poll.
const clientWatchEvery = 100 * time.Millisecond

type clientCtx struct {
	base   context.Context
	set    *watchSet
	conn   net.Conn   // the request's connection, as fasthttp has it
	looked bool       // fd was looked up (watchable)
	fd     int        // the connection's descriptor; -1: nothing to watch (invariant 3)
	w      *peerWatch // made by the first Done or AfterFunc
}

// peerWatch is one watched receive.
type peerWatch struct {
	fd    int
	done  chan struct{}
	err   error         // written before done is closed (under watchSet.mu)
	after func()        // AfterFunc's f; run once, when done closes
	ended bool          // guarded by watchSet.mu
	ran   chan struct{} // guarded by watchSet.mu: closed when after has returned
}

// watchSet is a server's watcher: the receives waiting on their clients.
type watchSet struct {
	base    context.Context
	mu      sync.Mutex
	watches map[*peerWatch]struct{} // guarded by mu
	running bool                    // guarded by mu: the goroutine runs
}

// clientContext returns the context of a receive of the client of ctx,
// made once per request.
func (s *Server) clientContext(ctx *fasthttp.RequestCtx, st *reqState) context.Context {
	if st.cctx.base == nil {
		st.cctx.reset(s.base, &s.watch, ctx.Conn())
	}
	return &st.cctx
}

// reset readies x for a request on c.
func (x *clientCtx) reset(base context.Context, set *watchSet, c net.Conn) {
	*x = clientCtx{base: base, set: set, conn: c, fd: -1}
}

// watchable looks the connection's descriptor up, once: a receive that
// never waits pays nothing for it (invariant 2; it cost two allocations
// and about 300 ns on every receive, found in review).
func (x *clientCtx) watchable() bool {
	if !x.looked {
		x.looked = true
		if canWatchPeer {
			if sc, ok := rawConn(x.conn).(syscall.Conn); ok {
				if rc, err := sc.SyscallConn(); err == nil {
					rc.Control(func(fd uintptr) { x.fd = int(fd) })
				}
			}
		}
	}
	return x.fd >= 0
}

// finish takes x's watch out of the watcher (invariant 4) before the
// request's state is reused.
func (x *clientCtx) finish() {
	if x.w != nil {
		x.set.end(x.w, nil)
		x.set.mu.Lock()
		ran := x.w.ran
		x.set.mu.Unlock()
		if ran != nil {
			<-ran // the watcher may be in after, which reads x (parent.Err())
		}
	}
	*x = clientCtx{}
}

func (x *clientCtx) Deadline() (time.Time, bool) {
	if x.base == nil {
		return time.Time{}, false
	}
	return x.base.Deadline()
}

func (x *clientCtx) Value(key any) any {
	if x.base == nil {
		return nil
	}
	return x.base.Value(key)
}

func (x *clientCtx) Done() <-chan struct{} {
	switch {
	case x.base == nil:
		return closedChan // after finish (invariant 4)
	case !x.watchable():
		return x.base.Done() // invariant 3
	}
	return x.watch().done
}

func (x *clientCtx) Err() error {
	switch {
	case x.base == nil:
		return context.Canceled
	case x.w == nil:
		return x.base.Err()
	}
	x.set.mu.Lock()
	defer x.set.mu.Unlock()
	return x.w.err
}

// AfterFunc runs f once the context ends, with no goroutine of its own
// (context.AfterFunc uses it: invariant 4); stop keeps f from running.
func (x *clientCtx) AfterFunc(f func()) (stop func() bool) {
	if x.base == nil {
		go f()
		return func() bool { return false }
	}
	if !x.watchable() {
		return context.AfterFunc(x.base, f)
	}
	w := x.watch()
	set := x.set
	set.mu.Lock()
	if w.ended {
		set.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	w.after = f
	set.mu.Unlock()
	return func() bool {
		set.mu.Lock()
		defer set.mu.Unlock()
		if w.ended || w.after == nil {
			return false
		}
		w.after = nil
		return true
	}
}

// watch returns x's watch, adding it to the watcher at the first call.
func (x *clientCtx) watch() *peerWatch {
	if x.w == nil {
		x.w = &peerWatch{fd: x.fd, done: make(chan struct{})}
		x.set.add(x.w)
	}
	return x.w
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (s *watchSet) add(w *peerWatch) {
	s.mu.Lock()
	if err := s.base.Err(); err != nil {
		s.mu.Unlock()
		s.end(w, err)
		return
	}
	if s.watches == nil {
		s.watches = map[*peerWatch]struct{}{}
	}
	s.watches[w] = struct{}{}
	if !s.running {
		s.running = true
		go s.run()
	}
	s.mu.Unlock()
}

// end ends w once: with err (nil: its request finished; nothing waits on
// it then, and its after func does not run), out of the set.
func (s *watchSet) end(w *peerWatch, err error) {
	s.mu.Lock()
	if w.ended {
		s.mu.Unlock()
		return
	}
	w.ended = true
	delete(s.watches, w)
	f := w.after
	w.after = nil
	if err == nil {
		err = context.Canceled
		f = nil
	}
	w.err = err
	close(w.done)
	if f != nil {
		w.ran = make(chan struct{})
	}
	s.mu.Unlock()
	if f != nil {
		f()
		close(w.ran)
	}
}

// run is the watcher: every clientWatchEvery, one poll(2) over every
// watched connection; it ends the watches of clients gone, and every
// watch when the base context ends. It stops while nothing is watched.
func (s *watchSet) run() {
	t := time.NewTicker(clientWatchEvery)
	defer t.Stop()
	var ws []*peerWatch
	var fds []int
	for {
		select {
		case <-s.base.Done():
			s.mu.Lock()
			ws = ws[:0]
			for w := range s.watches {
				ws = append(ws, w)
			}
			s.running = false
			s.mu.Unlock()
			for _, w := range ws {
				s.end(w, s.base.Err())
			}
			return
		case <-t.C:
		}
		s.mu.Lock()
		if len(s.watches) == 0 {
			s.running = false
			s.mu.Unlock()
			return
		}
		ws, fds = ws[:0], fds[:0]
		for w := range s.watches {
			ws = append(ws, w)
			fds = append(fds, w.fd)
		}
		s.mu.Unlock()
		// A watch ended (and its descriptor reused) since the snapshot is
		// skipped by end, which ends each watch once.
		for i, gone := range peersClosed(fds) {
			if gone {
				s.end(ws[i], context.Canceled)
			}
		}
		clear(ws)
	}
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
		case *cluster.HandshakeBudget:
			c = w.Conn
		case *proxyConn:
			c = w.Conn
		case *limitConn:
			c = w.Conn
		default:
			return c
		}
	}
}
