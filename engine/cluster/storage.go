package cluster

// The Raft log storage of a shard (raft.Storage) over the shard broker's
// own log (engine/replica.go): one log, no copy. It keeps in memory only
// the hard state, the configuration, the terms of the entries the log
// holds and a window of recent entries' data (the entries a follower that
// keeps up asks for); everything else is read back from the broker's WAL.
//
// Invariants:
//  1. terms[i] is the term of entry snapIndex+1+i; the log holds exactly
//     the entries snapIndex+1 .. snapIndex+len(terms) (Append truncates
//     what a new entry replaces).
//  2. Entries answers only from the broker or the recent window, never an
//     entry the log does not hold (ErrCompacted before snapIndex+1,
//     ErrUnavailable after the last).
//
// Owner: mu guards everything; raft calls it from the shard's loop while
// the loop itself updates it, and the snapshot server reads it.

import (
	"log/slog"
	"math"
	"slices"
	"sync"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/smqd/smqd/engine"
)

// The window of recent entries kept in memory holds at most recentEntries
// entries and recentBytes of their data (a trim takes it down to 7/8 of
// both). The bytes bound is what matters for memory: at batch 16 with
// 1 KiB bodies an entry is about 17 KiB, and a node holds a window per
// shard.
const (
	recentEntries = 4096
	recentBytes   = 8 << 20
)

// inboxBatch is how many received messages a shard's loop steps before it
// takes a Ready (shard.run).
const inboxBatch = 64

// maxInflightBytes bounds the entry data a shard's leader has sent one
// follower and not yet seen acknowledged (raft.Config.MaxInflightBytes).
const maxInflightBytes = 8 << 20

// syncReadBytes bounds what one Entries call reads back from the log for
// a follower behind the recent window (Entries).
const syncReadBytes = 64 << 10

type raftStorage struct {
	mu        sync.Mutex
	b         *engine.Broker // the shard's broker (swapped on a rebuild)
	hs        *pb.HardState
	cs        *pb.ConfState
	snapIndex uint64
	snapTerm  uint64
	applied   uint64 // the last applied index compact was told (Snapshot follows the broker up to it)
	terms     []uint64
	recent    []*pb.Entry // the newest entries, ascending, contiguous, ending at the last
	recentLen int         // bytes of data in recent
	log       *slog.Logger
	noSnap    int // Snapshot calls answered "unavailable" for want of one (Snapshot)
}

// newRaftStorage loads the storage state of a shard broker just opened.
func newRaftStorage(b *engine.Broker, st engine.ReplicaState, cs *pb.ConfState) *raftStorage {
	s := &raftStorage{b: b, cs: cs, snapIndex: st.SnapIndex, snapTerm: st.SnapTerm, applied: st.Applied}
	// A commit index is not synced on its own (append.go, invariant 3), so
	// the checkpoint may have folded entries past the last one that reached
	// the disk; those were committed, and Raft refuses (panics on) an
	// applied index above its commit index.
	commit := max(st.HardState.Commit, st.Applied)
	s.hs = &pb.HardState{Term: proto.Uint64(st.HardState.Term), Vote: proto.Uint64(st.HardState.Vote), Commit: proto.Uint64(commit)}
	for _, e := range st.Entries {
		s.terms = append(s.terms, e.Term)
	}
	return s
}

// reload takes the state of fresh, a storage loaded from the shard's
// broker reopened after a failure (restart.go).
func (s *raftStorage) reload(fresh *raftStorage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b, s.hs, s.cs = fresh.b, fresh.hs, fresh.cs
	s.snapIndex, s.snapTerm, s.terms, s.applied = fresh.snapIndex, fresh.snapTerm, fresh.terms, fresh.applied
	s.recent, s.recentLen = nil, 0
}

func (s *raftStorage) InitialState() (*pb.HardState, *pb.ConfState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return proto.Clone(s.hs).(*pb.HardState), proto.Clone(s.cs).(*pb.ConfState), nil
}

func (s *raftStorage) lastLocked() uint64 { return s.snapIndex + uint64(len(s.terms)) }

