package cluster

// Forwarding: a node that does not lead a queue's shard hands the client's
// request to the node that does, over the authenticated cluster transport,
// and passes the answer back unchanged.
//
// A forward connection (kind 3) carries one request at a time, like an
// HTTP/1.1 keep-alive connection, and stays open for the next one:
//
//	request   length u32 | the client's request (bytes the server defines)
//	response  length u32 | the answer
//
// The forwarding node keeps idle connections per leader and opens another
// when all are busy (a long poll holds one for its wait), up to
// maxForwardConns. The receiving node hands each request to the handler the
// server installed (SetForwardHandler), which runs it through the whole API
// path, the client's signature check included: forwarding vouches for
// nothing but the bytes.
//
// Outcome. ErrNotSent: the request never left this node (no connection to
// the leader could be made); it is safe to try again. Any other error: the
// request may have run on the leader (the connection broke while waiting
// for its answer).
//
// Owner: the pool's mutex guards its idle lists and counts; a connection
// taken from the pool is owned by the request using it until put back.

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"
)

const (
	kindForward     = 3
	kindMember      = 4 // a membership change request for one shard's leader (members.go)
	maxForwardBytes = 16 << 20
	maxForwardConns = 2048 // per leader: waiting long polls each hold one
	// maxForwardPolls: of those, at most this many held by long polls
	// (ForwardPoll), so that the rest still carry sends, deletes and the
	// like: 2,100 long polls through one node held every connection to
	// their leader, and that node's sends waited for a free one and
	// failed with 503 "no reachable leader" (scale audit, 2026-12-06).
	maxForwardPolls = maxForwardConns - 256
	maxIdleForward  = 64 // idle connections kept per leader
)

// ErrNotSent: a forwarded request could not be sent to the shard's leader
// (not reachable); it did not run there.
var ErrNotSent = errors.New("cluster: the request could not be sent to the shard's leader")

// ErrCanceled: the forwarding node stopped waiting for the answer (its
// context ended); the request may have run on the leader.
var ErrCanceled = errors.New("cluster: stopped waiting for the leader's answer")

// ErrTooManyForwards: every forward connection to the leader is busy (or,
// for ForwardPoll, every one long polls may hold). Nothing was sent.
var ErrTooManyForwards = errors.New("cluster: too many requests in flight to the shard's leader")

// ForwardHandler runs a forwarded request and appends the answer to dst.
// ctx ends when the forwarding node stops waiting for the answer, or when
// the base context given to SetForwardHandler ends (forward_watch.go): a
// long poll should wait on it.
type ForwardHandler func(ctx context.Context, from uint64, req, dst []byte) []byte

type fwdHandler struct {
	base context.Context
	h    ForwardHandler
}

type fwdPool struct {
	mu    sync.Mutex
	idle  map[uint64][]net.Conn // guarded by mu
	open  map[uint64]int        // guarded by mu: connections per leader, idle or busy
	polls map[uint64]int        // guarded by mu: of the busy ones, those long polls hold (maxForwardPolls)
	// guarded by mu: why the last forward connection opened to a leader
	// failed, while no later one worked (forward_reach.go); probing: a
	// leader being dialled again for /healthz.
	unreached map[uint64]error
	probing   map[uint64]bool
	reached   map[uint64]time.Time // when the last forward dial that worked began

	// Tests: the caps when not 0 (maxForwardConns, maxForwardPolls).
	capConns, capPolls int
}

// SetForwardHandler installs the handler of requests other nodes forward
// here. Until it is set, forwarded requests are refused (their
// connections closed).
// The contexts handed to h derive from base.
func (n *Node) SetForwardHandler(base context.Context, h ForwardHandler) {
	n.fwdHandler.Store(&fwdHandler{base, h})
}

// Forward sends a request to node leader and appends its answer to dst,
// waiting at most timeout, or until ctx ends (ErrCanceled: a shutting-down
// node cuts its forwarded long polls short). See the file comment for what
// an error means.
func (n *Node) Forward(ctx context.Context, leader uint64, req, dst []byte, timeout time.Duration) ([]byte, error) {
	return n.forward(ctx, -1, leader, req, dst, timeout, false)
}

