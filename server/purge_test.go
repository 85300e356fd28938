package server

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

type xPurge struct {
	QueueName      string
	PurgedMessages int
}

// TestPurgeQueue: DELETE /queues/{q}/messages?purge=true deletes every
// message of the queue (active, received, delayed), answers how many, is
// audited, and needs smqd:PurgeQueue (mns:* is not enough); a malformed
// one changes nothing.
func TestPurgeQueue(t *testing.T) {
	var logs lockedBuffer
	env := startEnv(t, envConfig{serverOpts: func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}})
	c := env.client()
	defer c.close()
	c.mustCreate("p")
	c.mustCreate("other")
	for i := range 10 {
		c.mustSend("p", fmt.Sprintf("m%d", i), "")
	}
	c.mustSend("p", "later", "<DelaySeconds>600</DelaySeconds>")
	c.mustSend("other", "stays", "")
	got := c.mustReceive("p")

	// Refused, and nothing changes: a handle or a body with purge.
	wantError(t, c.del("/queues/p/messages?purge=true&ReceiptHandle="+got.ReceiptHandle, ""), 400, "InvalidArgument")
	wantError(t, c.del("/queues/p/messages?purge=true", `<ReceiptHandles><ReceiptHandle>`+got.ReceiptHandle+`</ReceiptHandle></ReceiptHandles>`), 400, "InvalidArgument")
	wantError(t, c.del("/queues/missing/messages?purge=true", ""), 404, "QueueNotExist")
	if q := authzQueue(t, c, "p"); q.ActiveMessages != 9 || q.InactiveMessages != 1 || q.DelayMessages != 1 {
		t.Fatalf("after the refused purges: %+v", q)
	}

	r := c.del("/queues/p/messages?purge=true", "")
	wantStatus(t, r, 200)
	var x xPurge
	decode(t, r, &x)
	if x.QueueName != "p" || x.PurgedMessages != 11 {
		t.Errorf("answer: %+v", x)
	}
	if q := authzQueue(t, c, "p"); q.ActiveMessages+q.InactiveMessages+q.DelayMessages != 0 {
		t.Errorf("after the purge: %+v", q)
	}
	if q := authzQueue(t, c, "other"); q.ActiveMessages != 1 {
		t.Errorf("the other queue: %+v", q)
	}
	wantError(t, c.del("/queues/p/messages?ReceiptHandle="+got.ReceiptHandle, ""), 404, "MessageNotExist")
	// purge=false is a batch delete, as without it.
	wantError(t, c.del("/queues/p/messages?purge=false", ""), 400, "MissingReceiptHandle")
	// Audited, the refused ones too (two creates, three refusals, the purge).
	if lines := logs.lines("audit"); len(lines) != 6 || !strings.Contains(lines[5], "op=PurgeQueue resource=/queues/p/messages status=200") ||
		!strings.Contains(lines[4], "op=PurgeQueue resource=/queues/missing/messages status=404") {
		t.Errorf("audit lines:\n%s", strings.Join(lines, "\n"))
	}

	// Policies: mns:* does not purge; smqd:PurgeQueue on the queue does.
	c.mustSend("p", "again", "")
	if err := env.srv.SetPolicies(authzPolicies(t, authzDoc(`{"Effect": "Allow", "Action": "mns:*", "Resource": "*"}`))); err != nil {
		t.Fatal(err)
	}
	other := env.client()
	other.id, other.secret = "other", "othersecret"
	defer other.close()
	authzDenied(t, other.del("/queues/p/messages?purge=true", ""))
	if err := env.srv.SetPolicies(authzPolicies(t, authzDoc(`{"Effect": "Allow", "Action": "smqd:PurgeQueue", "Resource": "acs:mns:*:*:/queues/p/messages"}`))); err != nil {
		t.Fatal(err)
	}
	authzDenied(t, other.del("/queues/other/messages?purge=true", ""))
	r = other.del("/queues/p/messages?purge=true", "")
	wantStatus(t, r, 200)
	if decode(t, r, &x); x.PurgedMessages != 1 {
		t.Errorf("purge under smqd:PurgeQueue: %+v", x)
	}
}

// In a cluster a purge sent to any node runs on the queue's leader, and
// every replica ends empty.
func TestClusterPurgeQueue(t *testing.T) {
	c := startCluster(t, 3, 2)
	c.ready()
	lead := c.leaderOf("pq")
	via := c.envs[(lead+1)%3].client()
	defer via.close()
	wantStatus(t, via.put("/queues/pq", ""), 201)
	for i := range 20 {
		via.mustSend("pq", fmt.Sprintf("m%d", i), "")
	}
	r := via.del("/queues/pq/messages?purge=true", "")
	wantStatus(t, r, 200)
	var x xPurge
	if decode(t, r, &x); x.PurgedMessages != 20 {
		t.Fatalf("answer: %+v", x)
	}
	for i, n := range c.nodes {
		b := n.Brokers()[n.ShardOf("pq")]
		clusterEventually(t, fmt.Sprintf("node %d's replica", i+1), func() error {
			q, err := b.Queue("pq")
			if err != nil {
				return err
			}
			if info, _ := q.Attributes(); info.Active+info.Inactive+info.Delayed != 0 {
				return fmt.Errorf("%+v", info)
			}
			return nil
		})
	}
}
