package cluster

// votehold.go, invariant 5: a member whose machine restarted under a run
// with --sync interval or none (a power loss) holds its vote until it is
// replaced, or until a majority of the members lost power too.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/wal"
)

// boots are the test nodes' machines' boot ids; reboot gives node i a new
// one, as a power loss does.
type boots struct {
	mu  sync.Mutex
	ids []int
}

func newBoots(n int) *boots { return &boots{ids: make([]int, n)} }

func (b *boots) of(i int) func() string {
	return func() string {
		b.mu.Lock()
		defer b.mu.Unlock()
		return fmt.Sprintf("boot-%d-%d", i, b.ids[i])
	}
}

func (b *boots) reboot(is ...int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, i := range is {
		b.ids[i]++
	}
}

// powerLoss is the power loss of nodes is at one instant: each directory
// as it is (the marks in it included), each log as flushed
// (wal.CrashCloneAll(nil): nothing written since the last fsync). It
// returns the logs' images; the nodes are stopped, their directories put
// back as they were at the instant, and their machines get new boot ids.
func (c *testCluster) powerLoss(b *boots, fss []*wal.MemFS, is ...int) []*wal.MemFS {
	c.t.Helper()
	saved := make([]string, len(is))
	lost := make([]*wal.MemFS, len(is))
	for k, i := range is {
		saved[k] = filepath.Join(c.t.TempDir(), "saved")
		if out, err := exec.Command("cp", "-a", c.dirs[i], saved[k]).CombinedOutput(); err != nil {
			c.t.Fatalf("%v %s", err, out)
		}
		lost[k] = fss[i]
	}
	images := wal.CrashCloneAll(nil, lost...)
	for k, i := range is {
		c.stop(i)
		if err := os.RemoveAll(c.dirs[i]); err != nil {
			c.t.Fatal(err)
		}
		if out, err := exec.Command("cp", "-a", saved[k], c.dirs[i]).CombinedOutput(); err != nil {
			c.t.Fatalf("%v %s", err, out)
		}
	}
	b.reboot(is...)
	return images
}

// intervalCluster is three nodes with --sync interval, an interval longer
// than the test, whose logs are flushed only by a checkpoint, a segment's
// roll or SyncLog (none of which happens by itself here), on fss; a node
// whose image is set starts on it.
func intervalCluster(t *testing.T, b *boots, fss, images []*wal.MemFS) *testCluster {
	return intervalClusterOf(t, 3, b, fss, images)
}

// intervalClusterOf is intervalCluster with k nodes.
func intervalClusterOf(t *testing.T, k int, b *boots, fss, images []*wal.MemFS) *testCluster {
	c := startTestCluster(&testCluster{t: t, nodes: make([]*Node, k), shards: 1, infoLogs: true,
		cfgTweak: func(i int, cfg *Config) {
			cfg.SyncAlways = false
			cfg.bootID = b.of(i)
		},
		tweak: func(i int, o *engine.Options) {
			o.WAL.FS = fss[i]
			if images[i] != nil {
				o.WAL.FS = images[i]
			}
			o.WAL.Sync, o.WAL.SyncInterval = wal.SyncInterval, time.Hour
			o.CheckpointInterval, o.CheckpointRecords, o.CheckpointBytes = time.Hour, 1<<40, 1<<40
			o.WAL.SegmentBytes = 64 << 20
		}})
	c.createQ()
	return c
}

// flushedIntervalCluster is intervalClusterOf k nodes, with their boots,
// logs and images, after 160 messages sent, held and flushed by every
// node: a cluster that ran a while.
func flushedIntervalCluster(t *testing.T, k int) (c *testCluster, b *boots, fss, images []*wal.MemFS) {
	b, images = newBoots(k), make([]*wal.MemFS, k)
	all := make([]int, k)
	for i := range k {
		fss, all[i] = append(fss, wal.NewMemFS()), i
	}
	c = intervalClusterOf(t, k, b, fss, images)
	c.sendBatches("a", 10)
	for _, i := range all {
		c.holds(i, 160, 20*time.Second)
	}
	c.syncLogs(all...)
	return c, b, fss, images
}

// syncLogs flushes nodes is's logs: what they hold so far (their terms and
// entries: history) survives their power loss, as on nodes that ran a
// while.
func (c *testCluster) syncLogs(is ...int) {
	c.t.Helper()
	for _, i := range is {
		if err := c.nodes[i].shards[0].broker().SyncLog(); err != nil {
			c.t.Fatal(err)
		}
	}
}

