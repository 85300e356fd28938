package cluster

// One membership change at a time, cluster-wide.
//
// AddMember and RemoveMember change each shard's Raft configuration, one
// Raft group each, and nothing else ordered two changes asked of two
// members at once: each shard took them in its own order. Two removals
// at once in a cluster of two left some shards with node 1 alone and the
// rest with node 2 alone, and an add and a removal of the same node left
// it a voter of some shards only (members audit, 2026-12-07).
//
// Invariants:
//   - A change reaches shard 0 first: the member making it asks the other
//     shards' leaders only once it has applied the change in shard 0
//     (changeMembers).
//   - Shard 0's leader proposes a change only while every shard's voters,
//     as it has applied them, are shard 0's: no other change is under way;
//     or, once shard 0's voters have not changed for memberSettle, while
//     every other shard holds the change already (below). Otherwise it
//     answers busy.
//   - Any other shard's leader proposes a change only once shard 0, as it
//     has applied it, holds the change: the member a voter of shard 0 for
//     an add, and not one for a removal. Otherwise it answers busy.
//
// So a change shows, from its commit in shard 0 until every shard has
// applied it, as a shard whose voters are not shard 0's, and no second
// change is proposed in shard 0 meanwhile. Raft keeps one configuration
// change pending per shard, and a leader proposes one only while the
// shard's voters lack it, so no late copy of an earlier change commits
// after a later one. Every shard then goes through shard 0's
// configurations in shard 0's order, and ends with shard 0's voters.
//
// A change cut short (the member making it killed, a timeout) leaves the
// shards unlike shard 0, and every other change is busy until someone
// repeats it: that finishes it.
//
// Shard 0 alone may also lack a change every other shard holds: an
// older build's change cut short, or a replacement (below) cut short in
// shard 0 while its member was down, which then replaces it only where it
// is a voter (memberorder audit, 2026-12-07). Every change was busy then,
// the one that would make the shards alike included. So shard 0's leader
// also takes a change that every other shard holds already, once shard
// 0's voters have not changed here for memberSettle. Not at once: a
// change just made in shard 0 leaves the others behind it by that change,
// which looks the same to the inverse change (an add of X and a removal
// of X asked at once), and a proposal of the first still pending in
// another shard could then commit after the second, leaving them split.
// A change's member stops asking after its request's deadline (30 s in
// the server), well within memberSettle.
//
// A forced removal (ForceRemoveMember) skips both checks. It is the way
// out when the change cut short cannot be finished (an add of a node that
// is gone), or when the shards differ from a build before this order,
// when a change could reach any shard first. Two forced removals at once
// are not ordered.
//
// The replacement of an emptied member (rejoin.go) is made per shard and
// skips these checks. Its shard differs from the others while it runs,
// and a change waits for it to end.

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// The answers to a membership request (kind 4).
const (
	memberNotHere  = 0 // not the shard's leader here, or not proposed
	memberProposed = 1 // proposed, or the shard holds the change already
	memberBusy     = 2 // another change is under way: see the file comment
)

// forcedRemoval, in a removal's address field (unused by a removal),
// asks the leader to skip the order. A build before it ignores the field.
const forcedRemoval = "force"

// memberSettle is how long shard 0's voters must have stayed as they
// are before its leader takes a change that every other shard holds
// already (the file comment).
var memberSettle = time.Minute

// memberBusyFor bounds how long changeMembers waits while the shards
// answer busy before it gives up with ErrMembershipBusy. A change under
// way takes a round trip per shard; one busy for longer was cut short,
// or waits for a leader.
var memberBusyFor = 10 * time.Second

// ErrMembershipBusy is AddMember's and RemoveMember's error while another
// membership change is under way, or one was cut short: the shards'
// voters differ.
var ErrMembershipBusy = errors.New("cluster: another membership change is under way, or one was cut short")

// errMemberBusy is askMember's error for a busy answer.
var errMemberBusy = errors.New("cluster: the shard's leader answered busy")

// inOrder reports whether this shard, led here, may propose the change
// now (the file comment). A forced removal may.
func (s *shard) inOrder(op byte, id uint64, forced bool) bool {
	if forced {
		return true
	}
	zero := s.n.shards[0].st.votersNow()
	if s.id != 0 {
		if op == memberRemove && id == s.n.cfg.NodeID {
			// The member removed, leading with no one to hand the lead
			// to: it may never apply its own removal in shard 0.
			return true
		}
		return slices.Contains(zero, id) == (op == memberAdd)
	}
	after := slices.DeleteFunc(slices.Clone(zero), func(v uint64) bool { return v == id })
	if op == memberAdd {
		after = append(after, id)
	}
	alike, ahead := true, true
	for _, o := range s.n.shards[1:] {
		v := o.st.votersNow()
		alike = alike && sameVoters(v, zero)
		ahead = ahead && sameVoters(v, after)
	}
	return alike || ahead && time.Since(time.Unix(0, s.n.zeroSince.Load())) > memberSettle
}

// sameVoters reports whether a and b hold the same ids.
func sameVoters(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for _, id := range a {
		if !slices.Contains(b, id) {
			return false
		}
	}
	return true
}

// shardsUnlikeZero names, for ErrMembershipBusy, the shards whose voters
// differ from shard 0's as this node has applied them.
func (n *Node) shardsUnlikeZero() string {
	zero := n.shards[0].st.votersNow()
	slices.Sort(zero)
	out := ""
	for _, s := range n.shards[1:] {
		if v := s.st.votersNow(); !sameVoters(v, zero) {
			slices.Sort(v)
			out += fmt.Sprintf("; shard %d has voters %v", s.id, v)
		}
	}
	if out == "" {
		return fmt.Sprintf("shard 0 has voters %v, and so does every shard here: a change is being applied", zero)
	}
	return fmt.Sprintf("shard 0 has voters %v%s", zero, out)
}
