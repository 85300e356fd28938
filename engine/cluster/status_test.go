package cluster

import (
	"slices"
	"testing"
)

// votersNotMembers: a voter of any shard with no Raft address in the
// member list is named once; members, and members' voters, are not. An
// older member took a removed node back so, with no address, and the
// cluster lost its fault tolerance with every listed member healthy
// (upgrade audit, 2026-12-06).
func TestVotersNotMembers(t *testing.T) {
	members := []MemberStatus{{NodeID: 1, Raft: "a:1"}, {NodeID: 2, Raft: "a:2"}, {NodeID: 4, Raft: "a:4"}, {NodeID: 5}}
	shards := []ShardStatus{{Voters: []uint64{1, 2, 3, 4}}, {Voters: []uint64{3, 1, 2, 4, 5}}, {Voters: []uint64{1, 2, 4}}}
	if got := votersNotMembers(members, shards); !slices.Equal(got, []uint64{3, 5}) {
		t.Errorf("votersNotMembers = %v, want [3 5]", got)
	}
	if got := votersNotMembers(members, shards[2:]); got != nil {
		t.Errorf("every voter a member: %v", got)
	}
}
