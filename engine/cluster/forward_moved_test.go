package cluster

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

// A forward to a shard's leader that never answers (a leader cut off from
// the cluster without its connections closing) ends once the forwarding
// node learns that the lead moved, with ErrLeaderMoved, not at its own
// timeout (forward_moved.go). Here the old leader stays up, but its
// handler holds the request; the lead is handed to the forwarding node's
// peer. Without the watch the forward ends at its 20 s timeout with a
// plain i/o timeout, and the test fails on the error's kind, not on time.
//
// A forward answered within the grace after the move still succeeds (the
// second half).
func TestForwardEndsWhenTheShardsLeadMoves(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	li, _ := c.leaderQueue("q")
	fi, to := (li+1)%3, (li+2)%3
	leader := uint64(li + 1)
	release := make(chan struct{})
	defer close(release)
	held := make(chan struct{}, 1)
	c.nodes[li].SetForwardHandler(context.Background(), func(_ context.Context, from uint64, req, dst []byte) []byte {
		if string(req) != "held" {
			return append(dst, "answered"...)
		}
		held <- struct{}{}
		<-release
		return dst
	})
	s := c.nodes[fi].shards[0]

	// The first forward: never answered.
	type result struct {
		got []byte
		err error
	}
	first := make(chan result, 1)
	go func() {
		got, err := c.nodes[fi].ForwardShard(context.Background(), 0, leader, []byte("held"), nil, 20*time.Second)
		first <- result{got, err}
	}()
	<-held
	c.nodes[li].shards[0].do(func() { c.nodes[li].shards[0].rn.TransferLeader(uint64(to + 1)) })
	eventually(t, "the forwarding node sees the new leader", func() error {
		if l := s.lead.Load(); l != uint64(to+1) {
			return errors.New("not yet")
		}
		return nil
	})
	select {
	case r := <-first:
		if !errors.Is(r.err, ErrLeaderMoved) {
			t.Fatalf("a forward to the former leader ended with %q, %v; want ErrLeaderMoved", r.got, r.err)
		}
	case <-time.After(60 * time.Second): // a bound, not a timing assertion
		t.Fatal("a forward to the former leader did not end")
	}

	// The second, to the former leader again, is registered after the
	// move: it gets the grace at once, and its answer, which comes at
	// once, is taken.
	second := make(chan result, 1)
	go func() {
		got, err := c.nodes[fi].ForwardShard(context.Background(), 0, leader, []byte("answered in time"), nil, 20*time.Second)
		second <- result{got, err}
	}()
	select {
	case r := <-second:
		if r.err != nil || string(r.got) != "answered" {
			t.Fatalf("a forward answered within the grace: %q, %v", r.got, r.err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("a forward answered within the grace did not end")
	}
}

// deadlineConn records the read deadlines set on it.
type deadlineConn struct {
	net.Conn
	read []time.Time
}

func (c *deadlineConn) SetReadDeadline(t time.Time) error {
	c.read = append(c.read, t)
	return nil
}

// A former leader this member has not heard from for fwdSilentTicks is
// taken as gone: its forwards end at once, not after the grace (a leader
// cut off from the cluster is why the lead moved); one heard from a moment
// ago gets the grace (a planned hand-over).
func TestForwardToASilentFormerLeaderEndsAtOnce(t *testing.T) {
	n := &Node{cfg: Config{Tick: 50 * time.Millisecond}}
	s := &shard{n: n, heard: map[uint64]time.Time{2: time.Now(), 3: time.Now().Add(-time.Minute)}}
	n.shards = []*shard{s}
	s.lead.Store(2)
	live, gone := &deadlineConn{}, &deadlineConn{}
	fcLive := n.watchForward(context.Background(), 0, 2, live, time.Time{})
	s.lead.Store(3)
	n.leaderMoved(0, 3, s.silent, false)
	fcGone := n.watchForward(context.Background(), 0, 3, gone, time.Time{})
	s.lead.Store(1)
	n.leaderMoved(0, 1, s.silent, false)
	soon := &deadlineConn{}
	own := time.Now().Add(fwdMovedGrace / 10)
	s.lead.Store(1)
	fcSoon := n.watchForward(context.Background(), 0, 1, soon, own)
	s.heard[1] = time.Now()
	s.lead.Store(2)
	n.leaderMoved(0, 2, s.silent, false)
	n.unwatchForward(fcSoon)
	n.unwatchForward(fcLive)
	n.unwatchForward(fcGone)
	if len(soon.read) != 1 || !soon.read[0].Equal(own) {
		t.Fatalf("a forward whose own deadline comes before the grace ends: read deadlines %v, want its own %v", soon.read, own)
	}
	if len(live.read) != 1 || time.Until(live.read[0]) < fwdMovedGrace/2 {
		t.Fatalf("a forward to a former leader heard a moment ago: read deadlines %v, want one about %v ahead", live.read, fwdMovedGrace)
	}
	if len(gone.read) != 1 || time.Until(gone.read[0]) > fwdMovedGrace/2 {
		t.Fatalf("a forward to a former leader silent for a minute: read deadlines %v, want one now", gone.read)
	}
}

// A member being removed is not cut off by its leader's silence
// (invariant 1b): once its removal commits the leader sends it nothing,
// and the forwards it still waits on are answered. Cut at once, they were
// answered 503 "may have run" although they ran (members audit,
// 2026-12-07). They get the grace, as a planned move does.
func TestForwardOfAMemberBeingRemovedGetsTheGrace(t *testing.T) {
	n := &Node{cfg: Config{Tick: 50 * time.Millisecond}}
	s := &shard{n: n, heard: map[uint64]time.Time{1: time.Now().Add(-time.Minute)}}
	n.shards = []*shard{s}
	s.lead.Store(1)
	n.removing.Store(time.Now().UnixNano()) // asked to remove itself (members.go)
	c := &deadlineConn{}
	fc := n.watchForward(context.Background(), 0, 1, c, time.Time{})
	s.lead.Store(2)
	n.leaderMoved(0, 2, s.silent, false)
	n.unwatchForward(fc)
	if len(c.read) != 1 || time.Until(c.read[0]) < fwdMovedGrace/2 {
		t.Fatalf("a forward of a member being removed, to a leader it no longer hears: read deadlines %v, want one about %v ahead", c.read, fwdMovedGrace)
	}
}

// The grace of a member being removed ends (invariant 1b): asked to
// remove itself longer than removingFor ago (a removal that never
// committed), its forwards are cut again at a move from a silent leader.
// The flag was never cleared: every later move gave them a second more
// (review, 2026-12-07).
func TestForwardOfAMemberOnceAskedToBeRemovedIsCutAgain(t *testing.T) {
	n := &Node{cfg: Config{Tick: 50 * time.Millisecond}}
	s := &shard{n: n, heard: map[uint64]time.Time{1: time.Now().Add(-time.Minute)}}
	n.shards = []*shard{s}
	s.lead.Store(1)
	n.removing.Store(time.Now().Add(-2 * removingFor).UnixNano())
	c := &deadlineConn{}
	fc := n.watchForward(context.Background(), 0, 1, c, time.Time{})
	s.lead.Store(2)
	n.leaderMoved(0, 2, s.silent, false)
	n.unwatchForward(fc)
	if len(c.read) != 1 || time.Until(c.read[0]) > fwdMovedGrace/2 {
		t.Fatalf("a forward of a member asked to be removed %v ago, to a leader it no longer hears: read deadlines %v, want one now", 2*removingFor, c.read)
	}
}

// A pre-vote is not a move (invariant 1a): a pre-candidate's "none" gives
// the forwards to a leader it has not heard from the grace, not the silent
// cut; with the leader back in view they get their own deadlines again; a
// real move after it cuts at once for a silent leader; and a forward whose
// context ended keeps its cut.
func TestForwardOutlivesAPreVote(t *testing.T) {
	n := &Node{cfg: Config{Tick: 50 * time.Millisecond}}
	s := &shard{n: n, heard: map[uint64]time.Time{2: time.Now().Add(-time.Minute)}}
	n.shards = []*shard{s}
	s.lead.Store(2)
	own := time.Now().Add(time.Hour)
	c, ended := &deadlineConn{}, &deadlineConn{}
	ctx, cancel := context.WithCancel(context.Background())
	fc := n.watchForward(context.Background(), 0, 2, c, own)
	fcEnded := n.watchForward(ctx, 0, 2, ended, own)
	defer n.unwatchForward(fc)
	defer n.unwatchForward(fcEnded)

	s.lead.Store(0)
	n.leaderMoved(0, 0, s.silent, true)
	if len(c.read) != 1 || time.Until(c.read[0]) < fwdMovedGrace/2 {
		t.Fatalf("a pre-vote: read deadlines %v, want one about %v ahead (the grace, not a cut)", c.read, fwdMovedGrace)
	}
	cancel()
	s.lead.Store(2)
	n.leaderMoved(0, 2, s.silent, false)
	if len(c.read) != 2 || !c.read[1].Equal(own) {
		t.Fatalf("the leader back in view: read deadlines %v, want its own %v last", c.read, own)
	}
	if last := ended.read[len(ended.read)-1]; time.Until(last) > fwdMovedGrace/2 {
		t.Fatalf("a forward whose context ended: read deadlines %v, want now last", ended.read)
	}
	s.lead.Store(0)
	n.leaderMoved(0, 0, s.silent, true)
	n.leaderMoved(0, 0, s.silent, true)  // still a pre-candidate: nothing more
	n.leaderMoved(0, 0, s.silent, false) // its pre-vote won: a candidate
	if len(c.read) != 4 || time.Until(c.read[3]) > fwdMovedGrace/2 {
		t.Fatalf("a pre-vote that won, the former leader silent: read deadlines %v, want now last", c.read)
	}
	s.lead.Store(3)
	n.leaderMoved(0, 3, s.silent, false)
	if len(c.read) != 4 {
		t.Fatalf("a new leader after a cut: read deadlines %v, want no more", c.read)
	}
	s.lead.Store(2)
	n.leaderMoved(0, 2, s.silent, false)
	if len(c.read) != 4 {
		t.Fatalf("a real move is not undone: read deadlines %v", c.read)
	}
}

// A follower that misses its leader's heartbeats for an election timeout
// becomes a pre-candidate; the other follower still hears the leader, so
// no election follows, and the leader answers what the follower forwarded.
// That answer must reach the client: the pre-candidate's "none" cut the
// forwards at once with ErrLeaderMoved, and clients were told 503 "may
// have run" for requests that ran (drain audit; seen failing so, and with
// the grace only and no restore, since the answer here comes after it).
func TestForwardToALiveLeaderOutlivesAFollowersPreVote(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	li, _ := c.leaderQueue("q")
	f := (li + 1) % 3
	lid, fid := uint64(li+1), uint64(f+1)
	release := make(chan struct{})
	held := make(chan struct{}, 1)
	c.nodes[li].SetForwardHandler(context.Background(), func(_ context.Context, from uint64, req, dst []byte) []byte {
		held <- struct{}{}
		<-release
		return append(dst, "ran"...)
	})
	var dropping atomic.Bool
	drop := func(m *pb.Message) bool {
		return dropping.Load() && m.GetFrom() == lid && m.GetTo() == fid
	}
	testHookDrop.Store(&drop)
	t.Cleanup(func() { testHookDrop.Store(nil) })
	type result struct {
		got []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		got, err := c.nodes[f].ForwardShard(context.Background(), 0, lid, []byte("POST /queues/q/messages"), nil, 30*time.Second)
		done <- result{got, err}
	}()
	<-held
	fs := c.nodes[f].shards[0]
	dropping.Store(true)
	eventually(t, "the follower loses its leader from view (a pre-vote)", func() error {
		if fs.lead.Load() != 0 {
			return errors.New("not yet")
		}
		return nil
	})
	blip := time.Now()
	elections := fs.elections.Load()
	dropping.Store(false)
	eventually(t, "the follower sees its leader again", func() error {
		if fs.lead.Load() != lid {
			return errors.New("not yet")
		}
		return nil
	})
	if l := c.nodes[li].shards[0].lead.Load(); l != lid {
		t.Skipf("the lead moved to %d (a real election): not the case under test", l)
	}
	if got := fs.elections.Load(); got != elections {
		t.Errorf("a pre-vote and the same leader back counted as an election: %d -> %d", elections, got)
	}
	time.Sleep(time.Until(blip.Add(fwdMovedGrace + 300*time.Millisecond))) // past the grace: an order, not a timing assertion
	close(release)
	select {
	case r := <-done:
		if r.err != nil || string(r.got) != "ran" {
			t.Fatalf("a forward to the live leader: %q, %v; want its answer", r.got, r.err)
		}
	case <-time.After(60 * time.Second): // a bound
		t.Fatal("the forward did not end")
	}
}

// A forward routed to L just before this follower's pre-vote that
// registers during it (the shard's leader reads "none") gets the grace
// and, with L back in view, its own deadline, as do those registered
// before; it turned the pre-vote of every forward of the shard into a
// real move (review N).
func TestForwardRegisteredDuringAPreVoteOutlivesIt(t *testing.T) {
	n := &Node{cfg: Config{Tick: 50 * time.Millisecond}}
	s := &shard{n: n, heard: map[uint64]time.Time{2: time.Now().Add(-time.Minute)}}
	n.shards = []*shard{s}
	s.lead.Store(2)
	own := time.Now().Add(time.Hour)
	c, late := &deadlineConn{}, &deadlineConn{}
	fc := n.watchForward(context.Background(), 0, 2, c, own)
	defer n.unwatchForward(fc)
	s.lead.Store(0)
	n.leaderMoved(0, 0, s.silent, true) // the loop: a pre-vote
	fcLate := n.watchForward(context.Background(), 0, 2, late, own)
	defer n.unwatchForward(fcLate)
	s.lead.Store(2)
	n.leaderMoved(0, 2, s.silent, false) // the loop: 2 back in view
	if last := c.read[len(c.read)-1]; !last.Equal(own) {
		t.Errorf("a forward waiting since before the pre-vote: read deadlines %v, want its own %v last", c.read, own)
	}
	if len(late.read) == 0 || !late.read[len(late.read)-1].Equal(own) {
		t.Errorf("a forward registered during the pre-vote: read deadlines %v, want its own %v last", late.read, own)
	}
}

// A real election that the same leader wins again (it stepped down for a
// lost quorum, campaigned in a new term and won) counts as an election
// on every node (review N: keeping the last leader across a pre-vote's
// "none" had stopped counting it).
func TestClusterReElectionOfTheSameLeaderIsCounted(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	li, _ := c.leaderQueue("q")
	lid := uint64(li + 1)
	ls := c.nodes[li].shards[0]
	var phase atomic.Int32
	drop := func(m *pb.Message) bool {
		switch phase.Load() {
		case 1: // nothing reaches the leader: it steps down (CheckQuorum)
			return m.GetTo() == lid
		case 2: // only the former leader's campaign gets anywhere
			if m.GetFrom() == lid {
				return false
			}
			t := m.GetType()
			return t != pb.MsgPreVoteResp && t != pb.MsgVoteResp && t != pb.MsgAppResp && t != pb.MsgHeartbeatResp
		}
		return false
	}
	testHookDrop.Store(&drop)
	t.Cleanup(func() { testHookDrop.Store(nil) })
	term0 := ls.term.Load()
	before := make([]int64, 3)
	for i, n := range c.nodes {
		before[i] = n.shards[0].elections.Load()
	}
	phase.Store(1)
	eventually(t, "the leader steps down", func() error {
		if ls.lead.Load() == lid {
			return errors.New("not yet")
		}
		return nil
	})
	phase.Store(2)
	eventually(t, "the former leader wins again, in a later term", func() error {
		for _, n := range c.nodes {
			if n.shards[0].lead.Load() != lid {
				return errors.New("not yet")
			}
		}
		return nil
	})
	phase.Store(0)
	t.Logf("term %d -> %d, leader %d both times", term0, ls.term.Load(), lid)
	if ls.term.Load() <= term0 {
		t.Skip("no new term")
	}
	for i, n := range c.nodes {
		if got := n.shards[0].elections.Load(); got == before[i] {
			t.Errorf("node %d: elections %d -> %d across a real election (term %d -> %d)", i+1, before[i], got, term0, ls.term.Load())
		}
	}
}
