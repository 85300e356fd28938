package cluster

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/index"
)

// TestShardShare: a shard's broker gets its share of the node's ring and
// memtable budgets (the template's, or a single broker's defaults), above
// the floors.
func TestShardShare(t *testing.T) {
	for _, c := range []struct {
		shards       int
		setRing      int
		setMemtable  int64
		wantRing     int
		wantMemtable int64
	}{
		{shards: 1, wantRing: engine.DefaultLogBufferBytes, wantMemtable: index.DefaultMemTableBytes},
		{shards: 2, wantRing: engine.DefaultLogBufferBytes / 2, wantMemtable: index.DefaultMemTableBytes / 2},
		{shards: 8, wantRing: 2 << 20, wantMemtable: 2 << 20},
		{shards: 64, wantRing: 2 << 20, wantMemtable: 2 << 20},
		{shards: 8, setRing: 16 << 20, setMemtable: 32 << 20, wantRing: 2 << 20, wantMemtable: 4 << 20},
		{shards: 1, setRing: 256 << 10, setMemtable: 1 << 20, wantRing: 2 << 20, wantMemtable: 2 << 20},
	} {
		var o engine.Options
		o.WAL.BufferBytes, o.Index.MemTableBytes = c.setRing, c.setMemtable
		got := shardShare(o, c.shards)
		if got.WAL.BufferBytes != c.wantRing || got.Index.MemTableBytes != c.wantMemtable {
			t.Errorf("%d shards, template ring %d memtable %d: ring %d memtable %d, want %d and %d",
				c.shards, c.setRing, c.setMemtable, got.WAL.BufferBytes, got.Index.MemTableBytes, c.wantRing, c.wantMemtable)
		}
	}
	// Segments: a share of the template's (64 MiB by default), at least
	// 4 MiB, never above the template's.
	for _, c := range []struct {
		shards       int
		set, wantSeg int64
	}{
		{1, 0, 64 << 20}, {8, 0, 8 << 20}, {3, 0, (64 << 20) / 3 / 4096 * 4096}, {64, 0, 4 << 20}, {8, 1 << 20, 1 << 20}, {2, 16 << 20, 8 << 20},
	} {
		var o engine.Options
		o.WAL.SegmentBytes = c.set
		if got := shardShare(o, c.shards).WAL.SegmentBytes; got != c.wantSeg {
			t.Errorf("%d shards, template segment %d: %d, want %d", c.shards, c.set, got, c.wantSeg)
		}
	}
	// The reserve: each shard's broker holds the node's, the sum of what
	// each needs; one set by the operator (or the guard off) stays.
	one := engine.SizedFreeSpaceReserve(shardShare(engine.Options{FreeSpaceReserve: -1}, 8))
	if one != 0 {
		t.Fatalf("the guard off: reserve %d", one)
	}
	o := shardShare(engine.Options{}, 8)
	per := o
	per.FreeSpaceReserve = 0
	if want := 8 * engine.SizedFreeSpaceReserve(per); o.FreeSpaceReserve != want || want <= 0 {
		t.Errorf("8 shards: each shard's reserve %d, want the node's %d", o.FreeSpaceReserve, want)
	}
	if got := shardShare(engine.Options{FreeSpaceReserve: 5 << 30}, 8).FreeSpaceReserve; got != 5<<30 {
		t.Errorf("a reserve set by the operator became %d", got)
	}
	t.Logf("8 shards: node reserve %d MiB (each shard needs %d MiB)", o.FreeSpaceReserve>>20, o.FreeSpaceReserve/8>>20)
	// The node's push connections are the shards' together.
	if o.Push.MaxConns != engine.DefaultPushMaxConns/8 {
		t.Errorf("8 shards: push connections %d a shard, want %d", o.Push.MaxConns, engine.DefaultPushMaxConns/8)
	}
	if got := shardShare(engine.Options{Push: engine.PushOptions{MaxConns: 4}}, 8).Push.MaxConns; got != 1 {
		t.Errorf("4 push connections over 8 shards: %d a shard, want 1", got)
	}
}

// TestClusterLargestSendFitsAShardsRing: the largest batch one operation
// appends (16 messages of 4 KiB, each with close to 32 KiB of properties:
// about 600 KiB) is taken by a shard whose ring is its floor, replicated,
// and leaves every node healthy.
func TestClusterLargestSendFitsAShardsRing(t *testing.T) {
	c := newTestCluster(t, 3, 8)
	c.preferredLeaders() // no balancer hand-over under the create and the send
	_, b := c.leader("big")
	if _, err := b.CreateQueue("big", engine.DefaultQueueConfig()); err != nil {
		t.Fatal(err)
	}
	q, _ := b.Queue("big")
	rnd := rand.New(rand.NewPCG(1, 2))
	letters := func(n int) []byte { // incompressible enough: the log compresses large records
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('a' + rnd.IntN(26))
		}
		return b
	}
	value := letters(engine.MaxPropertyBytes/2 - 64)
	ents := make([]engine.SendEntry, 16)
	for i := range ents {
		ents[i].Body = letters(engine.MaxBatchBodyBytes / 16)
		ents[i].Properties = []engine.Property{
			{Name: []byte("p1"), Value: value, Type: engine.PropString},
			{Name: []byte("p2"), Value: value, Type: engine.PropString},
		}
	}
	if _, err := q.Send(ents, nil); err != nil {
		t.Fatalf("a 16-message send with %d bytes of properties each: %v", 2*len(value), err)
	}
	for i := range c.nodes {
		eventually(t, "every replica holds the batch", func() error {
			info, err := c.counts(i, "big")
			if err != nil {
				return err
			}
			if info.Active != 16 {
				return fmt.Errorf("node %d: %d active", i+1, info.Active)
			}
			if err := c.nodes[i].Health(); err != nil {
				return fmt.Errorf("node %d: %v", i+1, err)
			}
			return nil
		})
	}
}

// TestClusterShardsShareTheNodesBudget: every shard of a running node gets
// the same share of the node's budget, whatever order the shards open in.
// (Each shard once divided by the shards opened before it: shard 0 took
// the whole 64 MiB segment, shard 7 a ninth of it.)
func TestClusterShardsShareTheNodesBudget(t *testing.T) {
	const shards = 4
	c := newTestClusterWith(t, 1, shards, func(_ int, o *engine.Options) {
		o.WAL.SegmentBytes = 32 << 20 // a share of 8 MiB, above the 4 MiB floor
	})
	want := shardShare(c.config(0).Engine, shards).WAL.SegmentBytes
	if want != 8<<20 {
		t.Fatalf("the share is %d, want 8 MiB", want)
	}
	for i := range shards {
		segs, err := filepath.Glob(filepath.Join(shardDir(c.dirs[0], i), "wal", "*.wal"))
		if err != nil || len(segs) == 0 {
			t.Fatalf("shard %d: no segment (%v)", i, err)
		}
		for _, p := range segs {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Size() != want {
				t.Errorf("shard %d: segment %s of %d bytes, want %d", i, filepath.Base(p), fi.Size(), want)
			}
		}
	}
}
