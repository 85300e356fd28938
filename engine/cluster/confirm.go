package cluster

// Confirming a leader's lead before it answers from its state
// (engine/replica_confirm.go says why: a leader cut off from its group
// would otherwise hand out messages that a newer leader deleted).
//
// A receive that took messages calls ConfirmLead(term) and waits. The
// shard's loop begins a round of Raft's ReadIndex (heartbeats carrying the
// round's id, ReadOnlySafe) for every waiter registered since the last
// round began, and answers those waiters once Raft reports that a majority
// acknowledged the round.
//
// Invariants:
//  1. A waiter is answered nil only by a round that began after it
//     registered, in the term it names, while this member led that term
//     without a break: a round is begun only for waiters of the term the
//     loop leads (leaderOf), and a step-down fails every waiter at once.
//  2. A round that Raft answered answers every earlier one too (etcd raft
//     answers ReadIndex requests in order, and a later round began after
//     every waiter of an earlier one): rounds are answered by id, oldest
//     first.
//  3. No waiter waits forever: a round Raft dropped (a lost heartbeat, a
//     new leader's round before it committed an entry of its term) is
//     asked again every confirmRetry ticks while waiters remain, and a
//     waiter gives up after confirmBound (ErrNotLeader): an answer
//     withheld, never a wrong one.
//  4. A batch of receives costs one round: every waiter that registered
//     between two passes of the loop shares it.
//  5. A round a majority acknowledged also grants a read lease (lease.go):
//     ConfirmLead answers nil at once while the lease of its term lasts.
//
// Owner: confirmMu guards the waiters and their rounds; the loop begins
// rounds (beginConfirms, confirmTick) and answers them (confirmed); a
// waiter that gives up removes itself under confirmMu.

import (
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/smqd/smqd/engine"
)

// confirmTag marks a ReadIndex context as a lead confirmation round (the
// read barriers of read.go use 8-byte contexts).
const confirmTag = 'L'

// confirmRetry is how many ticks a round may go unanswered before the
// loop asks again (invariant 3).
const confirmRetry = 2

// confirmWait is one ConfirmLead call, pooled.
type confirmWait struct {
	term  uint64
	round uint64     // 0 until a round is begun for it
	ch    chan error // cap 1: the answer
	timer *time.Timer
}

var confirmPool = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &confirmWait{ch: make(chan error, 1), timer: t}
}}

// confirms is a shard's lead confirmation state, guarded by confirmMu.
type confirms struct {
	fresh   []*confirmWait // registered, no round begun for them yet
	waiting []*confirmWait // in rounds begun, by round
	seq     uint64         // the last round begun
	askedAt int64          // the loop's tick count when it last began a round
	begun   []roundBegun   // rounds begun and not yet answered, oldest first

	// The read lease (lease.go).
	leaseTerm  uint64 // the term it is of; 0: none
	leaseUntil int64  // mono
	refresh    bool   // a lease-answered receive asked for a round
	noLease    uint64 // a term whose leader began a transfer: no more leases in it
}

// roundBegun is when a round began (mono), for its lease.
type roundBegun struct {
	seq uint64
	at  int64
}

// maxBegun bounds the rounds remembered unanswered (Raft drops some: a
// lost heartbeat's); a round forgotten grants no lease, nothing else.
const maxBegun = 64

// ConfirmLead implements engine.ReplicaConfirmer.
func (s *shard) ConfirmLead(term uint64) error {
	s.confirmMu.Lock()
	if ok, wake := s.leaseAnswerLocked(term); ok {
		s.confirmMu.Unlock()
		s.leaseReads.Add(1)
		if wake {
			s.wakeLoop()
		}
		return nil
	}
	w := confirmPool.Get().(*confirmWait)
	w.term, w.round = term, 0
	s.conf.fresh = append(s.conf.fresh, w)
	s.confirmMu.Unlock()
	s.wakeLoop()
	w.timer.Reset(s.confirmBound())
	var err error
	select {
	case err = <-w.ch:
		w.timer.Stop()
	case <-w.timer.C:
		s.confirmMu.Lock()
		gone := !s.conf.remove(w)
		s.confirmMu.Unlock()
		if gone {
			err = <-w.ch // the loop answered it just now
		} else {
			err = fmt.Errorf("%w: no majority confirmed this member's lead of term %d within %v", engine.ErrNotLeader, term, s.confirmBound())
		}
	}
	if err != nil {
		s.confirmsFailed.Add(1)
	}
	confirmPool.Put(w)
	return err
}

// confirmBound is how long a waiter waits (invariant 3): two election
// timeouts, by which CheckQuorum has made a cut-off leader step down.
func (s *shard) confirmBound() time.Duration {
	return 2 * time.Duration(s.n.cfg.ElectionTicks) * s.n.cfg.Tick
}