// TestClusterPowerLostMemberHoldsItsVote: the second fault that a member's
// power loss under --sync interval left open. Node L leads, V follows, T
// is stopped; V acknowledges 160 messages, L commits them with V's
// acknowledgement alone, and V loses power before it flushed them. L is
// then killed and V restarts beside T, which never had them. V must not
// vote: with its vote V and T elect one of themselves, which lacks the
// 160 messages, and when L comes back its committed entries conflict with
// the new leader's log (they are lost, or Raft panics on a commit it must
// undo). Held, V votes for nobody until L is back and leads; then V is
// replaced and catches up, and every message is there.
//
// Seen failing with invariant 5's hold taken out (holdVoteAtStart's lost
// always false, and the checks of the hold itself skipped): node 2 and
// node 3 elected node 2 while node 1 was down, and at the end the leader
// held 160 of the 320 acknowledged messages.
func TestClusterPowerLostMemberHoldsItsVote(t *testing.T) {
	l := int(preferredLeader(0, []uint64{1, 2, 3})) - 1
	v, o := (l+1)%3, (l+2)%3
	b := newBoots(3)
	fss := []*wal.MemFS{wal.NewMemFS(), wal.NewMemFS(), wal.NewMemFS()}
	images := make([]*wal.MemFS, 3)
	c := intervalCluster(t, b, fss, images)
	c.sendBatches("a", 10)
	for _, i := range []int{v, o} {
		c.holds(i, 160, 20*time.Second)
	}
	c.syncLogs(v)
	c.stop(o)
	c.sendBatches("b", 10) // committed by L with V's acknowledgement
	c.holds(v, 320, 20*time.Second)

	images[v] = c.powerLoss(b, fss, v)[0]
	c.stop(l) // a kill: its files as they are
	c.startSome(v, o)
	if !c.nodes[v].voteHeld.Load() || !c.nodes[v].lostPower.Load() {
		t.Fatalf("node %d restarted after a power loss in --sync interval and votes", v+1)
	}
	if mark, err := os.ReadFile(filepath.Join(c.dirs[v], voteHeldFile)); err != nil || !strings.Contains(string(mark), powerLostWhy) {
		t.Fatalf("vote-held mark: %q, %v", mark, err)
	}
	// T asks V for its (pre-)vote again and again; without the hold they
	// elect one of themselves here.
	c.campaignedAt(v)
	if !c.electedNone(l, v, o) {
		t.FailNow()
	}

	c.start(l)
	li, _ := c.leader("q")
	c.holds(li, 320, 30*time.Second)
	eventually(t, fmt.Sprintf("node %d replaced, voting again", v+1), func() error {
		if c.nodes[v].voteHeld.Load() || c.nodes[v].lostPower.Load() {
			return errors.New("it holds its vote")
		}
		return nil
	})
	for i := range c.nodes {
		c.holds(i, 320, 30*time.Second)
	}
	if k := c.nodes[v].snapshots.Load(); k == 0 {
		t.Fatalf("node %d voted again without a snapshot: it was not replaced", v+1)
	}
}

// TestClusterEveryNodesPowerLossWithSyncIntervalElects: every node loses
// power at once. Each holds its vote (invariant 5), and each finds the
// others held for the same reason: a majority lost power, so they vote
// and elect, keeping what they flushed (the interval mode's promise).
// Seen failing with powerLostMajority always false: no leader within 20 s,
// every node holding its vote.
func TestClusterEveryNodesPowerLossWithSyncIntervalElects(t *testing.T) {
	c, b, fss, images := flushedIntervalCluster(t, 3)
	c.sendBatches("b", 5) // may be lost: nothing flushed them

	copy(images, c.powerLoss(b, fss, 0, 1, 2))
	c.startAll()
	li, _ := c.leader("q")
	info, err := c.counts(li, "q")
	if err != nil {
		t.Fatal(err)
	}
	if info.Active < 160 || info.Active > 240 {
		t.Fatalf("the leader holds %d messages, want 160 (flushed) to 240", info.Active)
	}
	c.onLeader("q", func(b *engine.Broker) error {
		q, err := b.Queue("q")
		if err == nil {
			_, err = q.Send([]engine.SendEntry{{Body: []byte("after")}}, nil)
		}
		return err
	})
	eventually(t, "every node votes again", func() error {
		for i, n := range c.nodes {
			if n.voteHeld.Load() {
				return fmt.Errorf("node %d holds its vote", i+1)
			}
		}
		return nil
	})
}

