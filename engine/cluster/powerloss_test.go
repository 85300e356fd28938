package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/wal"
)

// The whole cluster loses power at once (every node's log keeps only what
// it fsynced, plus a random prefix of the rest, the last write possibly
// torn: wal.MemFS.CrashClone), while senders and deleters run. Restarted
// from those images, the cluster still holds every send acknowledged
// before the loss and none of the messages whose delete was acknowledged:
// with --sync always an acknowledgement means a majority holds the change
// durably.
//
// Only what was acknowledged before the instant of the crash images
// counts, and even rounds keep only what each node fsynced. Seen failing in
// every round, make test's first included, with the append worker's fsync
// skipped for batches holding entries (append.go, invariant 3): 14 to 55
// acknowledged sends gone, 6 to 30 deletes back. Before, when
// acknowledgements counted up to the copy of the directories (tens of
// milliseconds before the images, time enough for the WAL's own lazy
// fsync to cover them), 20 rounds missed that.
//
// Seen failing: (1) before replStore.append refused the records of a
// replica that had just stepped down (it dropped them and the operation
// was acknowledged: deletes came back, 1-3 per failing round, about half
// the runs); (2) with the append worker's fsync skipped (append.go: an
// acknowledged delete came back). It also found the leader's storage
// answering ErrUnavailable for entries its broker had folded away (Raft
// panicked) and snapshot installs that could not wipe a log kept on
// another file system.
//
// Fixed since (each was seen failing here): (3) compaction on a replica
// relocated a message whose delete or state change it had persisted but
// not applied yet: the relocate record brought the deleted message back
// at recovery (its slot claimed twice: "recovered message moved to
// another slot"), or the apply pointed the message back at its old body,
// in a segment compaction then removed (bodies unreadable after the
// restart: "log segment removed"; engine/replica.go invariant 6);
// (4) compaction removed the segments holding the records of the entries
// a replica keeps for lagging followers (etcd raft panicked: entries
// unavailable from storage; invariant 7); (5) a member of a new cluster
// was replaced at its first start ("a member holds less than it
// acknowledged"): the rejoin question compared acknowledgements sent
// after it had read its last indexes (rejoin.go); (6) the test itself
// cloned the nodes' logs one after another while the load ran, which is
// no power loss: a later clone held a commit the earlier ones had lost
// (etcd raft panicked: need non-empty snapshot); wal.CrashCloneAll now
// freezes them all at one instant.
//
// Rounds 0 and 1 of every four run the node's default shared flush
// (wal.SharedSyncFS over MemFS.SyncAll), the others each log's own. Seen
// failing in 3 of 3 runs of round 0 with a Sync that joined a flush
// already running (wal/syncfs.go, invariant 1): the images did not even
// restart.
//
// One round runs with -short (make test); SMQD_LONG runs 20.
//
// The index directories are copied as they are (the checkpointer is held
// off for the run, so they do not change, and recovery replays the logs).
func TestClusterPowerLoss(t *testing.T) { lossRounds(t, 20, lossCase{}) }

// Every node's process is killed at one instant (kill -9: each keeps what
// it wrote to its files, synced or not, and loses what it held in memory:
// wal.KillCloneAll) while senders and deleters run, with --sync interval
// (and an interval longer than the test, so nothing is fsynced). Restarted
// from those images, the cluster holds every send acknowledged before the
// kill and none of the messages whose delete was acknowledged: in interval
// mode, as on a single broker, an acknowledgement means that a majority
// wrote the change to its files (append.go, invariant 4). The logs' writes
// are slowed (MemFS.SetWriteDelay, 1 ms each), as on a busy disk, so that
// they trail the appends.
//
// Seen failing in 3 rounds of 3 before the append worker waited for the
// write (its responses left once the batch was in the log's ring): 4 to
// 5 acknowledged sends gone and 1 to 2 deletes back per round. With the
// writes not slowed it passed 3 of 3 all the same: a MemFS write costs
// nothing, a disk's under load does.
func TestClusterKill9WithSyncInterval(t *testing.T) {
	lossRounds(t, 10, lossCase{kill: true, mode: wal.SyncInterval})
}

// lossCase is what a lossRound does.
type lossCase struct {
	// kill: every node's process killed (kill -9) with the log in mode,
	// not a power loss of every node with --sync always.
	kill bool
	mode wal.SyncMode
	// wrap, if set, wraps node i's log file system.
	wrap func(i int, m *wal.MemFS) wal.FS
	// load, if set, runs beside the senders and deleters until ctx ends.
	load func(ctx context.Context, c *testCluster)
}

// lossRounds runs 3 rounds of lossRound, 1 with -short, long with
// SMQD_LONG.
func lossRounds(t *testing.T, long int, lc lossCase) {
	rounds := 3
	if testing.Short() {
		rounds = 1
	}
	if os.Getenv("SMQD_LONG") != "" {
		rounds = long
	}
	for r := range rounds {
		t.Run(fmt.Sprint(r), func(t *testing.T) { lossRound(t, uint64(r), lc) })
	}
}