// ForwardShard is Forward for a request of shard: once this node learns
// that the shard's lead moved away from leader, the wait is cut short
// (forward_moved.go: ErrLeaderMoved, the request may have run).
func (n *Node) ForwardShard(ctx context.Context, shard int, leader uint64, req, dst []byte, timeout time.Duration) ([]byte, error) {
	return n.forward(ctx, shard, leader, req, dst, timeout, false)
}

// ForwardPoll is ForwardShard for a long poll, which may hold its
// connection for its whole wait: long polls may hold only so many of the
// connections to a leader (maxForwardPolls), and one more is refused at
// once with ErrTooManyForwards, so that other requests always find one.
func (n *Node) ForwardPoll(ctx context.Context, shard int, leader uint64, req, dst []byte, timeout time.Duration) ([]byte, error) {
	return n.forward(ctx, shard, leader, req, dst, timeout, true)
}

// forward is Forward, watched for its shard's leader moving when shard
// is one of the node's.
func (n *Node) forward(ctx context.Context, shard int, leader uint64, req, dst []byte, timeout time.Duration, poll bool) ([]byte, error) {
	if leader == n.cfg.NodeID {
		return dst, fmt.Errorf("%w: forwarding to itself", ErrNotSent)
	}
	c, err := n.fwdConn(leader, poll)
	if err != nil {
		return dst, err
	}
	if poll {
		defer n.fwdPollDone(leader)
	}
	deadline := time.Now().Add(timeout)
	c.SetDeadline(deadline)
	if err := writeFrame(c, req); err != nil {
		n.fwdDrop(leader, c)
		// The leader reads a request only whole: a short write ran nothing.
		return dst, fmt.Errorf("%w: %v", ErrNotSent, err)
	}
	// ctx ending cuts the wait short: the deadline moves to now, and the
	// connection is not reused (the answer may still be on its way).
	// AfterFunc costs no goroutine while ctx lives, and a context that
	// cannot end (most requests: only receives pass one) costs nothing.
	stop := noStop
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, func() { c.SetReadDeadline(time.Now()) })
	}
	var fc *fwdCall
	if shard >= 0 && shard < len(n.shards) {
		fc = n.watchForward(ctx, shard, leader, c, deadline)
	}
	// unwatch ends the watch once, and reports whether the leader moved
	// under the wait (its connection must not be reused then).
	unwatch := func() bool {
		if fc == nil {
			return false
		}
		cut := n.unwatchForward(fc)
		fc = nil
		return cut
	}
	fail := func(what string, err error) error {
		stop()
		moved := unwatch()
		n.fwdDrop(leader, c)
		switch {
		case ctx.Err() != nil:
			return fmt.Errorf("cluster: forwarded request to node %d: %w (%w)", leader, ErrCanceled, ctx.Err())
		case moved:
			return fmt.Errorf("cluster: forwarded request to node %d: %s: %w (%v)", leader, what, ErrLeaderMoved, err)
		}
		return fmt.Errorf("cluster: forwarded request to node %d: %s: %w", leader, what, err)
	}
	start := len(dst)
	dst, size, err := readFrame(c, dst)
	switch {
	case errors.Is(err, errFrameSize), errors.Is(err, errOutOfStep):
		stop()
		unwatch()
		n.fwdDrop(leader, c)
		return dst[:start], fmt.Errorf("cluster: forwarded request to node %d: %w", leader, err)
	case err != nil && len(dst) == start:
		return dst, fail("no answer", err)
	case err != nil:
		return dst[:start], fail("answer cut short", err)
	}
	dst = dst[:start]
	if stop() && !unwatch() {
		c.SetDeadline(time.Time{})
		n.fwdPut(leader, c)
	} else {
		unwatch()
		n.fwdDrop(leader, c) // the deadline may be moved under it yet
	}
	n.forwarded.Add(1)
	return dst[:len(dst)+size], nil
}

func noStop() bool { return true }

