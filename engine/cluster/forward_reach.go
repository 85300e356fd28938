package cluster

// A leader this node hears from but cannot open a forward connection to
// (a link cut one way: its own connections reach this node, this node's
// do not reach it) gets every request this node forwards to it answered
// 503, while the shard has a leader. /healthz must then say so, or a load
// balancer keeps sending this node its share of those requests (survive
// audit, 2026-12-07: with the link from node 3 to node 1 cut, node 3
// answered every request for node 1's shards 503 for minutes, /healthz
// 200 and `smqctl cluster status` "healthy").
//
// Invariants:
//  1. fwd.unreached[leader] is set by a forward dial to leader that failed
//     and cleared by one that worked (fwdTake, and the probe below). A
//     failure sets it only if its dial began after the last one that
//     worked: a dial that timed out (1 s) after a later one opened set it
//     back, and /healthz answered 503 for a leader the forwards reached
//     (review, 2026-12-07).
//  2. While it is set, Health names that leader not reachable, and asks
//     again in the background, one dial at a time per leader, so that
//     /healthz comes back once the leader is reachable though no request
//     is forwarded meanwhile (a load balancer sends none to an unhealthy
//     node). A probe is bounded by the dial's timeouts (handshake.go).

import "time"

// fwdDialed records the outcome of a forward dial to leader that began
// at began (invariant 1).
func (n *Node) fwdDialed(leader uint64, began time.Time, err error) {
	p := &n.fwd
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil {
		delete(p.unreached, leader)
		if p.reached == nil {
			p.reached = map[uint64]time.Time{}
		}
		if began.After(p.reached[leader]) {
			p.reached[leader] = began
		}
		return
	}
	if began.Before(p.reached[leader]) {
		return // a later dial worked
	}
	if p.unreached == nil {
		p.unreached = map[uint64]error{}
	}
	p.unreached[leader] = err
}

// fwdReach is nil unless the last forward connection this node opened to
// leader failed (and none worked since); then it returns why, and dials
// leader again in the background unless a probe already runs.
func (n *Node) fwdReach(leader uint64) error {
	p := &n.fwd
	p.mu.Lock()
	err := p.unreached[leader]
	probe := err != nil && !p.probing[leader] && !n.closed()
	if probe {
		if p.probing == nil {
			p.probing = map[uint64]bool{}
		}
		p.probing[leader] = true
	}
	p.mu.Unlock()
	if probe {
		go func() {
			if addr := n.tr.peerAddr(leader); addr != "" {
				began := time.Now()
				c, _, derr := n.tr.dial(addr, kindForward, leader)
				if derr == nil {
					c.Close()
				}
				n.fwdDialed(leader, began, derr)
			}
			p.mu.Lock()
			delete(p.probing, leader)
			p.mu.Unlock()
		}()
	}
	return err
}
