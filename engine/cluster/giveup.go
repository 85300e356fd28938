package cluster

// A leader that gives up its proposals in flight so that a member gets its
// snapshot (shutdown audit, 2026-12-07).

import (
	"errors"

	"github.com/smqd/smqd/engine"
)

// exported passes on an export's error; one whose proposals in flight did
// not settle has the shard's loop give them up (giveUpIfAsked).
func (s *shard) exported(err error) error {
	if errors.Is(err, engine.ErrExportUnsettled) && s.giveUp.CompareAndSwap(false, true) {
		s.wakeLoop()
	}
	return err
}

// giveUpIfAsked (the loop) makes a leader whose snapshot for a member
// could not be exported, its proposals in flight unsettled
// (engine.ErrExportUnsettled, exported), give them up. They may need that
// member to commit: with another member down, a member that needs a
// snapshot is the only one left to acknowledge them, and the export waits
// for them, so the shard took no change until the other member was back
// (shutdown audit, 2026-12-07: a rolling restart under load). Their
// operations fail as at a step-down (ErrNotLeader: they may or may not
// have run; their entries stay in the log and commit or not), the broker
// is rebuilt from what is committed, which the next export can stream,
// and it takes changes again, as a new leader does, once every entry of
// its log up to now is applied.
func (s *shard) giveUpIfAsked() error {
	if !s.giveUp.Swap(false) || s.leaderOf == 0 || !s.ready.Load() {
		return nil
	}
	b := s.broker()
	if b == nil {
		return nil
	}
	last := s.st.lastIndexNow()
	if pr, ok := s.rn.Status().Progress[s.n.cfg.NodeID]; ok && pr.Next > 0 {
		last = max(last, pr.Next-1) // with entries not persisted yet
	}
	s.ready.Store(false)
	s.failConfirms() // confirm.go
	if err := b.SetLeader(false, 0); err != nil {
		return err
	}
	s.pmu.Lock()
	s.props = nil
	s.pmu.Unlock()
	s.firstOurs = max(last, 1)
	s.givenUp.Add(1)
	s.log.Warn("a member's snapshot waited for this leader's proposals in flight, which wait for that member: gave them up (their clients got 503: they may or may not have run); this leader takes changes again once its log is applied", "last", last)
	if b.Diverged() {
		return s.rebuild()
	}
	return nil
}