// fwdConn takes an idle connection to leader, or opens one; for a long
// poll, counted among the polls' (fwdPollDone gives the place back).
func (n *Node) fwdConn(leader uint64, poll bool) (net.Conn, error) {
	p := &n.fwd
	if poll {
		p.mu.Lock()
		if p.polls[leader] >= cmp.Or(p.capPolls, maxForwardPolls) {
			p.mu.Unlock()
			return nil, fmt.Errorf("%w: %w (long polls)", ErrNotSent, ErrTooManyForwards)
		}
		p.polls[leader]++
		p.mu.Unlock()
	}
	c, err := n.fwdTake(leader)
	if err != nil && poll {
		n.fwdPollDone(leader)
	}
	return c, err
}

// fwdPollDone gives back a long poll's place (fwdConn).
func (n *Node) fwdPollDone(leader uint64) {
	p := &n.fwd
	p.mu.Lock()
	p.polls[leader]--
	p.mu.Unlock()
}

// fwdTake takes an idle connection to leader, or opens one.
func (n *Node) fwdTake(leader uint64) (net.Conn, error) {
	p := &n.fwd
	for {
		p.mu.Lock()
		l := p.idle[leader]
		if len(l) == 0 {
			break
		}
		c := l[len(l)-1]
		p.idle[leader] = l[:len(l)-1]
		p.mu.Unlock()
		if alive(c) {
			return c, nil
		}
		n.fwdDrop(leader, c)
	}
	if p.open[leader] >= cmp.Or(p.capConns, maxForwardConns) {
		p.mu.Unlock()
		return nil, fmt.Errorf("%w: %w", ErrNotSent, ErrTooManyForwards)
	}
	p.open[leader]++
	p.mu.Unlock()
	addr := n.tr.peerAddr(leader)
	if addr == "" {
		n.fwdDrop(leader, nil)
		return nil, fmt.Errorf("%w: node %d's address is not known", ErrNotSent, leader)
	}
	began := time.Now()
	c, _, err := n.tr.dial(addr, kindForward, leader)
	n.fwdDialed(leader, began, err)
	if err != nil {
		n.fwdDrop(leader, nil)
		return nil, fmt.Errorf("%w: %v", ErrNotSent, err)
	}
	return c, nil
}

func (n *Node) fwdPut(leader uint64, c net.Conn) {
	p := &n.fwd
	p.mu.Lock()
	if len(p.idle[leader]) < maxIdleForward && !n.closed() {
		p.idle[leader] = append(p.idle[leader], c)
		p.mu.Unlock()
		if n.tr.peerAddr(leader) == "" {
			// Removed while this request ran (settleRemovals forgets the
			// peer, then its pooled connections): not kept for it.
			n.forgetForwards(leader)
		}
		return
	}
	p.open[leader]--
	p.mu.Unlock()
	c.Close()
}

// fwdDrop closes a connection (nil: one that was never opened) and frees
// its place.
func (n *Node) fwdDrop(leader uint64, c net.Conn) {
	if c != nil {
		c.Close()
	}
	p := &n.fwd
	p.mu.Lock()
	p.open[leader]--
	p.mu.Unlock()
}

// forgetForwards closes the idle forward connections to node id, a
// member removed (settleRemovals), and forgets its counts once none is
// busy. Nothing takes a connection to a node that is no member: the pool
// kept up to maxIdleForward sockets per removed member, dead once it
// stopped, for the life of the process (cluster leak audit, 2026-12-07).
func (n *Node) forgetForwards(id uint64) {
	p := &n.fwd
	p.mu.Lock()
	l := p.idle[id]
	delete(p.idle, id)
	if p.open[id] -= len(l); p.open[id] <= 0 {
		delete(p.open, id)
	}
	if p.polls[id] <= 0 {
		delete(p.polls, id)
	}
	p.mu.Unlock()
	for _, c := range l {
		c.Close()
	}
}

// closeForwards closes the idle forward connections (Close).
func (n *Node) closeForwards() {
	p := &n.fwd
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, l := range p.idle {
		for _, c := range l {
			c.Close()
		}
		p.open[id] -= len(l)
		delete(p.idle, id)
	}
}

