//go:build knownbug

package cluster

import (
	"os"
	"testing"
	"time"
)

// TestClusterOlderCopyWithTheLeaderDownLosesNothing: docs/operations.md,
// "What survives what": "a node's disk wiped, or its directory put back
// from an older copy | the node is replaced in every shard and catches up;
// it holds its vote until then". A wiped node holds its vote
// (votehold.go); an older copy of a node's directory has history, so it
// does not, and votes with its older log while its rejoin question waits
// for the member that is down. Node V acknowledged batches "b" with the
// leader L while node O was down; V is then put back from a copy made
// before "b", and L is lost. V and O lack "b": if V votes, they elect one
// of themselves, and once L is back its log is overwritten: the
// acknowledged messages only L and V had are gone.
func TestClusterOlderCopyWithTheLeaderDownLosesNothing(t *testing.T) {
	l := int(preferredLeader(0, []uint64{1, 2, 3})) - 1
	v, o := (l+1)%3, (l+2)%3
	c := startTestCluster(&testCluster{t: t, nodes: make([]*Node, 3), shards: 1, infoLogs: true})
	defer c.stopAll()
	c.createQ()
	c.sendBatches("a", 10)
	for _, i := range []int{v, o} {
		c.holds(i, 160, 20*time.Second)
	}
	// The older copy of V: taken while it is stopped, as a volume
	// snapshot or a backup of the directory would be.
	c.stop(v)
	old := t.TempDir() + "/old"
	if err := os.CopyFS(old, os.DirFS(c.dirs[v])); err != nil {
		t.Fatal(err)
	}
	c.start(v)
	c.holds(v, 160, 20*time.Second)

	c.stop(o)              // the third member is behind from here on
	c.sendBatches("b", 10) // committed by L with V's acknowledgement
	c.holds(v, 320, 20*time.Second)

	c.stop(v)
	if err := os.RemoveAll(c.dirs[v]); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(old, c.dirs[v]); err != nil {
		t.Fatal(err)
	}
	c.stop(l) // the only other holder of "b" is lost
	c.startSome(v, o)
	// O asks V for its (pre-)vote again and again; with V voting they
	// elect one of themselves here.
	c.campaignedAt(v)
	c.electedNone(l, v, o)
	c.start(l)
	li, _ := c.leader("q")
	info, err := c.counts(li, "q")
	if err != nil {
		t.Fatal(err)
	}
	if info.Active != 320 {
		t.Fatalf("the leader (node %d) holds %d messages of the 320 acknowledged", li+1, info.Active)
	}
	for i := range c.nodes {
		c.holds(i, 320, 30*time.Second)
	}
}
