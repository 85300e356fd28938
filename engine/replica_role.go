package engine

// The roles of a replicated broker (replica.go): it takes changes as its
// shard's leader (SetLeader(true)), or follows. A leader that stops leading
// fails its proposals in flight; if one failed, or a change was refused
// after the step-down, its state holds a change its log does not make
// (Diverged), and the consensus layer reopens it (CloseForRebuild, Open)
// before it leads again; otherwise it follows on as it is. A snapshot of
// its state (ExportState) holds committed changes only (exportFence).

import (
	"errors"
	"fmt"
	"time"
)

// ErrDiverged: SetLeader(true) on a broker whose state may hold changes
// its log does not make (Diverged). Reopen it (CloseForRebuild, Open) first.
var ErrDiverged = errors.New("engine: the replica's state holds changes its log does not; reopen it")

// SetLeader makes the replica take changes (leader) as the leader of term,
// or stop taking them. A leader's message sequence numbers start above
// term<<40 (invariant 5). Stepping down fails every pending proposal with
// ErrNotLeader and wakes every waiting receive (it answers ErrNotLeader).
// If a proposal failed, the state holds a change never committed
// (Diverged), and the consensus layer must reopen the broker
// (CloseForRebuild) before it leads again; otherwise the broker goes on as
// a follower. SetLeader(true) on a diverged broker returns ErrDiverged.
//
// For engine/cluster: it needs a broker opened with Options.Replica (others
// return an error).
func (b *Broker) SetLeader(leader bool, term uint64) error {
	r, ok := b.store.(*replStore)
	if !ok {
		return errors.New("engine: SetLeader on a broker without replication")
	}
	r.mu.Lock()
	if leader && r.diverged.Load() {
		r.mu.Unlock()
		return ErrDiverged
	}
	again := leader && r.leader && r.term == term
	r.leader, r.term, r.yield, r.pushDrain = leader, term, false, false
	var unlogged []logRec
	if !leader {
		for len(r.pending) > 0 {
			r.resolveLocked(r.pending[0], ErrNotLeader)
		}
	} else {
		unlogged = r.takeUnloggedLocked()
	}
	r.mu.Unlock()
	if !leader {
		b.pusher.follow() // topic_replica.go
		// Long polls waiting here would take messages a follower applies.
		b.mu.RLock()
		for _, q := range b.queues {
			q.waiters.wake(-1)
		}
		b.mu.RUnlock()
	}
	if leader {
		// A follower claimed slots where the log said (apply.go): make the
		// free sets right before this replica allocates.
		base := term << bootShift
		b.mu.RLock()
		for _, q := range b.queues {
			for {
				cur := q.seq.Load()
				if cur >= base || q.seq.CompareAndSwap(cur, base) {
					break
				}
			}
			for i := range q.stripes {
				st := &q.stripes[i]
				st.mu.Lock()
				st.slab.rebuildFree()
				st.mu.Unlock()
			}
		}
		b.mu.RUnlock()
		if !again {
			b.leadTopics(term) // topic_replica.go
		}
		// The expiries it made as a follower that its predecessor did not
		// log (replica_expiry.go, invariant 2).
		r.logUnlogged(unlogged)
	}
	return nil
}

// Yield makes a leading replica refuse every new operation with
// ErrRetryOnLeader (on) while it hands its shard's lead over, or take them
// again (off) when the hand-over did not happen. Operations admitted
// before (replica.go, invariant 10) go on and are proposed as usual;
// Settled reports when none is left changing state or waiting for its
// commit, which is when the hand-over can start without failing any (so
// without a rebuild: SetLeader). SetLeader ends a yield.
//
// For engine/cluster (a planned leader change: balancing, a full disk, a
// node's shutdown); an error for a broker without replication.
func (b *Broker) Yield(on bool) error {
	r, ok := b.store.(*replStore)
	if !ok {
		return errors.New("engine: Yield on a broker without replication")
	}
	r.mu.Lock()
	var unlogged []logRec
	resumed := r.yield && !on && r.leader
	if resumed {
		unlogged = r.takeUnloggedLocked() // made while yielding: invariant 2 of replica_expiry.go
	}
	started := on && r.leader && !r.yield
	r.yield = on && r.leader
	r.pushDrain = started || r.pushDrain && r.yield
	if started {
		r.drainEnd = time.Now().Add(pushDrainMax)
	}
	term := r.term
	r.mu.Unlock()
	r.logUnlogged(unlogged)
	switch {
	case started:
		// Its push workers stop now, while it still leads, and give back
		// what they took and did not try (push.go), admitted although it
		// yields (enterGiveBack; Settled waits for them): the next leader
		// pushes those at once. After the step-down (SetLeader) a give-back
		// was refused, and they stayed leased for the push lease with the
		// receive counted as an attempt (topics2 audit, 2026-12-07).
		b.pusher.follow()
	case resumed:
		b.leadTopics(term) // the hand-over did not happen: push again
	}
	return nil
}

// Settled reports whether no admitted operation of this replica is still
// changing state and no proposal of it waits for its commit (true for a
// broker without replication).
func (b *Broker) Settled() bool {
	r, ok := b.store.(*replStore)
	if !ok {
		return true
	}
	r.mu.Lock()
	drain := r.draining()
	r.mu.Unlock()
	if drain && b.pusher.live.Load() > 0 {
		return false // a stopped push worker may still give back (Yield)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.pending) == 0 && r.inflight == 0 {
		r.pushDrain = false // no worker runs: nothing more to give back (invariant 10)
		return true
	}
	return false
}

