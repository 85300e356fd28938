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
//
// A member that loses a shard's lead (an election took it: it stopped
// answering, or stepped down for want of answers) is not handed that
// shard again for a hold: balanceHoldMin, doubled each time it loses it
// again within balanceHoldMax of the end of its last hold, up to
// balanceHoldMax. A member catching up on a loaded machine was handed a
// shard as soon as that shard had caught up, while its other shards still
// took its CPU; it lost the lead within seconds, was handed it back, and
// so on (docs/cluster-benchmarks.md, "Catch-up with 1 KiB bodies").

import (
	"slices"
	"time"

	"go.etcd.io/raft/v3"
)

const (
	balanceEvery   = time.Second
	balanceChecks  = 3
	balanceHoldMin = 10 * time.Second
	balanceHoldMax = 5 * time.Minute
)

// leadHold is how long the balancer leaves members alone after they lost
// a shard's lead (see the file comment). Owned by the shard's loop.
type leadHold struct {
	until map[uint64]time.Time
	dur   map[uint64]time.Duration
}

// lost records that member m lost the lead at now.
func (h *leadHold) lost(m uint64, now time.Time) {
	if h.until == nil {
		h.until, h.dur = map[uint64]time.Time{}, map[uint64]time.Duration{}
	}
	d := balanceHoldMin
	if until, ok := h.until[m]; ok && now.Sub(until) < balanceHoldMax {
		d = min(2*h.dur[m], balanceHoldMax)
	}
	h.until[m], h.dur[m] = now.Add(d), d
}

// held reports whether m is not to be handed the lead at now.
func (h *leadHold) held(m uint64, now time.Time) bool {
	return now.Before(h.until[m])
}

// balanceLoop checks every shard's leader once per balanceEvery.
func (n *Node) balanceLoop() {
	defer n.wg.Done()
	t := time.NewTicker(balanceEvery)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
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
	if st.RaftState != raft.StateLeader || st.LeadTransferee != 0 {
		s.balanceOK = 0
		return
	}
	want := preferredLeader(s.id, s.st.votersNow())
	if want == 0 || want == s.n.cfg.NodeID || s.hold.held(want, time.Now()) {
		s.balanceOK = 0
		return
	}
	// Raft's own Progress.RecentActive is no use here: with CheckQuorum
	// the leader clears it every election timeout, and a check on a
	// fixed period can land just after that clearing every time (it did:
	// a shard kept the wrong leader for good on a loaded machine).
	pr, ok := st.Progress[want]
	last, _ := s.st.LastIndex()
	active := time.Since(s.heard[want]) < 2*s.n.cfg.Tick*time.Duration(s.n.cfg.ElectionTicks)
	if !ok || !active || pr.Match < last {
		s.balanceOK = 0
		return
	}
	if s.balanceOK++; s.balanceOK < balanceChecks {
		return
	}
	s.balanceOK = 0
	s.log.Info("handing the lead to the shard's preferred leader", "to", want, "term", st.GetTerm())
	s.rn.TransferLeader(want)
}
