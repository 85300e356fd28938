package cluster

// Dead-letter moves between shards. A queue's dead-letter policy may name a
// queue of another shard (engine/deadletter_elsewhere.go): the source
// shard's leader, in the receive that finds the messages due, hands them to
// the target shard's leader, which stores them (engine.Queue.AcceptMoved)
// and answers once they are durable there (with --sync always, on a
// majority of its replicas). Only then does the source delete them.
//
// A move connection (kind 5) carries one batch at a time, request then
// answer, and stays open for the next (up to moveIdle between batches):
//
//	request   length u32 | target queue (u16 length, bytes) | count u8 | per message:
//	          enqueue ms i64 | expire ms i64 | priority u8 | props (u32 length, bytes) | body (u32 length, bytes)
//	answer    length u32 | status u8 | text
//
// The sender keeps up to maxIdleMoves idle connections per node (a dial
// is a TCP connect and the cluster handshake, with --cluster-tls-* a TLS
// handshake too), and takes one only if its other end has not closed it
// (alive: the serving node's idle timeout, its restart, or a node of an
// earlier version, which closes after one batch). A connection that
// breaks after its request was sent fails the hop as a lost answer does.
//
// Status: moveStored; moveNotRun (the node does not lead the target's
// shard, or was handing its lead over, and stored nothing: the sender
// routes again); moveGone (the queue does not exist on the shard's
// leader: engine.ErrQueueNotExist); moveRefused (the text says why: the
// batch is bad, a storage failure).
//
// The same hop carries a topic's deliveries to a queue of another shard
// (engine/topic_relay.go): a batch of MovedMessages with EnqueueMs and
// ExpireMs 0.
//
// Trust: a move is taken only over the authenticated transport, as Raft's
// appends are; it carries no client's signature because no client sent
// it. A node that holds the cluster key can store messages in any queue
// through it, as it can through its appends: that is what the key
// protects (docs/operations.md).
//
// Routing (moveDeadLetter) tries again, within the receive's bound on the
// hop, while the target's shard has no leader or its lead moves; an error
// leaves the messages hidden in the source (the engine's invariant 3).

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/smqd/smqd/engine"
)

const (
	kindMove = 5 // a dead-letter move to a shard's leader (deadletter.go)

	moveStored  = 0
	moveNotRun  = 1
	moveRefused = 2
	moveGone    = 3
)

// errMoveNotRun: the node asked did not lead the target's shard and stored
// nothing; the move is routed again.
var errMoveNotRun = errors.New("cluster: the node asked does not lead the dead-letter queue's shard")

// deadLetterRouter is a shard broker's engine.DeadLetterRouter: the queues
// of the node's other shards.
type deadLetterRouter struct {
	n     *Node
	shard int
}

func (r deadLetterRouter) Elsewhere(name string) bool { return r.n.ShardOf(name) != r.shard }

// Exists looks at this node's replica of the queue's shard: on the
// source's leader, it may trail the target's leader by the replication lag.
func (r deadLetterRouter) Exists(name string) bool {
	b := r.n.Broker(r.n.ShardOf(name))
	if b == nil {
		return false
	}
	_, err := b.Queue(name)
	return err == nil
}

// CatchUp lets this node's replica of the queue's shard apply what the
// shard's leader had committed (read.go), for at most 2 s.
func (r deadLetterRouter) CatchUp(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := r.n.shards[r.n.ShardOf(name)].readBarrier(ctx); err != nil {
		r.n.log.Debug("a queue of another shard named before its shard answered a read barrier", "queue", name, "err", err)
	}
}

// Move carries dead letters, and a topic's deliveries to a queue of
// another shard (engine/topic_relay.go), each batch counted by its kind.
func (r deadLetterRouter) Move(ctx context.Context, target string, ms []engine.MovedMessage) error {
	err := r.n.moveDeadLetter(ctx, target, ms)
	stored, failed := &r.n.hopsStored, &r.n.hopsFailed
	if len(ms) > 0 && ms[0].Delivery() {
		stored, failed = &r.n.relaysStored, &r.n.relaysFailed
		if errors.Is(err, engine.ErrQueueNotExist) {
			// The relay drops deliveries to a deleted queue: not retried,
			// so not "failed" (scale audit, 2026-12-06: 860 such hops
			// counted as failed and "retried").
			failed = &r.n.relaysDropped
		}
	}
	if err != nil {
		failed.Add(1)
	} else {
		stored.Add(1)
	}
	return err
}

