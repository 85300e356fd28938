package cluster

import (
	"testing"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/smqd/smqd/engine"
)

// A checkpoint may fold entries whose commit index never reached the disk
// (the append worker does not sync a commit index alone: append.go,
// invariant 3). Raft must start on that state: it panics on an applied
// index above its commit index, so the storage reports at least the
// applied index as committed. Seen failing (a panic: "applied(7) is out
// of range") with the clamp in newRaftStorage removed.
func TestStorageCommitCoversApplied(t *testing.T) {
	st := engine.ReplicaState{
		HardState: engine.ReplicaHardState{Term: 2, Vote: 1, Commit: 5},
		Applied:   7, AppliedTerm: 2,
	}
	for i := uint64(1); i <= 9; i++ {
		st.Entries = append(st.Entries, engine.ReplicaEntryInfo{Index: i, Term: 2})
	}
	s := newRaftStorage(nil, st, &pb.ConfState{Voters: []uint64{1}})
	hs, _, err := s.InitialState()
	if err != nil {
		t.Fatal(err)
	}
	if hs.GetCommit() != 7 {
		t.Fatalf("commit %d, want the applied index 7", hs.GetCommit())
	}
	if _, err := raft.NewRawNode(&raft.Config{
		ID: 1, ElectionTick: 10, HeartbeatTick: 1, Storage: s, Applied: st.Applied,
		MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 16, AsyncStorageWrites: true,
	}); err != nil {
		t.Fatal(err)
	}
	// A commit index above the applied one stays as persisted.
	st.HardState.Commit = 9
	if hs, _, _ := newRaftStorage(nil, st, &pb.ConfState{Voters: []uint64{1}}).InitialState(); hs.GetCommit() != 9 {
		t.Fatalf("commit %d, want 9", hs.GetCommit())
	}
}