func (s *raftStorage) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	s.mu.Lock()
	if lo <= s.snapIndex {
		s.mu.Unlock()
		return nil, raft.ErrCompacted
	}
	if hi > s.lastLocked()+1 {
		s.mu.Unlock()
		return nil, raft.ErrUnavailable
	}
	if len(s.recent) > 0 && s.recent[0].GetIndex() <= lo {
		off := lo - s.recent[0].GetIndex()
		var out []*pb.Entry
		size := uint64(0)
		for _, e := range s.recent[off : off+(hi-lo)] {
			size += uint64(proto.Size(e))
			if len(out) > 0 && size > maxSize {
				break
			}
			out = append(out, e)
		}
		s.mu.Unlock()
		return out, nil
	}
	b := s.b
	s.mu.Unlock()
	// Past the recent window: a follower catching up. etcd raft reads its
	// storage inside the shard's loop (Step), so this read delays the
	// shard's heartbeats and everything else the loop does. At most
	// syncReadBytes per call: with MaxSizePerMsg (1 MiB) the leaders read
	// a megabyte back per acknowledgement, went quiet for their other
	// followers under load and stepped down; capped, a catch-up of
	// 1,000,000 × 1 KiB saw no step-down and ended 2-3 times sooner
	// (docs/cluster-benchmarks.md, "Catch-up"). Raft sends more, smaller
	// appends; the bytes in flight are still bounded by maxInflightBytes.
	limit := int(min(maxSize, syncReadBytes))
	ents, ok, err := b.Entries(lo, hi, limit)
	if err != nil {
		// Not ErrUnavailable: etcd raft panics on it (log.go slice), and a
		// damaged record took the whole process down (review M). The
		// follower is sent a snapshot instead; a damaged broker has failed
		// (engine.Broker.Damaged) and the shard leaves its group.
		return nil, raft.ErrCompacted
	}
	if !ok {
		// The broker's checkpointer folded lo away since this storage last
		// followed it (compact runs after applies, and an idle shard applies
		// nothing): follow now, and tell Raft it is compacted, so that it
		// sends the lagging follower a snapshot instead.
		s.compact(math.MaxUint64)
		return nil, raft.ErrCompacted
	}
	out := make([]*pb.Entry, 0, len(ents))
	for _, e := range ents {
		out = append(out, toPB(e))
	}
	return out, nil
}

func (s *raftStorage) Term(i uint64) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case i == s.snapIndex:
		return s.snapTerm, nil
	case i < s.snapIndex:
		return 0, raft.ErrCompacted
	case i > s.lastLocked():
		return 0, raft.ErrUnavailable
	}
	return s.terms[i-s.snapIndex-1], nil
}

func (s *raftStorage) LastIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastLocked(), nil
}

func (s *raftStorage) FirstIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapIndex + 1, nil
}

// Snapshot describes the point a follower that is too far behind starts
// from; its data is sent apart (snapshot.go).
func (s *raftStorage) Snapshot() (*pb.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b != nil && s.b.NeedsReopen() != nil {
		// Failed (a damaged record Entries met: review M): the shard's
		// loop restarts it; another member sends the snapshot.
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	// Follow the broker first, up to what Raft has applied: an idle
	// shard's storage lags its checkpoints (compact runs after applies),
	// and a snapshot older than the broker's point names entries the
	// broker no longer holds, whose publishes the member's counts need
	// (engine.ExportStateAt refuses it).
	s.compactLocked(s.applied)
	if s.snapIndex == 0 {
		// Nothing folded yet: etcd raft panics on an empty snapshot ("need
		// non-empty snapshot"), which it asks for when a follower's
		// progress is past the leader's log. Seen with a leader that a
		// wiped node's vote elected over a member with a longer log
		// (votehold.go: TestClusterWipedNodeHoldsItsVoteUntilReplaced
		// without the hold): the whole process went down. Raft retries
		// later instead; a follower it wants the snapshot for is stuck
		// meanwhile, so say so (TestStorageNoSnapshotBeforeAFold).
		if s.noSnap++; s.noSnap%1024 == 1 && s.log != nil {
			s.log.Warn("raft asked for a snapshot of a shard that has none yet: a follower it is for gets nothing until the log is folded (a leader elected without entries a member holds?)", "times", s.noSnap)
		}
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	return &pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: proto.Uint64(s.snapIndex), Term: proto.Uint64(s.snapTerm),
		ConfState: proto.Clone(s.cs).(*pb.ConfState)}}, nil
}

// append records entries just persisted (invariant 1).
func (s *raftStorage) append(ents []*pb.Entry) {
	if len(ents) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	first := ents[0].GetIndex()
	if first <= s.snapIndex {
		return // behind a snapshot: cannot happen in order
	}
	keep := first - s.snapIndex - 1
	if keep < uint64(len(s.terms)) {
		s.terms = s.terms[:keep]
	}
	for _, e := range ents {
		s.terms = append(s.terms, e.GetTerm())
	}
	// The recent window: drop what the new entries replace, add them.
	if len(s.recent) > 0 {
		if r0 := s.recent[0].GetIndex(); first <= r0 {
			s.cutRecentLocked(0)
		} else if first-r0 < uint64(len(s.recent)) {
			s.cutRecentLocked(int(first - r0))
		} else if first-r0 > uint64(len(s.recent)) {
			s.cutRecentLocked(0) // not contiguous
		}
	}
	for _, e := range ents {
		s.recentLen += len(e.GetData())
	}
	s.recent = append(s.recent, ents...)
	s.trimRecentLocked()
}

// cutRecentLocked drops the window's entries from position k on.
func (s *raftStorage) cutRecentLocked(k int) {
	for i := k; i < len(s.recent); i++ {
		s.recentLen -= len(s.recent[i].GetData())
		s.recent[i] = nil
	}
	s.recent = s.recent[:k]
}

