package cluster

// Forwards cut short when their shard's leader moves.
//
// A forwarded request waits for the leader's answer up to its timeout (10
// s for anything but a long poll, server/cluster.go). A leader cut off from
// the cluster without its connections closing (a partition, a host that
// vanished) never answers, and such a request waited out the whole timeout
// although the other members had elected a new leader within an election
// timeout: every send through a survivor after the leader was isolated took
// 10.0 s (20 of 20, docs/chaos.md).
//
// Invariants:
//  1. Once this node's view of a shard's leader is no longer L (the shard's
//     loop, handleSoftState: another leader, or none), every forward to L
//     for that shard still waiting gets fwdMovedGrace more to be answered,
//     then fails with ErrLeaderMoved. A leader that handed its lead over
//     answers within the grace (a long poll it held is answered "not run"
//     at its step-down, and the forwarding node routes it again), so
//     planned moves cost nothing; one that is gone does not. If this
//     member has heard nothing of L for fwdSilentTicks ticks (the loop's
//     record of every member's messages; a leader sends one every tick),
//     L is taken as gone and the forward fails at once: the lead usually
//     moves because L went silent for a whole election timeout.
//  1a. A pre-vote is not a move. A follower that missed L's heartbeats
//     for an election timeout (L's loop busy catching a member up, a lost
//     packet) becomes a pre-candidate with no leader in view, and when the
//     other members still hear L no election follows and L answers what
//     this node forwarded: failed at once, those requests were answered
//     503 "may have run" although they ran (clients that retry a 503 sent
//     again). So a pre-candidate's "none" gives the forwards the grace,
//     never the silent cut, and when L is in view again their own
//     deadlines come back (a long poll outlives the blip). A real move
//     after it cuts as in 1, never later than the grace already given.
//  1b. A member being removed is no leader's silence: once its removal
//     commits in a shard, that shard's leader sends it nothing more, and
//     the forwards it still waits on there are answered by a live leader.
//     Cut at once as from a leader gone, they were answered 503 "may have
//     run" although they ran (members audit, 2026-12-07: 4 sends of 44
//     through the removed node, and all four were in the queue). So once
//     this node was asked to remove itself (Node.removing), a move gives
//     its forwards the grace, for removingFor: a removal that never
//     commits (the shard lost its quorum, the operator gave up) left
//     every later move from a silent leader a second of grace for good
//     (review, 2026-12-07).
//  2. ErrLeaderMoved is an outcome unknown: the old leader may have run
//     the request (its change commits only if a majority had it, and then
//     the new leader has it too). The server answers 503, and the client
//     retries; a read (a peek, GetQueueAttributes), which changes nothing
//     either way, the server routes again to the new leader instead
//     (server/cluster.go routeCluster).
//  3. A forward registered while the leader moves sees the move: it
//     checks the shard's leader after it registered, under the registry's
//     lock, and the loop stores the new leader before it looks at the
//     registered forwards. Registered while no leader is in view, it gets
//     the grace, as at a pre-vote (1a), and only it is concerned.
//  4. Only forwards under way are registered: each unregisters, under the
//     same lock the cut takes, before its connection goes back to the pool,
//     and a cut connection never goes back (its deadline was moved).
//
// Owner: fwdWatch.mu guards the registry and each call's cut flag.

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"
)

// fwdMovedGrace is how long a forward to a shard's former leader may still
// wait for its answer after this node learned that the lead moved.
const fwdMovedGrace = time.Second

// fwdSilentTicks: a former leader not heard from for this many ticks is
// taken as gone (invariant 1); a live leader is heard every tick.
const fwdSilentTicks = 3

// fwdHandshake bounds the handshake of a new forward connection. A
// forward whose connection cannot be made is ErrNotSent (nothing ran) and
// the server routes it again, so a short bound costs nothing; with the
// transport's 5 s, the first request after a leader was cut off that
// needed a new connection to it waited 5 s (docs/chaos.md).
const fwdHandshake = time.Second

// removingFor is how long after this node was last asked to remove itself
// its forwards get the grace at a move (invariant 1b): longer than any
// forward waits for its answer (server/cluster.go forwardTimeout: 10 s
// and a long poll's 30 s). The operator's retry asks again, and starts
// another.
const removingFor = time.Minute

// beingRemoved reports whether this node was asked to remove itself
// within removingFor (invariant 1b).
func (n *Node) beingRemoved() bool {
	at := n.removing.Load()
	return at != 0 && time.Since(time.Unix(0, at)) < removingFor
}

