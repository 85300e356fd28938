package cluster

// Reads that span shards (ListQueue) come from this node's replicas, which
// may trail their leaders by the replication lag: a queue whose creation
// another node acknowledged a moment ago could be missing from a list
// asked of this one (the SDK suites, run against a cluster under load,
// failed so). ReadBarrier closes that gap with Raft's ReadIndex: for every
// shard it learns the commit index the shard's leader had when the barrier
// began (the leader confirms it still leads with a round of heartbeats),
// then waits until this node's replica has applied that far. What was
// acknowledged before the barrier is then in the replicas read after it.
//
// Owner: readMu guards reads, the waiting barriers by request id; the
// shard's loop delivers Raft's answers (handleReady).

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"go.etcd.io/raft/v3"
)

// readRetry is how often a barrier asks again: etcd raft drops a ReadIndex
// it cannot serve (no leader known, or a new leader that has not committed
// an entry of its term yet).
const readRetry = 100 * time.Millisecond

// ReadBarrier waits until this node's replica of every shard has applied
// everything its leader had committed when ReadBarrier was called, or ctx
// ends (ErrNoLeader: some shard's leader did not answer).
func (n *Node) ReadBarrier(ctx context.Context) error {
	errs := make(chan error, len(n.shards))
	for _, s := range n.shards {
		go func() { errs <- s.readBarrier(ctx) }()
	}
	var first error
	for range n.shards {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (s *shard) readBarrier(ctx context.Context) error {
	idx, err := s.readIndex(ctx)
	if err != nil {
		return err
	}
	return s.waitApplied(ctx, idx, time.Millisecond)
}

// readIndex asks the shard's leader, through Raft's ReadIndex, for the
// commit index it has now (it confirms its lead first), asking again every
// readRetry until ctx ends.
func (s *shard) readIndex(ctx context.Context) (uint64, error) {
	id := s.readSeq.Add(1)
	ch := make(chan uint64, 1)
	s.readMu.Lock()
	if s.reads == nil {
		s.reads = map[uint64]chan uint64{}
	}
	s.reads[id] = ch
	s.readMu.Unlock()
	defer func() {
		s.readMu.Lock()
		delete(s.reads, id)
		s.readMu.Unlock()
	}()
	rctx := binary.LittleEndian.AppendUint64(nil, id)
	ask := func() { s.do(func() { s.rn.ReadIndex(rctx) }) }
	ask()
	retry := time.NewTicker(readRetry)
	defer retry.Stop()
	for {
		select {
		case idx := <-ch:
			return idx, nil
		case <-retry.C:
			ask()
		case <-ctx.Done():
			return 0, fmt.Errorf("shard %d: no answer from its leader: %w", s.id, ErrNoLeader)
		}
	}
}

// waitApplied waits until this replica has applied index idx, looking
// every poll, or ctx ends.
func (s *shard) waitApplied(ctx context.Context, idx uint64, poll time.Duration) error {
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		if s.applied() >= idx {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("shard %d: this replica did not apply index %d in time: %w", s.id, idx, ErrNoLeader)
		case <-t.C:
		}
	}
}

// applied is the last index this replica's broker applied (0 while it is
// rebuilt).
func (s *shard) applied() uint64 {
	if b := s.broker(); b != nil {
		if rs, ok := b.ReplicaStats(); ok {
			return rs.Applied
		}
	}
	return 0
}

// deliverReads (the loop) hands Raft's answers to the barriers waiting.
func (s *shard) deliverReads(states []raft.ReadState) {
	for _, rs := range states {
		if id, ok := confirmCtx(rs.RequestCtx); ok {
			s.confirmed(id) // confirm.go
			continue
		}
		if len(rs.RequestCtx) != 8 {
			continue
		}
		s.readMu.Lock()
		ch := s.reads[binary.LittleEndian.Uint64(rs.RequestCtx)]
		s.readMu.Unlock()
		if ch != nil {
			select {
			case ch <- rs.Index:
			default: // answered already (a retry's answer)
			}
		}
	}
}
