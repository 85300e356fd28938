package engine

import (
	"testing"
	"time"
)

// Raft's hard state (term, vote) must survive every restart: a member that
// forgets its vote can vote twice in one term (two leaders), and etcd raft
// panics answering a vote at term 0. It lives in recHardState records of
// the log; a checkpoint that folds the whole log, as a clean close does,
// must carry it (metaHardState), or the restart, which replays nothing,
// finds none. A graceful stop of a cluster node did lose it (the fault
// harness's graceful-stop cycle: "term should be set when sending
// MsgPreVoteResp" at the restart).
func TestReplicaHardStateSurvivesACleanRestart(t *testing.T) {
	for _, withEntries := range []bool{false, true} {
		t.Run(map[bool]string{false: "hard state only", true: "entries applied"}[withEntries], func(t *testing.T) {
			dir := t.TempDir()
			open := func() *Broker {
				o := Options{Dir: dir, Replica: &handReplica{kick: make(chan struct{}, 1)}, FreeSpaceReserve: -1, Stripes: 1, Logger: testLogger(t)}
				o.CheckpointInterval, o.CheckpointRecords, o.CheckpointBytes = time.Hour, 1<<40, 1<<40
				b, err := Open(o)
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			b := open()
			want := ReplicaHardState{Term: 7, Vote: 3}
			if withEntries {
				ents := []ReplicaEntry{{Index: 1, Term: 7, Kind: EntryEmpty}, {Index: 2, Term: 7, Kind: EntryEmpty}}
				if err := b.PersistEntries(ents); err != nil {
					t.Fatal(err)
				}
				want.Commit = 2
			}
			if err := b.PersistHardState(want); err != nil {
				t.Fatal(err)
			}
			if err := b.SyncLog(); err != nil {
				t.Fatal(err)
			}
			if withEntries {
				if err := b.ApplyCommitted([]ReplicaEntry{{Index: 1, Term: 7, Kind: EntryEmpty}, {Index: 2, Term: 7, Kind: EntryEmpty}}); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.Close(); err != nil { // clean: a checkpoint of everything
				t.Fatal(err)
			}
			for round := 0; round < 2; round++ { // and again, with nothing new in between
				b = open()
				st, err := b.ReplicaState()
				if err != nil {
					t.Fatal(err)
				}
				if st.HardState.Term != want.Term || st.HardState.Vote != want.Vote || st.HardState.Commit < want.Commit {
					t.Fatalf("restart %d: hard state %+v, want %+v", round+1, st.HardState, want)
				}
				if err := b.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