// remove takes w out of the waiters; false if it is in none (answered).
func (c *confirms) remove(w *confirmWait) bool {
	for _, l := range []*[]*confirmWait{&c.fresh, &c.waiting} {
		for i, x := range *l {
			if x == w {
				*l = append((*l)[:i], (*l)[i+1:]...)
				return true
			}
		}
	}
	return false
}

// beginConfirms (the loop) begins a round for the waiters registered since
// the last one, or fails them if this member does not lead their term.
func (s *shard) beginConfirms() {
	s.confirmMu.Lock()
	if len(s.conf.fresh) == 0 {
		if s.conf.refresh && s.leaderOf != 0 && s.conf.leaseTerm == s.leaderOf {
			s.askConfirmLocked() // a lease-answered receive asked for one
		}
		s.conf.refresh = false
		s.confirmMu.Unlock()
		return
	}
	begin := false
	for _, w := range s.conf.fresh {
		if s.leaderOf == 0 || w.term != s.leaderOf {
			w.ch <- fmt.Errorf("%w: this member no longer leads term %d", engine.ErrNotLeader, w.term)
			continue
		}
		w.round = s.conf.seq + 1
		s.conf.waiting = append(s.conf.waiting, w)
		begin = true
	}
	clear(s.conf.fresh)
	s.conf.fresh = s.conf.fresh[:0]
	if begin {
		s.askConfirmLocked()
	}
	s.confirmMu.Unlock()
}

// askConfirmLocked (the loop, confirmMu held) begins the next round.
func (s *shard) askConfirmLocked() {
	s.conf.seq++
	s.conf.askedAt = s.ticks.Load()
	s.conf.refresh = false
	if len(s.conf.begun) == maxBegun {
		s.conf.begun = append(s.conf.begun[:0], s.conf.begun[1:]...)
	}
	s.conf.begun = append(s.conf.begun, roundBegun{s.conf.seq, mono()})
	var ctx [9]byte
	ctx[0] = confirmTag
	binary.LittleEndian.PutUint64(ctx[1:], s.conf.seq)
	s.rn.ReadIndex(ctx[:])
	s.confirmRounds.Add(1)
}

// confirmTick (the loop, on a tick) asks again for waiters whose round
// went unanswered for confirmRetry ticks (invariant 3).
func (s *shard) confirmTick() {
	s.confirmMu.Lock()
	if len(s.conf.waiting) > 0 && s.ticks.Load()-s.conf.askedAt >= confirmRetry {
		s.askConfirmLocked()
	}
	s.confirmMu.Unlock()
}

// confirmed (the loop) answers the waiters of rounds up to id: a majority
// acknowledged this member's lead after they registered (invariant 2).
func (s *shard) confirmed(id uint64) {
	s.confirmMu.Lock()
	n := 0
	for _, r := range s.conf.begun {
		if r.seq > id {
			break
		}
		if r.seq == id {
			s.extendLeaseLocked(r.at) // lease.go
		}
		n++
	}
	if n > 0 {
		s.conf.begun = append(s.conf.begun[:0], s.conf.begun[n:]...)
	}
	n = 0
	for _, w := range s.conf.waiting {
		if w.round > id {
			break
		}
		w.ch <- nil
		n++
	}
	if n > 0 {
		rest := copy(s.conf.waiting, s.conf.waiting[n:])
		clear(s.conf.waiting[rest:])
		s.conf.waiting = s.conf.waiting[:rest]
	}
	s.confirmMu.Unlock()
}

// failConfirms (the loop at a step-down, or Node.Close) fails every waiter
// (invariant 1).
func (s *shard) failConfirms() {
	s.confirmMu.Lock()
	for _, l := range [][]*confirmWait{s.conf.fresh, s.conf.waiting} {
		for _, w := range l {
			w.ch <- fmt.Errorf("%w: this member stepped down from term %d, or stopped", engine.ErrNotLeader, w.term)
		}
	}
	clear(s.conf.fresh)
	clear(s.conf.waiting)
	s.conf.fresh, s.conf.waiting = s.conf.fresh[:0], s.conf.waiting[:0]
	s.conf.begun = s.conf.begun[:0]
	s.conf.leaseTerm, s.conf.leaseUntil, s.conf.refresh = 0, 0, false // lease.go, invariant 3
	s.confirmMu.Unlock()
}

// confirmCtx returns the round id of a ReadIndex context of this file.
func confirmCtx(ctx []byte) (uint64, bool) {
	if len(ctx) != 9 || ctx[0] != confirmTag {
		return 0, false
	}
	return binary.LittleEndian.Uint64(ctx[1:]), true
}
