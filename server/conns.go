package server

// The connection cap (Options.MaxConns). Every listener given to Serve is
// wrapped in a limitListener; all of them share one pool of slots, so the
// cap holds for the Server as a whole.
//
// At the cap, Accept waits for a slot instead of accepting and refusing:
// new connections queue in the kernel's backlog and are served as others
// close. A refusal would have to be an HTTP answer, and a plain-text one is
// dangerous here (@alicloud/mns takes a non-XML error for success, spec
// §0.3); a TLS connection could not even be answered before its handshake.
// A client that cannot get in sees a connect timeout, never a wrong answer.
//
// Invariant: a slot is taken before Accept returns a connection and given
// back exactly once, when that connection is closed (or when Accept fails).
// Memory is therefore bounded by MaxConns times the cost of one connection,
// whatever the clients send; docs/benchmarks.md has that cost measured.
//
// An Accept that fails for want of a resource (no file descriptor left:
// EMFILE, ENFILE; no buffer or memory) is tried again after a pause, up to
// a second, as net/http does. fasthttp takes any error but a timeout as
// the listener's end, and smqd then shut down: 1,100 connections under an
// open-file limit of 1,024 stopped the process (scale audit, 2026-12-06).

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// connSlots is the shared pool of connection slots of one Server.
type connSlots struct {
	slots chan struct{} // one token per open connection, and one for a pending Accept; cap = MaxConns
	// held counts the connections Accept returned and that are not closed
	// yet: a pending Accept holds a slot before its connection arrives,
	// so len(slots) read one more than the connections while the server
	// waited for one (smqd_http_connections: metrics audit, 2026-12-07).
	held    atomic.Int64
	waits   atomic.Uint64 // Accept calls that found every slot taken
	lastLog atomic.Int64  // unix nanoseconds of the last "at the cap" log line
	// acceptFails counts Accept errors tried again (no descriptor left).
	acceptFails atomic.Uint64
	lastFailLog atomic.Int64 // unix nanoseconds of the last such log line
}

func newConnSlots(max int) *connSlots { return &connSlots{slots: make(chan struct{}, max)} }

// open returns the number of slots held: the connections and a pending
// Accept's.
func (c *connSlots) open() int { return len(c.slots) }

// connections returns the number of connections held open.
func (c *connSlots) connections() int64 { return c.held.Load() }

// limitListener is a listener whose Accept holds a slot for each
// connection it returns.
type limitListener struct {
	net.Listener
	cs     *connSlots
	s      *Server
	done   chan struct{} // closed by Close: a waiting Accept returns
	closed sync.Once
}

func (s *Server) limit(ln net.Listener, cs *connSlots) *limitListener {
	return &limitListener{Listener: ln, cs: cs, s: s, done: make(chan struct{})}
}

func (l *limitListener) Accept() (net.Conn, error) {
	cs := l.cs
	select {
	case cs.slots <- struct{}{}:
	default:
		cs.waits.Add(1)
		if now := time.Now().UnixNano(); now-cs.lastLog.Load() > int64(time.Minute) {
			cs.lastLog.Store(now)
			l.s.log.Warn("connection cap reached: new connections wait until one closes", "max_conns", cap(cs.slots))
		}
		select {
		case cs.slots <- struct{}{}:
		case <-l.done:
			return nil, net.ErrClosed
		}
	}
	var pause time.Duration
	for {
		c, err := l.Listener.Accept()
		if err == nil {
			cs.held.Add(1)
			return &limitConn{Conn: c, slots: cs.slots, held: &cs.held}, nil
		}
		if !acceptRetryable(err) {
			<-cs.slots
			return nil, err
		}
		cs.acceptFails.Add(1)
		pause = min(max(2*pause, 5*time.Millisecond), time.Second)
		if now := time.Now().UnixNano(); now-cs.lastFailLog.Load() > int64(time.Minute) {
			cs.lastFailLog.Store(now)
			l.s.log.Error("accept failed: trying again (raise the open-file limit, or lower --max-conns)", "err", err, "max_conns", cap(cs.slots))
		}
		select {
		case <-time.After(pause):
		case <-l.done:
			<-cs.slots
			return nil, net.ErrClosed
		}
	}
}

// acceptRetryable reports whether an Accept error is a passing want of a
// resource, after which the listener still works.
func acceptRetryable(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM)
}

func (l *limitListener) Close() error {
	l.closed.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitConn gives its slot back when it is closed the first time.
type limitConn struct {
	net.Conn
	slots    chan struct{}
	held     *atomic.Int64 // connSlots.held
	released atomic.Bool
	linger   atomic.Bool // set by handleTransportError: close without a reset
}

// lingerTime bounds how long a lingering close reads what the client
// still sends (up to drainLimit bytes).
const lingerTime = time.Second

func (c *limitConn) Close() error {
	if tc, ok := c.Conn.(*net.TCPConn); ok && c.linger.Load() {
		// The answer is written; the client may still be sending the
		// request it belongs to. Closing with those bytes unread makes
		// the kernel send a reset, which destroys the answer in the
		// client's receive buffer (headers over the read buffer: the
		// client saw ECONNRESET, not the 400; hostile-client audit). So
		// end the sending side first, and read the rest away for a while.
		tc.CloseWrite()
		tc.SetReadDeadline(time.Now().Add(lingerTime))
		io.CopyN(io.Discard, tc, drainLimit)
	}
	err := c.Conn.Close()
	if c.released.CompareAndSwap(false, true) {
		c.held.Add(-1)
		<-c.slots
	}
	return err
}
