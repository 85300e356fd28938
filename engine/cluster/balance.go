package cluster

// Spreading the leaders. Elections put leaders wherever a candidate won
// first, often all on one node, which then does every shard's work while
// the others idle. Each shard has a preferred leader — its voters in id
// order, shard i preferring the (i mod voters)-th — and a leader that is
// not the preferred one hands the lead over (Raft's leadership transfer)
// once the preferred member has been active and fully caught up for
// balanceChecks consecutive checks, so that a member that just came back
// is not handed a shard while it is still catching up, and the lead does
// not flap while a member comes and goes.

import (
	"slices"
	"time"

	"go.etcd.io/raft/v3"
)

const (
	balanceEvery  = time.Second
	balanceChecks = 3
)

// balanceLoop checks every shard's leader once per balanceEvery.
func (n *Node) balanceLoop() {
	defer n.wg.Done()
	// This node's state at once, and a few times while the transport's
	// connections come up: the peers kept the "leaving" of its last
	// shutdown until its first balance tick, a second after /healthz said
	// 200, and a rolling restart's next stop, taken then as the docs say,
	// found no member to hand its leads to (drain audit, 2026-12-06).
	for range 5 {
		select {
		case <-n.stop:
			return
		case <-time.After(100 * time.Millisecond):
		}
		n.sendState()
	}
	t := time.NewTicker(balanceEvery)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		n.pollDiskFull()
		for _, s := range n.shards {
			s.do(s.balance)
		}
	}
}

// preferredLeader returns the shard's preferred leader among voters.
func preferredLeader(shard int, voters []uint64) uint64 {
	if len(voters) == 0 {
		return 0
	}
	v := slices.Clone(voters)
	slices.Sort(v)
	return v[shard%len(v)]
}

// balance runs in the shard's loop: see the file comment.
func (s *shard) balance() {
	st := s.rn.Status()
	if st.RaftState != raft.StateLeader || st.LeadTransferee != 0 || s.handing != nil {
		s.balanceOK = 0
		return
	}
	// Raft's own Progress.RecentActive is no use here: with CheckQuorum
	// the leader clears it every election timeout, and a check on a
	// fixed period can land just after that clearing every time (it did:
	// a shard kept the wrong leader for good on a loaded machine).
	switch {
	case s.n.diskFull.Load():
		s.balanceOK = 0
		s.handOff(s.activeMember, whyDiskFull) // handoff.go
		return
	case s.n.givingLeadsAway():
		s.balanceOK = 0
		s.handOverForShutdown() // transfer.go
		return
	}
	want := preferredLeader(s.id, s.st.votersNow())
	if want == 0 || want == s.n.cfg.NodeID || s.n.unwanted(want) {
		s.balanceOK = 0
		return
	}
	pr, ok := st.Progress[want]
	last, _ := s.st.LastIndex()
	if !ok || !s.activeMember(want) || pr.Match < last {
		s.balanceOK = 0
		return
	}
	if !s.electable() {
		s.balanceOK = 0
		return
	}
	if s.balanceOK++; s.balanceOK < balanceChecks {
		return
	}
	s.balanceOK = 0
	s.log.Info("handing the lead to the shard's preferred leader", "to", want, "term", st.GetTerm())
	s.handLeadTo(want) // transfer.go
}

// electable reports whether the shard's voters could elect the target of
// a hand-over: this leader and the other voters heard from lately that do
// not say they are leaving (a node that holds its vote says so:
// givingLeadsAway, votehold.go) are a majority of the voters. A transfer
// makes the leader step down when its target campaigns; with no majority
// to vote, the shard is left with no leader, and with a held voter among
// them for good, since that node's replacement needs a leader in every
// shard (rolling audit, 2026-12-07: a dead member and a held --join node
// among four voters, the balancer's move after the add left two shards
// leaderless for minutes). A node shutting down is not counted either,
// though it votes until it exits: a move can wait. Nor is a voter whose
// state this node has not heard lately (node-state frames come every
// balanceEvery): one just added, such as a held --join node whose first
// frame had not arrived, counted as able to vote and the move went ahead
// (rolling suite, make test-long: a dead member and the new node among
// four voters, shard 2 leaderless for good). A voter that has been active
// for longer than stateStale and sent no frame in that time counts: it
// runs a build before node-state frames (handoff.go item 4; a rolling
// upgrade), whose shutdowns, full disks and balancing would otherwise
// find no majority and keep every lead (review V).
func (s *shard) electable() bool {
	voters := s.st.votersNow()
	n := 0
	for _, v := range voters {
		if v == s.n.cfg.NodeID || s.activeMember(v) && s.n.peerVotes(v, s.activeSince[v]) {
			n++
		}
	}
	return 2*n > len(voters)
}
