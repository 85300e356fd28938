package cluster

// A member is healthy only once it has caught up with every shard's
// leader, not as soon as it knows the leaders. A rolling restart waits for
// /healthz 200 on the node it started before it stops the next: while the
// started node still needed a snapshot, a stop left a shard with one
// member holding every entry and one that could not take appends, and the
// shard took no change for 10 s or more (the shutdown audit, 2026-12-07;
// giveup.go bounds that stall, this file avoids it).
//
// Invariants:
//  1. Health is an error for a shard whose caughtUp is false. caughtUp is
//     false from the node's start, from the moment an install of a
//     snapshot begins (startInstall) and from a restart of the shard after
//     its log failed (restartAfterFailure), until a catch-up round ends.
//  2. A catch-up round asks the shard's leader, through Raft's ReadIndex,
//     for the commit index it has now (after caughtUp was cleared), and
//     ends when this replica has applied that index. So when caughtUp
//     turns true, this member held everything the leader had committed at
//     some moment after the start or the install began: its lag is what
//     the leader committed during the round's last steps.
//  3. At most one round runs per shard (catching), and it ends with the
//     node's stop. A round that cannot finish (no leader answers, the
//     replica does not apply) keeps asking; nothing else waits for it.
//
// Owner: caughtUp, catching and catchTarget are atomics; the round's
// goroutine writes them, Health and Status read them, and armCatchUp
// (the node's start, and the loop) clears caughtUp and starts a round.

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrCatchingUp: this member has not yet applied what a shard's leader had
// committed after it started (or after it began installing a snapshot).
var ErrCatchingUp = errors.New("cluster: this member is catching up with the shard's leader")

// catchUpPoll is how often a round looks at what the replica applied.
const catchUpPoll = 20 * time.Millisecond

// armCatchUp marks the shard as not caught up and starts a round unless
// one runs (invariant 3). A round that runs already asked its leader
// before this call only if it had its index already: it then asks again
// (rearm), so that the index it waits for comes after this call.
func (s *shard) armCatchUp() {
	s.caughtUp.Store(false)
	s.catchRearm.Store(true)
	if !s.catching.CompareAndSwap(false, true) {
		return
	}
	s.n.wg.Add(1)
	go func() {
		defer s.n.wg.Done()
		s.catchUp()
	}()
}

// catchUp runs rounds until one ends with nothing asked meanwhile
// (invariant 2), or the node stops.
func (s *shard) catchUp() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.n.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		s.catchRearm.Store(false)
		idx, err := s.readIndex(ctx)
		if err == nil {
			s.catchTarget.Store(idx)
			err = s.waitApplied(ctx, idx, catchUpPoll)
		}
		if ctx.Err() != nil {
			s.catching.Store(false)
			return
		}
		if err != nil || s.catchRearm.Load() {
			continue
		}
		s.caughtUp.Store(true)
		s.catching.Store(false)
		// An arm between the last look and the store above found a round
		// running and left it to this one: take it.
		if s.catchRearm.Load() && s.catching.CompareAndSwap(false, true) {
			s.caughtUp.Store(false)
			continue
		}
		return
	}
}

// catchUpHealth is nil once the shard caught up (invariant 1).
func (s *shard) catchUpHealth(lead uint64) error {
	if s.caughtUp.Load() {
		return nil
	}
	if t := s.catchTarget.Load(); t > 0 {
		return fmt.Errorf("shard %d: %w %d (applied %d of its commit index %d)", s.id, ErrCatchingUp, lead, s.applied(), t)
	}
	return fmt.Errorf("shard %d: %w %d (waiting for its commit index)", s.id, ErrCatchingUp, lead)
}