// moveDeadLetter stores ms in the queue named target, on this node when it
// leads the queue's shard, else on the leader, routing again until ctx
// ends while no leader takes it.
func (n *Node) moveDeadLetter(ctx context.Context, target string, ms []engine.MovedMessage) error {
	var req []byte
	for {
		b, leader, err := n.Route(target)
		switch {
		case b != nil:
			q, qerr := b.Queue(target)
			if qerr != nil {
				return qerr
			}
			err = q.AcceptMoved(ms)
			if !errors.Is(err, engine.ErrRetryOnLeader) {
				return err
			}
		case err == nil:
			if req == nil {
				req = appendMove(nil, target, ms)
			}
			if err = n.sendMove(ctx, leader, req); !errors.Is(err, errMoveNotRun) {
				return err
			}
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("cluster: dead letters for queue %s not moved (%v): %w", target, err, ctx.Err())
		case <-t.C:
		}
	}
}

// Idle move connections (the file comment).
const (
	maxIdleMoves = 8                // kept per node
	moveIdle     = 60 * time.Second // a served connection waits this long for its next batch
)

// movePool is the idle move connections by node.
type movePool struct {
	mu   sync.Mutex
	idle map[uint64][]net.Conn // guarded by mu
}

// moveConn takes an idle move connection to node id whose other end is
// still open, or nil.
func (n *Node) moveConn(id uint64) net.Conn {
	p := &n.moves
	for {
		p.mu.Lock()
		l := p.idle[id]
		if len(l) == 0 {
			p.mu.Unlock()
			return nil
		}
		c := l[len(l)-1]
		p.idle[id] = l[:len(l)-1]
		p.mu.Unlock()
		if alive(c) {
			return c
		}
		c.Close()
	}
}

// movePut keeps c for the next batch to node id, or closes it.
func (n *Node) movePut(id uint64, c net.Conn) {
	p := &n.moves
	p.mu.Lock()
	if len(p.idle[id]) < maxIdleMoves && !n.closed() {
		if p.idle == nil {
			p.idle = map[uint64][]net.Conn{}
		}
		p.idle[id] = append(p.idle[id], c)
		p.mu.Unlock()
		if n.tr.peerAddr(id) == "" {
			n.forgetMoves(id) // removed meanwhile (forgetForwards)
		}
		return
	}
	p.mu.Unlock()
	c.Close()
}

// forgetMoves closes the idle move connections to node id, a member
// removed (settleRemovals; forgetForwards).
func (n *Node) forgetMoves(id uint64) {
	p := &n.moves
	p.mu.Lock()
	l := p.idle[id]
	delete(p.idle, id)
	p.mu.Unlock()
	for _, c := range l {
		c.Close()
	}
}

// closeMoves closes the idle move connections (Close).
func (n *Node) closeMoves() {
	p := &n.moves
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, l := range p.idle {
		for _, c := range l {
			c.Close()
		}
		delete(p.idle, id)
	}
}

// sendMove sends one move request to node leader and reads its answer.
// errMoveNotRun: nothing was stored (no connection, or the node did not
// lead the shard); any other error: the batch may have been stored.
func (n *Node) sendMove(ctx context.Context, leader uint64, req []byte) error {
	c := n.moveConn(leader)
	if c == nil {
		addr := n.tr.peerAddr(leader)
		if addr == "" {
			return fmt.Errorf("%w: node %d's address is not known", errMoveNotRun, leader)
		}
		var err error
		if c, _, err = n.tr.dial(addr, kindMove, leader); err != nil {
			return fmt.Errorf("%w: %v", errMoveNotRun, err)
		}
		n.moveDials.Add(1)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(10 * time.Second)
	}
	c.SetDeadline(deadline)
	if err := writeFrame(c, req); err != nil {
		c.Close()
		return fmt.Errorf("%w: %v", errMoveNotRun, err) // a node reads a request only whole
	}
	ans, size, err := readFrame(c, nil)
	if err != nil {
		c.Close()
		return fmt.Errorf("cluster: move to node %d: no answer: %w", leader, err)
	}
	c.SetDeadline(time.Time{})
	n.movePut(leader, c)
	return moveAnswer(leader, ans[:size])
}