// trimRecentLocked drops the oldest entries of a window over its bounds,
// down to 7/8 of them: one copy of the window per many appends, not one per
// append. The newest entry always stays.
func (s *raftStorage) trimRecentLocked() {
	n := len(s.recent)
	if n <= recentEntries && s.recentLen <= recentBytes {
		return
	}
	k := 0
	for k < n-1 && (n-k > recentEntries*7/8 || s.recentLen > recentBytes*7/8) {
		s.recentLen -= len(s.recent[k].GetData())
		k++
	}
	s.recent = append(s.recent[:0:0], s.recent[k:]...)
}

// termVote is the term and vote of the hard state last persisted.
func (s *raftStorage) termVote() (term, vote uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hs.GetTerm(), s.hs.GetVote()
}

// setHardState records the hard state just persisted.
func (s *raftStorage) setHardState(hs *pb.HardState) {
	s.mu.Lock()
	s.hs = proto.Clone(hs).(*pb.HardState)
	s.mu.Unlock()
}

// setConfState records the configuration just applied.
func (s *raftStorage) setConfState(cs *pb.ConfState) {
	s.mu.Lock()
	s.cs = proto.Clone(cs).(*pb.ConfState)
	s.mu.Unlock()
}

// compact follows the broker's snapshot point (entries folded into its
// index and forgotten) after a checkpoint, never past what Raft has
// applied (it reads unapplied committed entries back).
func (s *raftStorage) compact(applied uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if applied != math.MaxUint64 {
		s.applied = max(s.applied, applied)
	}
	s.compactLocked(applied)
}

func (s *raftStorage) compactLocked(applied uint64) {
	idx, term, err := s.b.SnapshotPoint()
	if err != nil || idx <= s.snapIndex || idx > applied {
		return
	}
	if idx > s.lastLocked() {
		return
	}
	s.terms = append(s.terms[:0:0], s.terms[idx-s.snapIndex:]...)
	s.snapIndex, s.snapTerm = idx, term
	for len(s.recent) > 0 && s.recent[0].GetIndex() <= idx {
		s.recentLen -= len(s.recent[0].GetData())
		s.recent = s.recent[1:]
	}
}

// reset starts the storage over at a snapshot (a follower that installed
// one): an empty log after index.
func (s *raftStorage) reset(b *engine.Broker, index, term uint64, cs *pb.ConfState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b = b
	s.snapIndex, s.snapTerm = index, term
	s.applied = max(s.applied, index)
	s.terms, s.recent, s.recentLen = nil, nil, 0
	s.cs = proto.Clone(cs).(*pb.ConfState)
	if s.hs.GetCommit() < index {
		s.hs.Commit = proto.Uint64(index)
	}
}

// setBroker swaps in a rebuilt broker.
func (s *raftStorage) setBroker(b *engine.Broker) {
	s.mu.Lock()
	s.b = b
	s.mu.Unlock()
}

// toPB and fromPB convert entries. A conf change's engine data is one byte
// of version (1: ConfChange, 2: ConfChangeV2) and then the change.
func toPB(e engine.ReplicaEntry) *pb.Entry {
	t, data := pb.EntryNormal, e.Data
	switch e.Kind {
	case engine.EntryEmpty:
		data = nil
	case engine.EntryConfChange:
		t = pb.EntryConfChangeV2
		if len(data) > 0 && data[0] == 1 {
			t = pb.EntryConfChange
		}
		if len(data) > 0 {
			data = data[1:]
		}
	}
	return &pb.Entry{Term: proto.Uint64(e.Term), Index: proto.Uint64(e.Index), Type: t.Enum(), Data: data}
}

func fromPB(e *pb.Entry) engine.ReplicaEntry {
	re := engine.ReplicaEntry{Index: e.GetIndex(), Term: e.GetTerm(), Data: e.GetData()}
	switch {
	case e.GetType() == pb.EntryConfChange:
		re.Kind, re.Data = engine.EntryConfChange, append([]byte{1}, e.GetData()...)
	case e.GetType() == pb.EntryConfChangeV2:
		re.Kind, re.Data = engine.EntryConfChange, append([]byte{2}, e.GetData()...)
	case len(e.GetData()) == 0:
		re.Kind = engine.EntryEmpty
	}
	return re
}

// lastIndexNow returns the last index the log holds.
func (s *raftStorage) lastIndexNow() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastLocked()
}

// votersNow returns the shard's voters.
func (st *raftStorage) votersNow() []uint64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	return append([]uint64(nil), st.cs.GetVoters()...)
}

// membersNow returns every member of the configuration: voters, outgoing
// voters and learners.
func (st *raftStorage) membersNow() []uint64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	return slices.Concat(st.cs.GetVoters(), st.cs.GetVotersOutgoing(), st.cs.GetLearners(), st.cs.GetLearnersNext())
}

// leaseVoters appends the voters to dst, and reports whether the
// configuration is joint (lease.go: no lease from appends then).
func (st *raftStorage) leaseVoters(dst []uint64) ([]uint64, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return append(dst, st.cs.GetVoters()...), len(st.cs.GetVotersOutgoing()) > 0
}