// ErrLeaderMoved: the shard's lead moved away from the node a forwarded
// request waited on, which did not answer within fwdMovedGrace; the
// request may have run there.
var ErrLeaderMoved = errors.New("cluster: the shard's lead moved while the request waited for its former leader's answer")

type fwdWatch struct {
	mu    sync.Mutex
	calls map[*fwdCall]struct{} // guarded by mu
	pool  sync.Pool
}

// fwdCall is a forward waiting for its answer. The fields after until are
// guarded by fwdWatch.mu.
type fwdCall struct {
	shard  int
	leader uint64
	c      net.Conn
	ctx    context.Context // its end moves the deadline to now (forward)
	until  time.Time       // the forward's own deadline: a move never extends it
	cut    bool            // a move set the deadline: the connection is not reused
	moving bool            // a move's deadline holds (moved)
	blip   bool            // that move was a pre-vote's only (invariant 1a)
	moved  time.Time
}

// watchForward registers a forward to leader for shard that waits on c
// (invariant 3).
func (n *Node) watchForward(ctx context.Context, shard int, leader uint64, c net.Conn, until time.Time) *fwdCall {
	w := &n.fwdWatch
	fc, _ := w.pool.Get().(*fwdCall)
	if fc == nil {
		fc = new(fwdCall)
	}
	*fc = fwdCall{shard: shard, leader: leader, c: c, ctx: ctx, until: until}
	w.mu.Lock()
	if w.calls == nil {
		w.calls = map[*fwdCall]struct{}{}
	}
	w.calls[fc] = struct{}{}
	if lead := n.shards[shard].lead.Load(); lead != leader {
		// Not the loop: its record is not ours to read, nor is its state;
		// only this forward is concerned, and a "none" (a pre-vote, for
		// all this forward can tell) gives it the grace, as a pre-vote
		// does: a later move of the loop cuts it, the leader back in view
		// gives it its own deadline again.
		fc.move(lead, nil, lead == 0, time.Now())
	}
	w.mu.Unlock()
	return fc
}

// unwatchForward unregisters fc and reports whether it was cut (invariant
// 4: its connection must not be reused).
func (n *Node) unwatchForward(fc *fwdCall) bool {
	w := &n.fwdWatch
	w.mu.Lock()
	delete(w.calls, fc)
	cut := fc.cut
	w.mu.Unlock()
	*fc = fwdCall{}
	w.pool.Put(fc)
	return cut
}

// leaderMoved (after lead was stored as the shard's leader) gives the
// forwards waiting on another node for shard their grace, or none for a
// node silent reports gone (invariant 1; nil: none is). prevote: lead is
// a pre-candidate's "none" (invariant 1a); the forwards to a leader back
// in view after one get their own deadlines again.
func (n *Node) leaderMoved(shard int, lead uint64, silent func(id uint64) bool, prevote bool) {
	if n.beingRemoved() {
		silent = nil // invariant 1b
	}
	w := &n.fwdWatch
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	for fc := range w.calls {
		if fc.shard == shard {
			fc.move(lead, silent, prevote, now)
		}
	}
}

// move (fwdWatch.mu held) is leaderMoved for one forward.
func (fc *fwdCall) move(lead uint64, silent func(id uint64) bool, prevote bool, now time.Time) {
	switch {
	case fc.leader == lead:
		if fc.moving && fc.blip {
			fc.moving, fc.blip = false, false
			fc.c.SetReadDeadline(fc.until)
			if fc.ctx.Err() != nil { // ended before the line above: keep its cut
				fc.c.SetReadDeadline(now)
			}
		}
	case fc.moving && (!fc.blip || prevote):
		// a move's deadline holds already
	default:
		until := now.Add(fwdMovedGrace)
		if !prevote && silent != nil && silent(fc.leader) {
			until = now
		}
		if fc.moving && fc.moved.Before(until) {
			until = fc.moved // a real move after a pre-vote's: never later
		}
		if !fc.until.IsZero() && fc.until.Before(until) {
			until = fc.until
		}
		fc.cut, fc.moving, fc.blip, fc.moved = true, true, prevote, until
		fc.c.SetReadDeadline(until)
	}
}

// silent (the loop) reports whether this member has heard nothing of
// member id for fwdSilentTicks ticks.
func (s *shard) silent(id uint64) bool {
	t, ok := s.heard[id]
	return !ok || time.Since(t) > fwdSilentTicks*s.n.cfg.Tick
}