// moveAnswer maps a move's answer to sendMove's result.
func moveAnswer(leader uint64, ans []byte) error {
	if len(ans) == 0 {
		return fmt.Errorf("cluster: move to node %d: an empty answer", leader)
	}
	switch ans[0] {
	case moveStored:
		return nil
	case moveNotRun:
		return fmt.Errorf("%w (node %d: %s)", errMoveNotRun, leader, ans[1:])
	case moveGone:
		return fmt.Errorf("%w (node %d: %s)", engine.ErrQueueNotExist, leader, ans[1:])
	}
	return fmt.Errorf("cluster: dead-letter move refused by node %d: %s", leader, ans[1:])
}

// serveMove answers the move requests of one connection from node from,
// one at a time, until it closes or stays idle for moveIdle.
func (n *Node) serveMove(from uint64, c net.Conn) {
	var buf []byte
	for {
		c.SetDeadline(time.Now().Add(moveIdle))
		req, size, err := readFrame(c, buf[:0])
		if err != nil {
			return
		}
		buf = req
		c.SetDeadline(time.Now().Add(15 * time.Second))
		if !n.serveOneMove(from, c, req[:size]) {
			return
		}
	}
}

// serveOneMove stores one batch and answers it; false: the connection
// must close (a bad request, or a test's fault).
func (n *Node) serveOneMove(from uint64, c net.Conn, req []byte) bool {
	target, ms, err := parseMove(req)
	if err != nil {
		n.log.Warn("a bad move request; closing", "peer", from, "err", err)
		return false
	}
	if n.testDropMoves.Add(-1) >= 0 {
		return false // a test's fault: a leader lost before it stored anything
	}
	status, text := moveStored, ""
	b, _, rerr := n.Route(target)
	switch {
	case rerr != nil || b == nil:
		status, text = moveNotRun, "not the leader of the queue's shard"
	default:
		q, err := b.Queue(target)
		if err == nil {
			err = q.AcceptMoved(ms)
		}
		switch {
		case errors.Is(err, engine.ErrRetryOnLeader):
			status, text = moveNotRun, err.Error()
		case errors.Is(err, engine.ErrQueueNotExist):
			status, text = moveGone, err.Error()
		case err != nil:
			status, text = moveRefused, err.Error()
			n.log.Warn("move to this shard refused", "peer", from, "queue", target, "messages", len(ms), "err", err)
		}
	}
	if status == moveStored && n.testMuteMoves.Add(-1) >= 0 {
		return false // a test's fault: stored, and the answer lost
	}
	return writeFrame(c, append([]byte{byte(status)}, text...)) == nil
}

// appendMove encodes a move request.
func appendMove(dst []byte, target string, ms []engine.MovedMessage) []byte {
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(target)))
	dst = append(dst, target...)
	dst = append(dst, byte(len(ms)))
	for i := range ms {
		m := &ms[i]
		dst = binary.LittleEndian.AppendUint64(dst, uint64(m.EnqueueMs))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(m.ExpireMs))
		dst = append(dst, byte(m.Priority))
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(m.Props)))
		dst = append(dst, m.Props...)
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(m.Body)))
		dst = append(dst, m.Body...)
	}
	return dst
}

var errBadMove = errors.New("cluster: malformed dead-letter move")

// parseMove decodes a move request; the messages alias b. The engine
// checks what they hold (AcceptMoved).
func parseMove(b []byte) (target string, ms []engine.MovedMessage, err error) {
	take := func(k int) []byte {
		if k < 0 || len(b) < k {
			err = errBadMove
			return nil
		}
		v := b[:k:k]
		b = b[k:]
		return v
	}
	u32 := func() int {
		if v := take(4); v != nil {
			return int(binary.LittleEndian.Uint32(v))
		}
		return -1
	}
	if v := take(2); v != nil {
		target = string(take(int(binary.LittleEndian.Uint16(v))))
	}
	var count int
	if v := take(1); v != nil {
		count = int(v[0])
	}
	if err == nil && (target == "" || count < 1 || count > engine.MaxBatch) {
		return "", nil, errBadMove
	}
	ms = make([]engine.MovedMessage, 0, count)
	for i := 0; i < count && err == nil; i++ {
		var m engine.MovedMessage
		if v := take(17); v != nil {
			m.EnqueueMs = int64(binary.LittleEndian.Uint64(v))
			m.ExpireMs = int64(binary.LittleEndian.Uint64(v[8:]))
			m.Priority = int(v[16])
		}
		m.Props = take(u32())
		m.Body = take(u32())
		ms = append(ms, m)
	}
	if err == nil && len(b) != 0 {
		err = errBadMove
	}
	if err != nil {
		return "", nil, err
	}
	return target, ms, nil
}
