package cluster

// A replica whose own log is damaged is rebuilt from the other members.
//
// A single broker that finds damage drops what it cannot read and reports
// it: there is no other copy. A shard's replica has two others, and its
// damage is its disk's alone. Kept as it was, it lied: its Raft position
// said it held every entry up to its applied index, so no leader sent the
// lost ones again, and while it led, clients saw acknowledged messages
// gone (docs audit, 2026-12-06: after --wal-repair, after a log tail cut
// below the checkpoint); and a damaged body it met as a leader was
// dropped by a replicated delete, on every member.
//
// So a replica that opens on a damaged log (engine.RecoveryStats.Damaged),
// whose log does not open for damage (what --wal-repair would skip), or
// whose broker met a damaged body (engine.Broker.Damaged, then the shard
// restarts: restart.go), puts its directory aside, renamed
// <dir>.damaged-<time> and kept for the operator, and starts the shard
// empty, as on a wiped node. The node then asks the members whether it
// lost what it acknowledged (rejoin.go): it did, so it is replaced, and
// catches up from a snapshot or the leader's log.
//
// Invariants:
//  1. A damaged replica never serves or votes on its damaged state: it is
//     set aside before its Raft member starts.
//  2. A shard whose only member is this node keeps its repaired state (a
//     single broker's semantics: there is no other copy), or does not
//     open (--wal-repair then applies); so does one whose members are
//     unknown. The rest of the cluster never gives up its copy for this
//     one's.
//  3. Nothing is deleted: the damaged directory stays until the operator
//     removes it.
//
// Owner: the shard's loop (start runs there, or before the loops start).

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/wal"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// openChecked opens the shard's broker, putting a damaged replica aside
// first (see the file comment): one whose broker met a damaged body
// before this restart (s.damage), one whose log does not open for damage
// (wal.ErrCorrupt: what --wal-repair would skip), and one that opened on
// a damaged log (engine.RecoveryStats.Damaged).
func (s *shard) openChecked() (*engine.Broker, error) {
	if s.damage != nil {
		why := "a message body in its log is damaged: " + s.damage.Error()
		s.damage = nil
		if s.othersHold(nil) {
			if err := s.putAside(why); err != nil {
				return nil, err
			}
		}
	}
	b, err := s.openBroker()
	if errors.Is(err, wal.ErrCorrupt) && s.othersHold(nil) {
		if err := s.putAside("its log does not open: " + err.Error()); err != nil {
			return nil, err
		}
		b, err = s.openBroker()
	}
	if err != nil {
		return nil, err
	}
	rec := b.Recovery()
	if !rec.Damaged {
		return b, nil
	}
	rs, err := b.ReplicaState()
	if err != nil {
		b.Close()
		return nil, err
	}
	cs := &pb.ConfState{}
	if rs.ConfState != nil {
		if err := proto.Unmarshal(rs.ConfState, cs); err != nil {
			b.Close()
			return nil, fmt.Errorf("configuration: %w", err)
		}
	}
	if !s.othersHold(cs.GetVoters()) {
		s.log.Warn("this replica's log lost records at start and no other member holds the shard: it keeps what survived", "lost_messages", rec.Lost)
		return b, nil
	}
	if err := b.CloseForRebuild(); err != nil {
		s.log.Debug("closing the damaged replica", "err", err)
	}
	if err := s.putAside(fmt.Sprintf("its log lost records at start (%d messages with them)", rec.Lost)); err != nil {
		return nil, err
	}
	return s.openBroker()
}

// othersHold reports whether another member holds the shard: one of
// voters (the configuration the replica's log holds), else of the
// configuration the shard ran with before this restart, else of the
// members this node knows (a start: --cluster-peers and those learnt).
func (s *shard) othersHold(voters []uint64) bool {
	if voters == nil && s.st != nil {
		voters = s.st.votersNow()
	}
	if voters == nil {
		s.n.bookMu.Lock()
		for id := range s.n.book {
			voters = append(voters, id)
		}
		s.n.bookMu.Unlock()
		for id := range s.n.cfg.Peers {
			voters = append(voters, id)
		}
	}
	for _, v := range voters {
		if v != s.n.cfg.NodeID {
			return true
		}
	}
	return false
}

// putAside renames the shard's directory <dir>.damaged-<time> and makes
// an empty one (invariant 3).
func (s *shard) putAside(why string) error {
	aside := s.dir + ".damaged-" + time.Now().UTC().Format("20060102T150405.000")
	if err := os.Rename(s.dir, aside); err != nil {
		return fmt.Errorf("putting the damaged replica aside: %w", err)
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return err
	}
	s.setAside.Store(true)
	s.log.Warn("this replica is damaged: its directory is put aside and the shard catches up from the other members", "why", why, "aside", aside)
	return nil
}
