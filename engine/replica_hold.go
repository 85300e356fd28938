package engine

// Proposals nobody waits for, held for company.
//
// A leader proposes the records of every change it makes, but only some
// operations wait for their commit before they answer: a send, a delete, a
// visibility change, a queue change (waitDurable). A receive's records and
// an expiry's are proposed and nobody waits for them. Each proposal that
// reaches Raft on its own costs a whole round on every member: an append,
// a flush of the log, a message to each follower and their answers. At
// batch 1 a message is three such rounds (send, receive, delete), and the
// receive's is the one nobody waits for (docs/cluster-benchmarks.md,
// "Receives ride with the next proposal").
//
// So the consensus layer may hold a proposal for a short time (engine/cluster:
// Config.ProposalHold) and hand it to Raft with the next one, usually the
// delete that follows the receive; an operation that waits for its
// proposal urges the layer to hand over everything it holds at once.
//
// Invariants:
//  1. Every wait for a pending proposal (waitDurable, exportFence) urges
//     the replica (ReplicaUrger) before it blocks: a proposal somebody
//     waits for is never held. A replica that is no ReplicaUrger holds
//     nothing.
//  2. Holding changes no order: the layer hands held proposals to Raft in
//     the order of Propose, before any later one (replica.go, invariant 2).
//  3. A held proposal is pending like any other: it fails at a step-down
//     (the broker then diverges and is rebuilt), the checkpointer folds
//     nothing from it, and Settled counts it.

import "sort"

// ReplicaUrger is a Replica that may hold proposals for a while before it
// hands them to consensus (engine/cluster holds them for up to its
// ProposalHold). Urge makes it hand over every proposal it holds now: an
// operation waits for one of them. It must not block.
type ReplicaUrger interface {
	Replica
	Urge()
}

// urge asks the replica to hand over what it holds (invariant 1).
func (r *replStore) urge() {
	if u, ok := r.rep.(ReplicaUrger); ok {
		u.Urge()
	}
}

// waitDurable waits until the proposal holding pos is committed.
func (r *replStore) waitDurable(pos uint64) error {
	r.mu.Lock()
	i := sort.Search(len(r.pending), func(i int) bool { return r.pending[i].end > pos })
	if i == len(r.pending) || r.pending[i].first > pos {
		// Settled already: committed, unless its proposal failed. A
		// leader that steps down settles every pending proposal with
		// ErrNotLeader (SetLeader), maybe after an operation appended its
		// records and before it came here to wait: its records then lie
		// in a void span, and it must not be acknowledged.
		for _, v := range r.void {
			if pos >= v.from && pos < v.to {
				r.mu.Unlock()
				return ErrNotLeader
			}
		}
		r.mu.Unlock()
		return nil
	}
	p := r.pending[i]
	r.mu.Unlock()
	select {
	case <-p.done:
	default:
		r.urge()
		<-p.done
	}
	return p.err
}
