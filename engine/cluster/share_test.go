package cluster

import (
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
}
