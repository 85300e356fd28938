package cluster

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/smqd/smqd/engine"
)

// sendForID sends body to queue on its leader and returns its MessageId.
func (c *testCluster) sendForID(queue, body string) engine.MessageID {
	c.t.Helper()
	var id engine.MessageID
	c.onLeader(queue, func(b *engine.Broker) error {
		q, err := b.Queue(queue)
		if err != nil {
			return err
		}
		res, err := q.Send([]engine.SendEntry{{Body: []byte(body)}}, nil)
		if err == nil {
			id = res[0].ID
		}
		return err
	})
	return id
}

// moveLead hands shard 0's lead to the next member: a new term.
func (c *testCluster) moveLead() {
	c.t.Helper()
	c.leadOn(0, c.nodes[0].shards[0].lead.Load()%3+1)
}

// A cluster restored from a backup gives no MessageId that the cluster the
// backup was taken of gave after it, over that cluster's later terms: the
// restored shard started one term past the backup's, and its leaders took
// the terms the old cluster's had gone on to (backups2 audit, 2026-12-07:
// one id on both clusters).
func TestClusterRestoreNeverReusesMessageIDs(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	c.onLeaderIdempotent("q", func(b *engine.Broker) error { _, err := b.CreateQueue("q", engine.DefaultQueueConfig()); return err })
	c.sendForID("q", "before")
	var backup bytes.Buffer
	if _, err := c.nodes[0].Backup(&backup, BackupOptions{}); err != nil {
		t.Fatal(err)
	}
	old := map[engine.MessageID]string{}
	for k := range 4 {
		c.moveLead()
		body := fmt.Sprintf("old-%d", k)
		old[c.sendForID("q", body)] = body
	}
	c.stopAll()

	n := restoredCluster(t, backup.Bytes(), 1, nil)
	for k := range 4 {
		body := fmt.Sprintf("restored-%d", k)
		if id := n.sendForID("q", body); old[id] != "" {
			t.Errorf("the restored cluster gave %q MessageId %s, which the old one gave %q after the backup", body, id, old[id])
		}
		n.moveLead()
	}
}

// Two clusters restored from one backup (the first one lost, and the
// backup restored again) give different MessageIds: each restore put a
// shard's term a fixed RestoreIDJump past the backup's, so the second
// cluster's leaders took the first's terms, and their ids (backups audit,
// 2026-12-07).
func TestClusterRestoreTwiceNeverReusesMessageIDs(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	c.onLeader("q", func(b *engine.Broker) error { _, err := b.CreateQueue("q", engine.DefaultQueueConfig()); return err })
	c.sendForID("q", "before")
	var backup bytes.Buffer
	if _, err := c.nodes[0].Backup(&backup, BackupOptions{}); err != nil {
		t.Fatal(err)
	}
	c.stopAll()

	first := map[engine.MessageID]string{}
	n := restoredCluster(t, backup.Bytes(), 1, nil)
	for k := range 3 {
		body := fmt.Sprintf("first-%d", k)
		first[n.sendForID("q", body)] = body
		n.moveLead()
	}
	n.stopAll()
	n = restoredCluster(t, backup.Bytes(), 1, nil)
	for k := range 3 {
		body := fmt.Sprintf("second-%d", k)
		if id := n.sendForID("q", body); first[id] != "" {
			t.Errorf("the second restored cluster gave %q MessageId %s, which the first gave %q", body, id, first[id])
		}
		n.moveLead()
	}
}
