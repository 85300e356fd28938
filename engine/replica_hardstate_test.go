package engine

import (
	"fmt"
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

// A configuration change committed but never applied by the consensus
// layer (no PersistConfState for it) is not applied at load either: Raft
// takes the applied index from the broker and never hands an entry below
// it over again, so the change would be lost for good. A cluster node
// stopped right after its first start came back with no members: its
// bootstrap entries were committed (hard state commit 3) and the restart
// counted them applied.
func TestReplicaUnappliedConfChangeSurvivesARestart(t *testing.T) {
	for _, recorded := range []uint64{0, 1, 3} {
		t.Run(fmt.Sprintf("configuration recorded at %d", recorded), func(t *testing.T) {
			dir := t.TempDir()
			open := func() *Broker {
				o := Options{Dir: dir, Replica: &handReplica{kick: make(chan struct{}, 1)}, FreeSpaceReserve: -1, Stripes: 1, Logger: testLogger(t)}
				b, err := Open(o)
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			b := open()
			var ents []ReplicaEntry
			for i := uint64(1); i <= 3; i++ {
				ents = append(ents, ReplicaEntry{Index: i, Term: 1, Kind: EntryConfChange, Data: []byte{1, byte(i)}})
			}
			if err := b.PersistEntries(ents); err != nil {
				t.Fatal(err)
			}
			if err := b.PersistHardState(ReplicaHardState{Term: 1, Commit: 3}); err != nil {
				t.Fatal(err)
			}
			if recorded > 0 {
				if err := b.PersistConfState(recorded, []byte("conf")); err != nil {
					t.Fatal(err)
				}
				if err := b.ApplyCommitted(ents[:recorded]); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.SyncLog(); err != nil {
				t.Fatal(err)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			b = open()
			defer b.Close()
			st, err := b.ReplicaState()
			if err != nil {
				t.Fatal(err)
			}
			if st.Applied != recorded {
				t.Fatalf("applied %d at load with the configuration recorded at %d: entries %d..3 would never be applied", st.Applied, recorded, recorded+1)
			}
			if st.HardState.Commit != 3 || recorded < 3 && (len(st.Entries) == 0 || st.Entries[len(st.Entries)-1].Index != 3) {
				t.Fatalf("entries %+v, hard state %+v", st.Entries, st.HardState)
			}
		})
	}
}
