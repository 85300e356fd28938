package cluster

// A shard's share of the node's resources.

import (
	"cmp"

	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/index"
	"github.com/smqd/smqd/wal"
)

// shardShare gives one of a node's shards its share of the node's budget
// for the fixed memory of a broker: the log's ring of recent records and
// the index's memtables, allocated per broker whatever it holds. The
// template's values (the defaults when unset: a single broker's) are the
// node's; each shard gets 1/shards of them, above floors that keep the
// largest batch one operation appends (16 messages with 32 KiB of
// properties each: under 600 KiB) well inside the ring and Badger's
// transactions (15 % of a memtable) large. A shard takes about
// 1/shards of the node's traffic, so its share keeps the same time span of
// records. With a single broker's budget for each, 8 shards held 8 x 4 MiB
// of rings and 8 x 10 MB of memtable arenas: the arenas were the largest
// item of a node's heap with 1,000,000 messages backlogged.
func shardShare(o engine.Options, shards int) engine.Options {
	shards = max(shards, 1)
	ring := o.WAL.BufferBytes
	if ring == 0 {
		ring = engine.DefaultLogBufferBytes
	}
	o.WAL.BufferBytes = max(2<<20, ring/shards)
	mem := o.Index.MemTableBytes
	if mem == 0 {
		mem = index.DefaultMemTableBytes
	}
	o.Index.MemTableBytes = max(2<<20, mem/int64(shards))
	// Log segments too: each shard preallocates its current and its next
	// segment, so 8 shards of the single broker's 64 MiB held 1.1 GiB of
	// an empty node's disk. A share, at least 4 MiB (a segment holds many
	// of the largest records) and never above the template's.
	seg := o.WAL.SegmentBytes
	if seg == 0 {
		seg = wal.DefaultOptions().SegmentBytes
	}
	o.WAL.SegmentBytes = min(seg, max(4<<20, seg/int64(shards)/4096*4096))
	// The shards' brokers share the node's disk, and each compares the
	// node's free space with its reserve: the node's reserve is the sum of
	// what each needs (unless one is set, or the guard is off).
	if o.FreeSpaceReserve == 0 {
		o.FreeSpaceReserve = int64(shards) * engine.SizedFreeSpaceReserve(o)
	}
	// Push connections too: the node's bound is the shards' together.
	o.Push.MaxConns = max(1, cmp.Or(max(o.Push.MaxConns, 0), engine.DefaultPushMaxConns)/shards)
	return o
}
