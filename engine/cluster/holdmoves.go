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
// a message due for its dead-letter queue stays hidden in its queue for a
// few seconds at a time and is moved once the hold ends; relays and
// exhausted notifications wait).
//
// Invariants:
//  1. A hold has a bound: a member holds for at most holdFor after it was
//     last asked, so a backup node that dies never leaves moves held; the
//     backup renews it every holdRenew, and ends it when it returns.
//  2. Holds are per backup: each is kept under its holder (the asking
//     node's id and the backup's nonce), moves are held while any is, and
//     a backup's release ends its own hold only (two backups through two
//     nodes run at once: review).
//  3. A member answers a hold only once no move that began before it runs
//     any more (engine Broker.MovesBusy; a move registers before it looks
//     at the hold), or after holdSettle: the backup reads nothing that a
//     move in flight could still change.
//  4. Best effort over versions and faults: a member that cannot be asked
//     (down, or of a version without the request) is logged, once per
//     backup; a move it makes during the backup may be missing from it
//     (docs/operations.md).
//
// Moves made by clients (receive from one queue, send to another, delete:
// smqctl redrive too) are not held: a backup may miss a message a client
// moves while it runs.

import (
	"crypto/rand"
	"encoding/binary"
	"sync"
	"time"
)

const (
	holdFor    = 30 * time.Second // how long a member holds after it was asked
	holdRenew  = 10 * time.Second // how often a backup asks again
	holdSettle = 10 * time.Second // how long a member waits for moves in flight (invariant 3): twice engine's move timeout
)

// holds are this node's holds by holder (invariant 2).
type holds struct {
	mu  sync.Mutex
	by  map[uint64]int64 // holder -> Unix ns
	max int64            // the latest deadline, mirrored in Node.holdUntil
}

// movesHeld is engine Options.MovesHeld of every shard's broker.
func (n *Node) movesHeld() bool { return time.Now().UnixNano() < n.holdUntil.Load() }

// holdMoves holds moves on this node for d from now under holder (0: ends
// that holder's hold), then waits for the moves in flight (invariant 3).
func (n *Node) holdMoves(holder uint64, d time.Duration) {
	now := time.Now().UnixNano()
	h := &n.holds
	h.mu.Lock()
	if h.by == nil {
		h.by = map[uint64]int64{}
	}
	if d > 0 {
		h.by[holder] = now + int64(d)
	} else {
		delete(h.by, holder)
	}
	h.max = 0
	for k, until := range h.by {
		if until <= now {
			delete(h.by, k)
			continue
		}
		h.max = max(h.max, until)
	}
	n.holdUntil.Store(h.max)
	h.mu.Unlock()
	if d <= 0 {
		return
	}
	deadline := time.Now().Add(holdSettle)
	for n.movesBusy() > 0 && time.Now().Before(deadline) {
		select {
		case <-n.stop:
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// movesBusy sums the moves running on this node's brokers.
func (n *Node) movesBusy() int64 {
	var busy int64
	for _, s := range n.shards {
		if b := s.broker(); b != nil {
			busy += b.MovesBusy()
		}
	}
	return busy
}

// holdMovesEverywhere holds moves on every member, this node included,
// until the returned function is called (invariant 1).
func (n *Node) holdMovesEverywhere() (release func()) {
	var nb [4]byte
	rand.Read(nb[:])
	nonce := binary.LittleEndian.Uint32(nb[:])
	holder := n.cfg.NodeID<<32 | uint64(nonce)
	var warned sync.Map // member ids already logged (invariant 4)
	ask := func(d time.Duration) {
		var wg sync.WaitGroup
		for _, id := range n.Members() {
			if id == n.cfg.NodeID {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				addr := n.tr.peerAddr(id)
				ok, err := false, error(nil)
				if addr != "" {
					ok, err = n.tr.askMember(id, addr, memberHold, int(nonce), uint64(d.Milliseconds()), "")
				}
				if _, seen := warned.Load(id); !ok && d > 0 && !seen {
					warned.Store(id, true)
					n.log.Warn("backup: a member was not asked to hold dead-letter moves and relays; one it makes while the backup runs may be missing from it",
						"member", id, "err", err)
				}
			}()
		}
		n.holdMoves(holder, d)
		wg.Wait()
	}
	ask(holdFor)
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
				ask(holdFor)
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
		ask(0)
	}
}
