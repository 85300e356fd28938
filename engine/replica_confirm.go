package engine

// Answers read from a leader's state wait until it is known to still lead.
//
// A leader answers a receive from its in-memory state: it takes the
// messages, proposes the change (held for company, replica_hold.go) and
// answers before the proposal commits. That is safe while it leads, but a
// leader cut off from its group does not know at once that it no longer
// does: until it hears of a newer term, or its CheckQuorum lease runs out,
// it still takes receives. Meanwhile the rest of the group may have
// elected a new leader which handed a message out and had its delete
// acknowledged; the cut-off leader's state still holds that message, and a
// receive it answered would hand it out again after its acknowledged
// delete (the chaos harness's isolate runs found exactly that:
// docs/chaos.md, "The safety gap").
//
// So a receive (and a peek) that found messages confirms the lead before it
// answers (ReplicaConfirmer): the consensus layer runs a round of
// heartbeats (Raft's ReadIndex) begun after the messages were taken, and
// answers once a majority acknowledged this member as leader of the term
// in which they were taken.
//
// Invariants:
//  1. A receive or peek of a replicated broker that leads answers messages
//     only after ConfirmLead(term) returned nil, term being the term it led
//     before it read its state: a receive's is read with its admission
//     (enterLeading), under the same lock, so that a step-down between the
//     two cannot leave it unconfirmed. A majority that acknowledged term after
//     the read had not moved to a later term at the read, so no later
//     leader existed then, and nothing acknowledged before the read is
//     missing from the state read (a leader holds every committed entry).
//  2. A failed confirmation answers nothing: the receive returns
//     ErrNotLeader (its change may still commit under the next leader, as
//     any proposal at a step-down), and the messages it took are visible
//     again after their visibility timeout, or at once on a leader that
//     never got the change. Nothing is lost; a message may come late.
//  3. A backend that does not replicate, and a replica that does not lead,
//     confirm nothing (term 0): the first has no other leader, the second
//     answers no receive (enter refuses it), and its peeks read its
//     replica's state as it is, as a follower's reads always did.
//  4. A receive stays admitted (enter, replica.go invariant 10) until its
//     confirmation ends, so a planned hand-over of the lead (Yield, then
//     Settled) waits for it and does not make it fail: its messages reach
//     its client, not the visibility timeout.

// ReplicaConfirmer is a Replica that can confirm that this member still
// leads its shard (engine/cluster does, with Raft's ReadIndex). ConfirmLead
// returns nil once a majority of the shard acknowledged this member as the
// leader of term after the call began, or ErrNotLeader (wrapped) when that
// did not happen: the member stepped down, leads another term, or no
// majority answered within the layer's bound. It must not be called with
// locks held; it blocks for about one round trip to the followers.
type ReplicaConfirmer interface {
	Replica
	ConfirmLead(term uint64) error
}

// leading returns the term this replica leads now, or 0 if it does not
// lead or its replica confirms nothing (invariant 3).
func (r *replStore) leading() uint64 {
	if _, ok := r.rep.(ReplicaConfirmer); !ok {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.leader {
		return 0
	}
	return r.term
}

// confirmLead waits until the replica confirms that it still leads term
// (invariant 1); term 0 confirms nothing.
func (r *replStore) confirmLead(term uint64) error {
	if term == 0 {
		return nil
	}
	c, ok := r.rep.(ReplicaConfirmer)
	if !ok {
		return nil
	}
	return c.ConfirmLead(term)
}

// confirmRead answers a read of messages (dst beyond base, with err) made
// while the store led term: unchanged once the lead is confirmed, or
// without those messages and with the confirmation's error (invariants 1
// and 2). A read that found nothing confirms nothing.
func (b *Broker) confirmRead(term uint64, dst []Message, base int, err error) ([]Message, error) {
	if len(dst) > base {
		if cerr := b.store.confirmLead(term); cerr != nil {
			return dst[:base], cerr
		}
	}
	return dst, err
}
