package chaos

// A fault proxy on one directed link between two nodes: node i's
// --cluster-peers gives node j the proxy's address, so every connection
// node i opens to node j (its Raft messages to j, the requests it forwards
// to j, snapshot fetches) passes through the proxy of link i→j. Node j's
// messages to i travel on j's own connections, through link j→i: cutting
// one link is a one-way partition.
//
// Invariants:
//  1. Bytes of a connection are delivered in order or not at all; a
//     connection that lost bytes (blackholed) is closed before any later
//     byte of it could be delivered, so a node never reads a stream with a
//     hole in it (TCP never delivers one either).
//  2. Faults (Set) apply to connections already open and to new ones.
//  3. Close stops every goroutine the proxy started and waits for them.
//
// Faults, per link:
//   - Cut (blackhole): bytes are read and discarded, new connections are
//     accepted and then ignored — a silent partition, like a firewall
//     dropping packets: neither end sees the connection close. When the cut
//     is lifted those connections are closed (their streams have holes).
//   - Loss: each chunk read is held back by Retransmit with probability
//     Loss, as TCP delays a segment whose packet was dropped (order kept).
//   - Delay: every chunk is delivered Delay after it was read.
//
// Owner: mu guards the fault settings and the connection set; each
// connection's two pumps own their halves.

import (
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// Faults are the faults of one link.
type Faults struct {
	Cut        bool          // blackhole everything
	Loss       float64       // probability a chunk is held back by Retransmit
	Retransmit time.Duration // the hold of a "lost" chunk (default 200 ms)
	Delay      time.Duration // added to every chunk
}

// Proxy forwards connections from its listener to a target address,
// applying Faults.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	faults Faults              // guarded by mu
	conns  map[*proxyConn]bool // guarded by mu
	closed bool                // guarded by mu

	wg sync.WaitGroup
}

type proxyConn struct {
	client, server net.Conn
	holed          bool // guarded by Proxy.mu: bytes were dropped
}

// NewProxy listens on 127.0.0.1 (an ephemeral port) and forwards to target.
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[*proxyConn]bool{}}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr is the proxy's listening address.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Set replaces the link's faults. Lifting a cut closes the connections
// that lost bytes under it.
func (p *Proxy) Set(f Faults) {
	if f.Retransmit <= 0 {
		f.Retransmit = 200 * time.Millisecond
	}
	p.mu.Lock()
	p.faults = f
	var holed []*proxyConn
	if !f.Cut {
		for c := range p.conns {
			if c.holed {
				holed = append(holed, c)
			}
		}
	}
	p.mu.Unlock()
	for _, c := range holed {
		c.close()
	}
}

// Reset closes every open connection (both ends see it close), as when a
// host restarts; the link's faults stay.
func (p *Proxy) Reset() {
	p.mu.Lock()
	var all []*proxyConn
	for c := range p.conns {
		all = append(all, c)
	}
	p.mu.Unlock()
	for _, c := range all {
		c.close()
	}
}

func (p *Proxy) current() Faults {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.faults
}

func (c *proxyConn) close() {
	c.client.Close()
	if c.server != nil {
		c.server.Close()
	}
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		cl, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.wg.Add(1)
		go p.serve(cl)
	}
}

// serve runs one connection: it dials the target (unless the link is cut)
// and pumps both ways.
func (p *Proxy) serve(cl net.Conn) {
	defer p.wg.Done()
	c := &proxyConn{client: cl}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		cl.Close()
		return
	}
	p.conns[c] = true
	cut := p.faults.Cut
	if cut {
		c.holed = true
	}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
		c.close()
	}()
	if cut {
		// Blackholed from the start: swallow what the client sends until
		// the cut is lifted (Set closes the connection) or it goes away.
		io.Copy(io.Discard, cl)
		return
	}
	sv, err := net.DialTimeout("tcp", p.target, time.Second)
	if err != nil {
		return // the node is down: the client sees the connection close
	}
	p.mu.Lock()
	c.server = sv
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { p.pump(c, cl, sv); done <- struct{}{} }()
	go func() { p.pump(c, sv, cl); done <- struct{}{} }()
	<-done
	c.close()
	<-done
}

type chunk struct {
	at   time.Time // when it may be written
	data []byte
}

// pump copies src to dst through the faults: a reader goroutine stamps
// each chunk with its delivery time, this one writes them in order.
func (p *Proxy) pump(c *proxyConn, src, dst net.Conn) {
	q := make(chan chunk, 64)
	go func() {
		defer close(q)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				f := p.current()
				if f.Cut {
					p.mu.Lock()
					c.holed = true
					p.mu.Unlock()
				} else {
					at := time.Now().Add(f.Delay)
					if f.Loss > 0 && rand.Float64() < f.Loss {
						at = at.Add(f.Retransmit)
					}
					q <- chunk{at: at, data: buf[:n]}
				}
			}
			if err != nil {
				return
			}
		}
	}()
	for ch := range q {
		if d := time.Until(ch.at); d > 0 {
			time.Sleep(d)
		}
		p.mu.Lock()
		holed := c.holed
		p.mu.Unlock()
		if holed {
			continue // invariant 1: nothing after a hole
		}
		if _, err := dst.Write(ch.data); err != nil {
			c.close()
			for range q { // let the reader end (the close unblocks it)
			}
			return
		}
	}
}

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.Reset()
	p.wg.Wait()
}
