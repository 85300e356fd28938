package cluster

// The shard count is fixed when a cluster is created (queues are placed by
// a hash modulo it): a data directory refuses another count, and a member
// that runs with another count than the others is found out and said so.
// The node id is fixed for a directory the same way (checkNodeID).

import (
	"fmt"
	"os"
	"time"
)

// checkShardCount refuses a data directory made with another shard count:
// queues are placed by a hash modulo the count.
func checkShardCount(dir string, shards int) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return checkFixed(dir+"/shards.count", fmt.Sprint(shards), func(was string) error {
		return fmt.Errorf("cluster: %s was made for %s shards, not %d (the shard count is fixed when a cluster is created)", dir, was, shards)
	})
}

// checkNodeID refuses a data directory made by another --node-id. Its
// shards' logs hold that member's votes and entries, and its member book
// its view: started as node 7, node 3's directory ran unhealthy for good
// (no member has 7 as a voter), wrote 7 into its book at node 3's Raft
// address, and node 3, started right again, listed that 7 as a member
// with no API address (members audit, 2026-12-07). A directory of a
// version before this check has no node.id: its next start writes it.
func checkNodeID(dir string, id uint64) error {
	return checkFixed(dir+"/node.id", fmt.Sprint(id), func(was string) error {
		return fmt.Errorf("cluster: %s is node %s's data directory, not node %d's (--node-id is fixed for a data directory: start it with its own id, or on an empty directory as a new node)", dir, was, id)
	})
}

// checkFixed writes value to the file at path if it has none (absent, or
// empty: a file an older build wrote without a sync can be so after a
// power loss), and otherwise returns refuse(what it holds) unless that is
// value. It is written synced (writeSynced), so a power loss after the
// start leaves it whole.
func checkFixed(path, value string, refuse func(was string) error) error {
	b, err := os.ReadFile(path)
	switch {
	case os.IsNotExist(err) || err == nil && len(b) == 0:
		return writeSynced(path, value)
	case err != nil:
		return err
	case string(b) != value:
		return refuse(string(b))
	}
	return nil
}

// shardCountDiffers: member spoke of shard (a Raft message for a shard
// this node does not have), or asked with another count (count > 0). Its
// --shards differs from this node's: a node started on an empty directory
// with another --shards than the cluster's took part only in the shards
// both have, answered /healthz 200, and the others ran one voter short
// with no word of it (survive audit, 2026-12-07). Logged (at most once a
// second) on either side; on the node that lacks a shard whose leader
// writes to it, Health answers it for otherCountHealth.
func (n *Node) shardCountDiffers(member uint64, count, shard int, unhealthy bool) {
	var err error
	if count > 0 {
		err = fmt.Errorf("cluster: member %d runs with %d shards, this node with %d: --shards differs between the members (it is fixed when the cluster is created; start the node that differs on an empty directory with the cluster's --shards)", member, count, len(n.shards))
	} else {
		err = fmt.Errorf("cluster: member %d replicates shard %d, but this node has %d shards: --shards differs between the members (it is fixed when the cluster is created; start the node that differs on an empty directory with the cluster's --shards)", member, shard, len(n.shards))
	}
	now := time.Now().UnixNano()
	if unhealthy {
		n.otherCount.Store(&err)
		n.otherCountSeen.Store(now)
	}
	if last := n.otherCountAt.Load(); now-last >= int64(time.Second) && n.otherCountAt.CompareAndSwap(last, now) {
		n.log.Error("a member's shard count differs from this node's", "err", err)
	}
}

// otherCountHealth: how long after a member last showed another shard
// count Health answers so (a member that differs keeps showing it: the
// leaders of the shards it lacks send it heartbeats).
const otherCountHealth = 10 * time.Second