// lossRound runs one round of TestClusterPowerLoss (kill false: --sync
// always, a power loss of every node) or of TestClusterKill9WithSyncInterval
// and its kind (kill true: a kill -9 of every node).
func lossRound(t *testing.T, seed uint64, lc lossCase) {
	kill := lc.kill
	rnd := rand.New(rand.NewPCG(seed, 42))
	fss := []*wal.MemFS{wal.NewMemFS(), wal.NewMemFS(), wal.NewMemFS()}
	// Rounds 0, 1, 4, 5, ... flush as a node does by default (one flush
	// of the whole file system shared by the shards' logs: syncfs; here
	// MemFS.SyncAll), the others as each log flushing its own files. The
	// shared flush is --sync always's.
	shared := seed%4 < 2 && !kill
	t.Logf("shared flush: %v", shared)
	tweak := func(fs []*wal.MemFS) func(int, *engine.Options) {
		return func(i int, o *engine.Options) {
			o.WAL.FS = fs[i]
			if lc.wrap != nil {
				o.WAL.FS = lc.wrap(i, fs[i])
			}
			if shared {
				o.WAL.FS = wal.NewSharedSync(fs[i], fs[i].SyncAll)
			}
			if kill {
				o.WAL.Sync, o.WAL.SyncInterval = lc.mode, time.Hour
			}
			o.CheckpointInterval, o.CheckpointRecords, o.CheckpointBytes = time.Hour, 1<<40, 1<<40
		}
	}
	var cfgTweak func(int, *Config)
	if kill {
		cfgTweak = func(_ int, cfg *Config) { cfg.SyncAlways = lc.mode == wal.SyncAlways }
		for _, fs := range fss {
			fs.SetWriteDelay(time.Millisecond)
		}
	}
	c := startTestCluster(&testCluster{t: t, tweak: tweak(fss), cfgTweak: cfgTweak, nodes: make([]*Node, 3), shards: 2})
	queues := []string{"pl-a", "pl-b", "pl-c"}
	for _, name := range queues {
		_, b := c.leader(name)
		cfg := engine.DefaultQueueConfig()
		cfg.VisibilityTimeout = time.Second // the drain at the end waits for what was in flight
		if _, err := b.CreateQueue(name, cfg); err != nil {
			t.Fatal(err)
		}
	}

	// The history: what was acknowledged, and when.
	var mu sync.Mutex
	sent := map[string]time.Time{}    // body -> when its send was acknowledged
	deleted := map[string]time.Time{} // body -> when its delete was acknowledged
	failedDel := map[string]string{}  // body -> the error of a delete that failed (it may still take effect)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := queues[w%len(queues)]
			for i := 0; ctx.Err() == nil && i < 100000; i++ {
				b, q := c.route(name)
				if q == nil {
					time.Sleep(time.Millisecond)
					continue
				}
				_ = b
				if w%2 == 0 || i%3 != 0 {
					body := fmt.Sprintf("%s/%d/%d", name, w, i)
					if _, err := q.Send([]engine.SendEntry{{Body: []byte(body)}}, nil); err == nil {
						mu.Lock()
						sent[body] = time.Now()
						mu.Unlock()
					}
					continue
				}
				msgs, err := q.Receive(ctx, engine.ReceiveOptions{Max: 4, HasWait: true}, nil)
				if err != nil {
					continue
				}
				for _, m := range msgs {
					errs := make([]error, 1)
					if _, err := q.Delete([]engine.ReceiptHandle{m.Handle}, errs); err == nil && errs[0] == nil {
						mu.Lock()
						deleted[string(m.Body)] = time.Now()
						mu.Unlock()
					} else if e := cmp.Or(err, errs[0]); !errors.Is(e, engine.ErrReceiptHandleError) && !errors.Is(e, engine.ErrMessageNotExist) {
						// Its outcome is unknown (a step-down: the
						// entry may still commit under the next leader),
						// unlike a refused handle's.
						mu.Lock()
						failedDel[string(m.Body)] = e.Error()
						mu.Unlock()
					}
				}
			}
		}()
	}
	if lc.load != nil {
		wg.Add(1)
		go func() { defer wg.Done(); lc.load(ctx, c) }()
	}
	time.Sleep(time.Duration(300+rnd.IntN(700)) * time.Millisecond)

	// Power fails: every node's directory, then the images of all logs at
	// one instant, while the load runs; only what was acknowledged before
	// that instant counts.
	images := make([]*wal.MemFS, 3)
	dirs := make([]string, 3)
	// Every directory first, then every log: what a node's directory says
	// the others acknowledged to it (<dir>/acked) is then never newer than
	// their logs.
	for i := range 3 {
		dirs[i] = filepath.Join(t.TempDir(), fmt.Sprint(i+1))
		if out, err := exec.Command("cp", "-a", c.dirs[i], dirs[i]).CombinedOutput(); err != nil {
			t.Fatalf("copy node %d: %v %s", i+1, err, out)
		}
	}
	// Even rounds keep nothing that was not fsynced (what a missed fsync
	// loses is then lost on every node); odd ones a random prefix of it.
	crnd := rnd
	if seed%2 == 0 {
		crnd = nil
	}
	lossAt := time.Now()
	if kill {
		copy(images, wal.KillCloneAll(fss...)) // one instant for all
	} else {
		copy(images, wal.CrashCloneAll(crnd, fss...)) // one instant for all: a power loss
	}
	stop()
	wg.Wait()
	for i := range c.nodes {
		c.stop(i)
	}
	mu.Lock()
	var wantSent, wantGone []string
	for body, at := range sent {
		if at.Before(lossAt) {
			wantSent = append(wantSent, body)
		}
	}
	for body, at := range deleted {
		if at.Before(lossAt) {
			wantGone = append(wantGone, body)
		}
	}
	mu.Unlock()
	if len(wantSent) == 0 {
		t.Fatal("nothing was acknowledged before the power loss: the test tested nothing")
	}

	// Restart on the images (at the same paths: the logs' files are named
	// by them) and drain every queue.
	for i := range 3 {
		if err := os.RemoveAll(c.dirs[i]); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("cp", "-a", dirs[i], c.dirs[i]).CombinedOutput(); err != nil {
			t.Fatalf("restore node %d: %v %s", i+1, err, out)
		}
	}
	r := newTestClusterAt(t, c.dirs, tweak(images), cfgTweak)
	seen := map[string]bool{}
	deadline := time.Now().Add(2 * time.Minute) // bounds a drain that cannot finish
	for _, name := range queues {
		for {
			if time.Now().After(deadline) {
				t.Fatalf("the drain of %s did not finish: a shard never served it again", name)
			}
			_, q := r.route(name)
			if q == nil {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			msgs, err := q.Receive(context.Background(), engine.ReceiveOptions{Max: 16, HasWait: true}, nil)
			if errors.Is(err, engine.ErrNotLeader) || errors.Is(err, engine.ErrClosed) {
				continue
			}
			if errors.Is(err, engine.ErrMessageNotExist) {
				info, err := q.Attributes()
				if err != nil {
					continue
				}
				if info.Active+info.Inactive+info.Delayed == 0 {
					break
				}
				time.Sleep(100 * time.Millisecond) // received before the loss: visible again soon
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				seen[string(m.Body)] = true
				q.Delete([]engine.ReceiptHandle{m.Handle}, make([]error, 1))
			}
		}
	}
	lost, ambiguous := 0, 0
	for _, body := range wantSent {
		if why, ok := failedDel[body]; ok && !seen[body] && !deletedEver(deleted, body) {
			ambiguous++
			if ambiguous <= 3 {
				t.Logf("acknowledged send %q gone, but a delete of it failed (%s): it may have taken effect", body, why)
			}
			continue
		}
		if !seen[body] && !deletedEver(deleted, body) {
			lost++
			if lost <= 5 {
				t.Errorf("acknowledged send %q is gone after the power loss", body)
			}
		}
	}
	back := 0
	for _, body := range wantGone {
		if seen[body] {
			back++
			if back <= 5 {
				t.Errorf("%q came back after its delete was acknowledged", body)
			}
		}
	}
	t.Logf("acknowledged before the loss: %d sends, %d deletes; after: %d messages, %d lost, %d back (%d gone after a failed delete)", len(wantSent), len(wantGone), len(seen), lost, back, ambiguous)
}

func deletedEver(deleted map[string]time.Time, body string) bool {
	_, ok := deleted[body]
	return ok
}

// route returns the leader broker's queue for name, or nil for now.
func (c *testCluster) route(name string) (*engine.Broker, *engine.Queue) {
	for _, n := range c.nodes {
		if n == nil {
			continue
		}
		if b, _, err := n.Route(name); err == nil && b != nil {
			q, err := b.Queue(name)
			if err != nil {
				return nil, nil
			}
			return b, q
		}
	}
	return nil, nil
}

// newTestClusterAt starts a cluster on existing node directories, with
// tweak and cfgTweak (nil for none) for the nodes' options and Configs.
func newTestClusterAt(t *testing.T, dirs []string, tweak func(int, *engine.Options), cfgTweak func(int, *Config)) *testCluster {
	c := &testCluster{t: t, tweak: tweak, cfgTweak: cfgTweak, addrs: map[uint64]string{}, nodes: make([]*Node, len(dirs)), shards: 2, dirs: dirs}
	for i := range dirs {
		c.hold(uint64(i + 1))
	}
	t.Cleanup(c.stopAll)
	c.startAll()
	return c
}
