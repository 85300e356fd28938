package cluster

// The shard's append worker. Raft runs with asynchronous storage writes
// (etcd raft's AsyncStorageWrites): a Ready hands the entries, hard state
// and snapshot to persist to a local append thread as MsgStorageAppend
// messages, with the messages that may leave only once they are durable
// (a follower's acknowledgements, votes, the leader's own acknowledgement)
// attached as responses. The worker persists each message's part in order,
// fsyncs once for all it took (group commit across Readys), then delivers
// the responses: to other nodes through the transport, to this member
// through the loop (shard.go). Meanwhile the loop goes on stepping
// messages and taking Readys: a leader's loop is never blocked on its own
// fsync, so an acknowledgement that arrives while it runs commits at once.
//
// Invariants:
//  1. Messages are processed in the order the loop pushed them; a
//     response leaves only after every write of its message and of all
//     before it is durable (with --sync always) or written (otherwise).
//  2. The worker is the only writer of the shard's log entries and hard
//     state while it runs; the loop replaces the broker (a rebuild, a
//     snapshot install) only after waiting for the worker to be idle
//     (barrier), so the worker never writes to a broker being replaced.
//  3. In --sync always, every batch holding entries, a snapshot, or a
//     new term or vote is synced before its responses leave; the batches
//     are processed one at a time, so when a batch starts, every entry
//     written before it is durable already.
//  4. With --sync interval or none, every such batch is written to the
//     log's files (the OS holds it) before its responses leave: a member
//     never acknowledges an entry or a vote that a kill -9 of its process
//     would lose, only ones a power loss would (rejoin.go replaces it
//     then). Until 2026-12-07 the responses left once the batch was in the
//     log's ring in memory, and a kill -9 of every node at once lost
//     acknowledged sends and brought back acknowledged deletes
//     (TestClusterKill9WithSyncInterval).
//
// Owner: mu guards the queue and the idle flag; the worker goroutine owns
// what it took from the queue.

import (
	"sync"
	"sync/atomic"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/smqd/smqd/engine"
)

type appender struct {
	s    *shard
	mu   sync.Mutex
	idle *sync.Cond    // broadcast when the queue is empty and nothing is in hand
	q    []*pb.Message // guarded by mu
	busy bool          // guarded by mu: a batch is in hand
	kick chan struct{} // the queue grew
	stop chan struct{} // closed by close
	done chan struct{} // closed when the worker exits
	err  atomic.Pointer[error]
}

func newAppender(s *shard) *appender {
	a := &appender{s: s, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	a.idle = sync.NewCond(&a.mu)
	return a
}

// backlog reports the messages queued and whether a batch is in hand
// (status).
func (a *appender) backlog() (queued int, busy bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.q), a.busy
}

// push queues a MsgStorageAppend (the loop).
func (a *appender) push(m *pb.Message) {
	a.mu.Lock()
	a.q = append(a.q, m)
	a.mu.Unlock()
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// barrier waits until every message pushed so far is processed (the loop,
// before it replaces the broker).
func (a *appender) barrier() {
	a.mu.Lock()
	for (len(a.q) > 0 || a.busy) && a.err.Load() == nil && !a.stopped() {
		a.idle.Wait()
	}
	a.mu.Unlock()
}

func (a *appender) stopped() bool {
	select {
	case <-a.stop:
		return true
	default:
		return false
	}
}

// failed returns the error that stopped the worker, if any.
func (a *appender) failed() error {
	if p := a.err.Load(); p != nil {
		return *p
	}
	return nil
}

// close stops the worker after the batch in hand and waits for it.
func (a *appender) close() {
	select {
	case <-a.stop:
	default:
		close(a.stop)
	}
	a.mu.Lock()
	a.idle.Broadcast()
	a.mu.Unlock()
	<-a.done
}

// run is the worker goroutine.
func (a *appender) run() {
	defer close(a.done)
	for {
		select {
		case <-a.stop:
			return
		case <-a.kick:
		}
		for {
			a.mu.Lock()
			batch := a.q
			a.q = nil
			a.busy = len(batch) > 0
			if !a.busy {
				a.idle.Broadcast()
				a.mu.Unlock()
				break
			}
			a.mu.Unlock()
			if err := a.process(batch); err != nil {
				a.err.Store(&err)
				a.s.wakeLoop()
				a.mu.Lock()
				a.busy = false
				a.idle.Broadcast()
				a.mu.Unlock()
				return
			}
		}
	}
}

// process persists a batch of MsgStorageAppend messages, makes them
// durable with one fsync if any carries responses, and delivers those.
//
// A batch that only moves the commit index needs no fsync (invariant 3):
// a lost commit index is learnt again from the leader, as etcd raft's
// MustSync says; whatever its responses acknowledge was synced by an
// earlier batch.
func (a *appender) process(batch []*pb.Message) error {
	s := a.s
	b := s.broker()
	if b == nil {
		return errNoBroker
	}
	respond, mustSync := false, false
	for _, m := range batch {
		if snap := m.GetSnapshot(); !raft.IsEmptySnap(snap) {
			// Its state was installed before Raft saw it (finishInstall).
			meta := snap.GetMetadata()
			s.st.reset(b, meta.GetIndex(), meta.GetTerm(), meta.GetConfState())
			for _, id := range meta.GetConfState().GetVoters() {
				s.n.unmarkGone(id) // a voter is no removed member (confChanged)
			}
			s.n.settleRemovals() // this shard has a configuration now
			mustSync = true
		}
		if len(m.Entries) > 0 {
			mustSync = true
			ents := make([]engine.ReplicaEntry, len(m.Entries))
			for i, e := range m.Entries {
				ents[i] = fromPB(e)
			}
			if err := b.PersistEntries(ents); err != nil {
				return err
			}
			s.st.append(m.Entries)
		}
		if m.Term != nil { // the Ready had a hard state
			if term, vote := s.st.termVote(); m.GetTerm() != term || m.GetVote() != vote {
				mustSync = true
			}
			if err := b.PersistHardState(engine.ReplicaHardState{Term: m.GetTerm(), Vote: m.GetVote(), Commit: m.GetCommit()}); err != nil {
				return err
			}
			s.st.setHardState(&pb.HardState{Term: m.Term, Vote: m.Vote, Commit: m.Commit})
		}
		respond = respond || len(m.Responses) > 0
	}
	if respond && mustSync {
		// Invariant 3. Otherwise (interval, none) the batch is written
		// before its responses leave, as a single broker's acknowledgement
		// waits for the write: a kill -9 then loses nothing this member
		// acknowledged, an entry or a vote (invariant 4).
		settle := b.WaitLogWritten
		if s.n.cfg.SyncAlways {
			settle = b.SyncLog
		}
		if err := settle(); err != nil {
			return err
		}
	}
	var self, out []*pb.Message
	for _, m := range batch {
		for _, r := range m.Responses {
			if r.GetTo() == s.n.cfg.NodeID {
				self = append(self, r)
			} else {
				out = append(out, r)
			}
		}
	}
	s.n.tr.send(s.id, out)
	if len(self) > 0 {
		s.pmu.Lock()
		s.selfMsgs = append(s.selfMsgs, self...)
		s.pmu.Unlock()
		s.wakeLoop()
	}
	return nil
}
