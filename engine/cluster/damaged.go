package cluster

// A replica whose own log is damaged does not take part in its shard.
//
// A single broker that finds damage drops what it cannot read and reports
// it: there is no other copy. A shard's replica has others, and its damage
// is its disk's alone. Kept as it was, it lied: its Raft position said it
// held every entry up to its applied index, so no leader sent the lost
// ones again, and while it led, clients saw acknowledged messages gone
// (docs audit, 2026-12-06: after a log tail cut below the checkpoint, or
// --wal-repair); and a damaged body it met as a leader was dropped by a
// replicated delete, on every member.
//
// So a shard whose replica opens on a damaged log (engine.RecoveryStats
// .Damaged: a tail cut below the checkpoint), whose log does not open for
// damage (wal.ErrCorrupt), or whose broker met a damaged body while it ran
// (engine.Broker.Damaged: a replicated broker drops nothing, it fails)
// does not start on this node: at the process's start the node does not
// start, and at a restart in place the shard stays out of its group,
// saying why (Health, GET /cluster's failure). While the other members
// still elect a leader, the operator empties this node's data directory
// and starts it again: it is then replaced in every shard and catches up
// (rejoin.go), as a wiped node is. When they do not (more than one copy
// damaged, or the undamaged one behind), an emptied node would vote for a
// member lacking the newest entries (allbad audit): the operator starts
// exactly one damaged copy with --wal-repair, which is then trusted as it
// is, and empties the others once it leads (docs/operations.md).
//
// Rebuilding it by itself was tried and withdrawn the same day (review J,
// 2026-12-06): a replica put aside and started empty voted at once, before
// it was replaced, and with the one other holder of the committed tail
// down it elected a member that lacked it (320 acknowledged messages
// gone); and every member's copy could be put aside at one start, which
// emptied the shard.
//
// The refusal is written down (damagedMarker in the shard's directory)
// before anything else: the refused open has already cut and checkpointed
// the damaged log, so the next start found no damage and served the
// damaged copy (review K, 2026-12-06). Emptying the directory removes the
// mark; --wal-repair removes it too.
//
// Invariants:
//  1. A damaged replica never votes, leads or serves: its shard does not
//     start here, at this start or any later one, until the operator
//     empties the directory or asks for --wal-repair.
//  2. Nothing is deleted or moved: the operator decides.
//
// Owner: the shard's loop (start runs there, or before the loops start).

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/wal"
)

// errDamagedReplica explains what to do with a damaged replica.
var errDamagedReplica = errors.New("this node's copy of the shard is damaged and does not take part in it: " +
	"if the shard has a leader on the other members (GET /cluster), stop this node, empty its data directory and start it again, and it is replaced and catches up; " +
	"if it has none, more than one copy is damaged: empty nothing yet, start exactly one damaged copy (the one that ran last) with --wal-repair " +
	"(docs/operations.md, \"What survives what\", a node's log damaged); this node the shard's only member: --wal-repair, never empty it")

// openChecked opens the shard's broker unless its replica is damaged (see
// the file comment): its broker met a damaged body before this restart
// (s.damage), its log does not open for damage, or it opened on a damaged
// log without --wal-repair.
func (s *shard) openChecked() (*engine.Broker, error) {
	repair := s.n.cfg.Engine.WAL.Repair && s.rn == nil // an operator's decision at the process start, not at a restart in place
	mark := filepath.Join(s.dir, damagedMarker)
	marked := false
	if why, err := os.ReadFile(mark); err == nil {
		if !repair {
			return nil, fmt.Errorf("%w (found earlier: %s)", errDamagedReplica, bytes.TrimSpace(why))
		}
		s.log.Warn("this replica was found damaged earlier; --wal-repair starts it as it is", "why", string(bytes.TrimSpace(why)))
		marked = true
	}
	if _, err := os.Stat(filepath.Join(s.dir, repairedMarker)); err == nil {
		s.repaired.Store(true) // an earlier start repaired it (votehold.go, invariant 4)
	}
	b, err := s.openCheckedUnmarked(repair)
	if err == nil && marked {
		s.markRepaired()                       // before the DAMAGED mark goes
		if err = os.Remove(mark); err != nil { // only once the repaired copy opened
			b.Close()
			return nil, err
		}
	}
	return b, err
}

// openCheckedUnmarked is openChecked past the mark: it refuses a replica
// found damaged now, unless repair.
func (s *shard) openCheckedUnmarked(repair bool) (*engine.Broker, error) {
	if s.damage != nil {
		return nil, s.refuseBody(s.damage)
	}
	b, err := s.openBroker()
	if errors.Is(err, wal.ErrCorrupt) {
		return nil, s.refuse(err.Error())
	}
	if err != nil {
		return nil, err
	}
	if rec := b.Recovery(); rec.Damaged {
		if repair {
			s.log.Warn("this replica's log was damaged and is repaired as --wal-repair asks: it is trusted as it is (right only when every member's copy is damaged)", "lost_messages", rec.Lost)
			s.markRepaired()
			return b, nil
		}
		b.Close()
		return nil, s.refuse(fmt.Sprintf("its log lost records it had acknowledged (%d messages with them)", rec.Lost))
	}
	return b, nil
}

// damagedMarker is the file that says a shard's replica was found damaged
// (see the file comment).
const damagedMarker = "DAMAGED"

// repairedMarker says this copy was started with --wal-repair on a damaged
// log and the procedure it is for is not over (votehold.go, invariant 4):
// kept across restarts, since the repaired node restarted (the flag taken
// off its unit, a crash) before the second copy was emptied left that
// node holding its vote for good (review R,
// TestClusterEveryCopyDamagedRepairedNodeRestarted).
const repairedMarker = "REPAIRED"

// markRepaired notes a repaired copy, durably if it can.
func (s *shard) markRepaired() {
	s.repaired.Store(true)
	if err := writeSynced(filepath.Join(s.dir, repairedMarker), "started with --wal-repair on a damaged log (engine/cluster/votehold.go)\n"); err != nil {
		s.log.Warn("REPAIRED mark not written: a restart before every member holds this copy ends its exception for held votes", "err", err)
	}
}

// refuseBody refuses the replica for the damaged body its broker met (d:
// engine.Broker.Damaged). The damage is kept (s.damage): every later
// attempt in place refuses too, also if the mark could not be written
// (review M).
func (s *shard) refuseBody(d error) error {
	s.damage = d
	return s.refuse(fmt.Sprintf("a message body in its log failed its checksum: %v", d))
}

// refuse writes the damage down in the shard's directory, durably (a
// power loss must not make the next start serve the cut copy), and
// returns the error that explains it.
func (s *shard) refuse(why string) error {
	if err := writeSynced(filepath.Join(s.dir, damagedMarker), why+"\n"); err != nil { // members.go
		s.log.Error("the damaged replica's mark could not be written: a later start may not see the damage", "err", err)
		return fmt.Errorf("%w (%s; its mark could not be written (%v): a later start would serve the damaged copy, so do not start it again before its directory is emptied)", errDamagedReplica, why, err)
	}
	return fmt.Errorf("%w (%s)", errDamagedReplica, why)
}
