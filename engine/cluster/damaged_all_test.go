package cluster

// Every member's copy of a shard damaged: the documented way back
// (docs/operations.md, "What survives what", a node's log damaged) is to
// start exactly one copy with --wal-repair, then empty the others one at
// a time; the repaired copy leads once a second member runs, and the
// others catch up from it. What the repair lost is listed in its report,
// by the ids clients saw (the report named ids without the shard's
// MessageIDSpace: allbad audit, 2026-12-06, seen failing so).

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// flipBody flips a byte of every copy of body in node i's log of shard 0
// (a stopped node): its log then does not open (wal.ErrCorrupt).
func (c *testCluster) flipBody(i int, body string) {
	c.t.Helper()
	n := 0
	for _, seg := range c.shardSegments(i) {
		data, err := os.ReadFile(seg)
		if err != nil {
			c.t.Fatal(err)
		}
		for off := 0; ; {
			k := bytes.Index(data[off:], []byte(body))
			if k < 0 {
				break
			}
			k += off
			data[k+2] ^= 0xff
			n++
			off = k + len(body)
		}
		if err := os.WriteFile(seg, data, 0o600); err != nil {
			c.t.Fatal(err)
		}
	}
	if n == 0 {
		c.t.Fatalf("body %q not found on node %d", body, i+1)
	}
}

// tryStart starts node i, with --wal-repair if repair.
func (c *testCluster) tryStart(i int, repair bool) error {
	cfg := c.config(i)
	cfg.Engine.WAL.Repair = repair
	if ln := c.lns[cfg.NodeID]; ln != nil {
		cfg.RaftListener = ln
		delete(c.lns, cfg.NodeID)
	}
	n, err := Start(cfg)
	if err != nil {
		return err
	}
	c.nodes[i] = n
	return nil
}

func TestClusterEveryCopyDamagedRepairOneEmptyTheOthers(t *testing.T) {
	c, all := everyCopyDamaged(t)
	c.wipe(1) // empties node 2's directory and starts it
	c.holdsIn(0, "q", all)
	c.holdsIn(1, "q", all)
	c.wipe(2)
	c.holdsIn(2, "q", all)
	// The held votes' exception for the repaired copy (votehold.go,
	// invariant 4) ends once every member holds its log.
	eventually(t, "node 1's copy no longer counts as repaired", func() error {
		if c.nodes[0].shards[0].repaired.Load() {
			return errors.New("still repaired")
		}
		return nil
	})

	// The repair's report names the one message it lost, by the id a
	// client saw, in lost_messages and lost_records alike.
	ps, _ := filepath.Glob(filepath.Join(c.dirs[0], "shards", "0", "repair-*.json"))
	if len(ps) != 1 {
		t.Fatalf("repair reports %v", ps)
	}
	data, err := os.ReadFile(ps[0])
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		LostMessages []struct {
			MessageID string `json:"message_id"`
		} `json:"lost_messages"`
		LostRecords []struct {
			MessageID string `json:"message_id"`
		} `json:"lost_records"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.LostMessages) != 1 || len(r.LostRecords) != 1 || r.LostMessages[0].MessageID != r.LostRecords[0].MessageID {
		t.Fatalf("the report's ids disagree: %s", data)
	}
}

// everyCopyDamaged fills queue q of a new 3-node cluster with 303 x 16
// messages, stops every node, damages a different body in each copy
// (each refuses to start), and starts node 1 with --wal-repair; it
// returns what the repaired copy holds (all but the body it lost).
func everyCopyDamaged(t *testing.T) (*testCluster, int64) {
	c := startTestCluster(&testCluster{t: t, nodes: make([]*Node, 3), shards: 1})
	c.fillForSnapshots() // 300 x 16
	c.sendBatches("la", 1)
	c.sendBatches("lb", 1)
	c.sendBatches("lc", 1)
	const all = 303 * 16
	for i := range 3 {
		c.holds(i, all, 20*time.Second)
	}
	for i := range 3 {
		c.stop(i)
	}
	for i, body := range []string{"la0-5", "lb0-5", "lc0-5"} {
		c.flipBody(i, body)
	}
	for i := range 3 {
		if err := c.tryStart(i, false); !errors.Is(err, errDamagedReplica) {
			t.Fatalf("node %d started on its damaged copy: %v", i+1, err)
		}
	}
	if err := c.tryStart(0, true); err != nil {
		t.Fatalf("node 1 with --wal-repair: %v", err)
	}
	return c, all - 1
}