// Diverged reports whether the broker's live state may hold a change its
// log does not make: a proposal of it failed, or a change was refused
// because it no longer led (an operation that was under way when it
// stepped down). Such a broker must be reopened (CloseForRebuild, Open)
// before it leads again or serves its state; the log, and so the index,
// never holds those changes. A broker that stepped down with every change
// committed has not diverged and goes on as a follower.
//
// For engine/cluster; false on a broker without replication.
func (b *Broker) Diverged() bool {
	r, ok := b.store.(*replStore)
	return ok && r.diverged.Load()
}

// CloseForRebuild closes a replicated broker without a final checkpoint,
// as a crash would: the next Open rebuilds its state from what is committed.
//
// For engine/cluster; an embedder closes a broker with Close.
func (b *Broker) CloseForRebuild() error {
	if !b.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	b.compactor.stop()
	b.stopQueues()
	return b.store.close(false)
}

// exportSettleTimeout bounds how long ExportState waits for the
// proposals in flight at its end (exportFence).
const exportSettleTimeout = 10 * time.Second

// ErrExportUnsettled: a snapshot's export waited exportSettleTimeout for
// the leader's proposals in flight, and some never settled. They may wait
// for the very member the snapshot is for (engine/cluster gives them up).
var ErrExportUnsettled = errors.New("engine: snapshot: proposals in flight did not settle")

// errExportUncommitted: the state ExportState read may hold a change that
// never commits. The follower asks again.
var errExportUncommitted = errors.New("engine: snapshot: the state holds changes its log does not make (a failed proposal); try again")

// exportFence makes an ExportState stream hold committed changes only. A
// leader's live state also holds the changes of its proposals in flight,
// and one of them may fail (the leader loses the lead). Every change the
// stream shows was made under its stripe's lock, and its records were
// proposed under that lock (Replica), so when ExportState has read its
// last stripe, each of those changes is committed, failed, or pending.
// exportFence waits for the pending ones and fails if the broker has
// diverged (a proposal of it failed, or a change was refused: Diverged): it
// is rebuilt from the log, and until then its state may hold that change.
// A follower's state otherwise holds only applied entries, which are
// committed.
func (r *replStore) exportFence() error {
	r.mu.Lock()
	pend := append([]*pendingProp(nil), r.pending...)
	r.mu.Unlock()
	var timeout <-chan time.Time
	for _, p := range pend {
		select {
		case <-p.done:
			continue
		default:
		}
		if timeout == nil {
			r.urge() // replica_hold.go, invariant 1
			t := time.NewTimer(exportSettleTimeout)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-p.done:
		case <-timeout:
			return fmt.Errorf("%w within %v", ErrExportUnsettled, exportSettleTimeout)
		}
	}
	if r.diverged.Load() {
		return errExportUncommitted
	}
	return nil
}

// enter admits an operation (replica.go, invariant 10): refused before it changed
// anything on a replica that does not lead or is yielding.
func (r *replStore) enter() error {
	_, err := r.admit()
	return err
}

// pushDrainMax bounds the give-backs of a yielding leader's push workers
// (Yield): well within the second a hand-over waits for Settled
// (engine/cluster settleMax), so that none is admitted once the transfer
// may have started. A worker not done by then (a dead-letter move to
// another shard in progress) leaves the rest leased, as before.
const pushDrainMax = 500 * time.Millisecond

// draining reports whether a yielding leader still admits give-backs
// (r.mu held).
func (r *replStore) draining() bool {
	return r.pushDrain && time.Now().Before(r.drainEnd)
}

// enterGiveBack is enter for a push worker's give-back (Queue.giveBack):
// also admitted while the leader yields, until Settled has reported true
// (pushDrain), so that what the stopped workers took and did not try is
// visible again on the next leader at once.
func (r *replStore) enterGiveBack() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.leader || r.yield && !r.draining() {
		return ErrRetryOnLeader
	}
	r.inflight++
	return nil
}

// enterLeading is enter for a receive: it also returns the term the
// replica leads, read under the admission's lock so that no step-down
// falls between them (replica_confirm.go, invariant 1); 0 when the
// replica confirms nothing.
func (r *replStore) enterLeading() (uint64, error) {
	term, err := r.admit()
	if _, ok := r.rep.(ReplicaConfirmer); !ok {
		term = 0
	}
	return term, err
}

// admit is enter, returning the term it admitted the operation in.
func (r *replStore) admit() (uint64, error) {
	if h := r.enterHook; h != nil {
		h(false)
	}
	r.mu.Lock()
	if !r.leader || r.yield {
		r.mu.Unlock()
		return 0, ErrRetryOnLeader
	}
	r.inflight++
	term := r.term
	r.mu.Unlock()
	if h := r.enterHook; h != nil {
		h(true)
	}
	return term, nil
}

func (r *replStore) leave() {
	r.mu.Lock()
	r.inflight--
	r.mu.Unlock()
}

// allSends reports whether recs are a send's records only.
func allSends(recs []logRec) bool {
	for i := range recs {
		if !isSendRec(recs[i].typ) {
			return false
		}
	}
	return len(recs) > 0
}