// serveForward answers the requests of one forward connection from node
// from until it closes.
func (n *Node) serveForward(from uint64, c net.Conn) {
	var buf, resp []byte
	var ctx connCtx
	for {
		var size int
		var err error
		buf, size, err = readFrame(c, buf[:0])
		if err != nil {
			if errors.Is(err, errFrameSize) || errors.Is(err, errOutOfStep) {
				n.log.Warn("a bad forwarded request; closing", "peer", from, "err", err)
			}
			return
		}
		req := buf[:size]
		h := n.fwdHandler.Load()
		if h == nil {
			n.log.Warn("a forwarded request arrived before the API was ready; closing", "peer", from)
			return
		}
		ctx.reset(h.base, c)
		n.fwdActive.Add(1) // Close lets its answer out
		resp = h.h(&ctx, from, req, resp[:0])
		ok := ctx.stop()
		if ok {
			err = writeFrame(c, resp)
		}
		n.fwdActive.Add(-1)
		if !ok || err != nil {
			return // the forwarding node went away, or sent bytes unasked
		}
	}
}

// writeFrame writes a forward frame (length u32 | payload) in one call:
// writev on TCP; on TLS, which makes each Write records of its own (a
// system call each), from one pooled buffer.
func writeFrame(c net.Conn, payload []byte) error {
	var hdr [4]byte
	binary.LittleEndian.PutUint32(hdr[:], uint32(len(payload)))
	if _, ok := c.(*tls.Conn); ok {
		bp := tlsFramePool.Get().(*[]byte)
		b := append(append((*bp)[:0], hdr[:]...), payload...)
		_, err := c.Write(b)
		if cap(b) <= maxPooledTLSFrame {
			*bp = b[:0]
			tlsFramePool.Put(bp)
		}
		return err
	}
	bufs := net.Buffers{hdr[:], payload}
	_, err := bufs.WriteTo(c)
	return err
}

// The buffers of writeFrame on TLS; larger frames (big batches) are not
// kept.
const maxPooledTLSFrame = 64 << 10

var tlsFramePool = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// errFrameSize: a forward frame's length is 0 or above maxForwardBytes.
var errFrameSize = errors.New("a forwarded frame of a bad size")

// readFrame reads one forward frame (length u32 | payload) from c and
// appends its payload to dst, returning the payload's length. The sender
// writes a frame in one call and sends nothing more until it is answered,
// so one read usually brings the whole frame: the length and the payload
// are not read apart, which saved a system call on each side of every
// forwarded request. Bytes past the frame mean the connection is out of
// step (an error). On an error dst is returned with whatever was read
// appended (len(dst) unchanged: nothing arrived).
func readFrame(c net.Conn, dst []byte) ([]byte, int, error) {
	start := len(dst)
	dst = slices.Grow(dst, 4<<10)
	buf := dst[start:cap(dst)]
	got, err := io.ReadAtLeast(c, buf, 4)
	if err != nil {
		return dst[:start+got], 0, err
	}
	size := int(binary.LittleEndian.Uint32(buf))
	if size == 0 || size > maxForwardBytes {
		return dst[:start], 0, fmt.Errorf("%w: %d bytes", errFrameSize, size)
	}
	if got > 4+size {
		return dst[:start], 0, fmt.Errorf("%w: %d bytes past a frame of %d", errOutOfStep, got-4-size, size)
	}
	if need := 4 + size; need > len(buf) {
		dst = slices.Grow(dst[:start+got], need-got)
		buf = dst[start : start+need]
	} else {
		buf = buf[:need]
	}
	if _, err := io.ReadFull(c, buf[got:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF // part of the frame came
		}
		return dst[:start+4], 0, err
	}
	copy(buf, buf[4:]) // the payload where the length was
	return dst[:start+size], size, nil
}

// errOutOfStep: a forward connection carried bytes nobody asked for.
var errOutOfStep = errors.New("a forward connection out of step")
