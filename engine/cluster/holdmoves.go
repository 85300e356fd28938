package cluster

// Holding moves between queues while a cluster backup runs.
//
// A cluster backup reads the shards one after another, and each shard
// queue after queue: it is not one instant. A message that smqd itself
// moves from a queue not read yet to one already read (a dead-letter move,
// within a shard or to another; a topic's delivery relayed to a queue on
// another shard) would be in neither (backup audit, 2026-12-06: 500 of 500
// dead-lettered messages missing). So the node that runs a backup asks
// every member to hold such moves until it ends (engine Options.MovesHeld:
// a message due for its dead-letter queue stays hidden in its queue and
// is moved once visible again; relays and exhausted notifications wait for
// their push lease).
//
// Invariants:
//  1. A hold has a bound: a member holds for at most holdFor after it was
//     last asked, so a backup node that dies never leaves moves held; the
//     backup renews it every holdRenew, and ends it when it returns.
//  2. Best effort over versions and faults: a member that cannot be asked
//     (down, or of a version without the request) is logged; a move it
//     makes during the backup may be missing from it (docs/operations.md).
//
// Moves made by clients (receive from one queue, send to another, delete:
// smqctl redrive too) are not held: a backup may miss a message a client
// moves while it runs.

import (
	"time"
)

const (
	holdFor   = 30 * time.Second // how long a member holds after it was asked
	holdRenew = 10 * time.Second // how often a backup asks again
)

// movesHeld is engine Options.MovesHeld of every shard's broker.
func (n *Node) movesHeld() bool { return time.Now().UnixNano() < n.holdUntil.Load() }

// holdMoves holds moves on this node for d from now (0: ends a hold).
func (n *Node) holdMoves(d time.Duration) {
	n.holdUntil.Store(time.Now().Add(d).UnixNano())
}

// holdMovesEverywhere holds moves on every member until the returned
// function is called (invariant 1).
func (n *Node) holdMovesEverywhere() (release func()) {
	ask := func(d time.Duration, warn bool) {
		n.holdMoves(d)
		for _, id := range n.Members() {
			if id == n.cfg.NodeID {
				continue
			}
			addr := n.tr.peerAddr(id)
			ok, err := false, error(nil)
			if addr != "" {
				ok, err = n.tr.askMember(addr, memberHold, 0, uint64(d.Milliseconds()), "")
			}
			if !ok && warn {
				n.log.Warn("backup: a member was not asked to hold dead-letter moves and relays; one it makes while the backup runs may be missing from it",
					"member", id, "err", err)
			}
		}
	}
	ask(holdFor, true)
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(holdRenew)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-n.stop:
				return
			case <-t.C:
				ask(holdFor, false)
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
		ask(0, false)
	}
}