// TestUnsyncedRunMark: the mark's life (invariant 5) on a cluster of one,
// which, with no one to ask, is a majority by itself: written at a start
// with --sync interval, removed by a clean Close; a restart on the same
// boot (a kill -9) holds nothing; one after a reboot holds the vote until
// the answers (here none) say a majority lost power; --sync always writes
// no mark, but keeps one it finds.
func TestUnsyncedRunMark(t *testing.T) {
	b := newBoots(1)
	syncAlways := false
	c := startTestCluster(&testCluster{t: t, nodes: make([]*Node, 1), shards: 1,
		cfgTweak: func(i int, cfg *Config) {
			cfg.SyncAlways = syncAlways
			cfg.bootID = b.of(i)
		}})
	mark := filepath.Join(c.dirs[0], unsyncedRunFile)
	read := func() string {
		t.Helper()
		m, err := os.ReadFile(mark)
		if errors.Is(err, os.ErrNotExist) {
			return ""
		}
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(m))
	}
	if got := read(); got != "boot-0-0" {
		t.Fatalf("mark %q after a start with --sync interval", got)
	}
	c.stop(0)
	if got := read(); got != "" {
		t.Fatalf("mark %q after a clean Close", got)
	}

	// A kill -9: the mark stays, the boot is the same. The node has
	// history first (it elected itself, and its log holds that), as a
	// node that ran a while: one without would be held, and let vote, as
	// a new cluster's (invariant 2b).
	c.start(0)
	c.leader("q")
	c.syncLogs(0)
	saved := filepath.Join(t.TempDir(), "saved")
	if out, err := exec.Command("cp", "-a", c.dirs[0], saved).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	restore := func() {
		t.Helper()
		c.stop(0)
		if err := os.RemoveAll(c.dirs[0]); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("cp", "-a", saved, c.dirs[0]).CombinedOutput(); err != nil {
			t.Fatalf("%v %s", err, out)
		}
	}
	restore()
	c.start(0)
	if c.nodes[0].lostPower.Load() || c.nodes[0].voteHeld.Load() {
		t.Fatal("a restart on the same boot held the vote")
	}

	// A power loss with --sync always next: held, then released (one
	// member is a majority), and the mark kept until a clean Close.
	restore()
	b.reboot(0)
	syncAlways = true
	c.start(0)
	if !c.nodes[0].lostPower.Load() {
		t.Fatal("a restart after a reboot found no power loss")
	}
	if c.nodes[0].voteHeld.Load() {
		t.Fatal("a cluster of one that lost power holds its vote: it would never vote again")
	}
	if got := read(); got != "boot-0-1" {
		t.Fatalf("mark %q while --sync always runs after a run with interval", got)
	}
	c.leader("q")
	c.stop(0)
	if got := read(); got != "" {
		t.Fatalf("mark %q after a clean Close", got)
	}
	c.start(0)
	if got := read(); got != "" {
		t.Fatalf("mark %q written by a start with --sync always", got)
	}
}

// electedNone reports whether nodes is know no leader of shard 0 while
// node down, which holds entries they lack, is stopped: an election among
// them would lose what only down had. Each leader found is an error.
func (c *testCluster) electedNone(down int, is ...int) bool {
	c.t.Helper()
	ok := true
	for _, i := range is {
		if lead := c.nodes[i].shards[0].lead.Load(); lead != 0 {
			c.t.Errorf("nodes %v elected node %d while node %d, which holds entries they lack, is down", plusOne(is), lead, down+1)
			ok = false
		}
	}
	return ok
}

// plusOne is node indexes as node ids.
func plusOne(is []int) []int {
	out := make([]int, len(is))
	for k, i := range is {
		out[k] = i + 1
	}
	return out
}

// TestPowerLostMajorityNotWhileEveryShardIsLed: a node that lost power
// counts toward invariant 5's majority (itself and the members that
// answered so within the last minute) only while some shard has no leader
// it knows. Once every shard has one, the members elect without it and
// replace it: an answer counted may be a minute old, its member replaced
// since, and voting with what it kept could elect a member that lacks
// acknowledged entries.
func TestPowerLostMajorityNotWhileEveryShardIsLed(t *testing.T) {
	n := &Node{shards: []*shard{{id: 0}, {id: 1}}}
	n.lostPower.Store(true)
	n.shards[0].lead.Store(2)
	if !n.notePowerLost(2, true, 3) {
		t.Fatal("itself and member 2 lost power, a shard without a leader: not a majority")
	}
	n.shards[1].lead.Store(3)
	if n.powerLostMajority(3) {
		t.Fatal("a majority counted while this node knows a leader of every shard")
	}
	n.shards[1].lead.Store(0)
	if !n.powerLostMajority(3) {
		t.Fatal("not a majority once a shard lost its leader again")
	}
	n.lostPower.Store(false)
	if n.powerLostMajority(3) {
		t.Fatal("a majority counted for a node that did not lose power")
	}
}
