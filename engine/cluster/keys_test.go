package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
)

// The cluster key is rotated with no downtime, by three rolling restarts
// (keys.go): every node accepts the next key; every node proves the next
// key and accepts the old one; the old one is dropped. After each restart
// the restarted node reaches a leader of every shard and the queue takes a
// send. A receipt handle issued under the old key deletes its message
// while the old key is still accepted, and is refused once it is not. At
// the end, a process holding only the old key is refused. With the
// accepted keys ignored, the node restarted first in the second round
// cannot reach its peers (the test fails there), and the handle issued
// under the old key is refused after that round.
func TestClusterKeyRotation(t *testing.T) {
	old, next := testKey, []byte("the-next-cluster-key-0123456789abc")
	type keyPair struct{ own, accepted []byte }
	keys := []keyPair{{old, nil}, {old, nil}, {old, nil}}
	c := &testCluster{t: t, nodes: make([]*Node, 3), shards: 2, cfgTweak: func(i int, cfg *Config) {
		cfg.Key, cfg.AcceptKeys = keys[i].own, nil
		if keys[i].accepted != nil {
			cfg.AcceptKeys = [][]byte{keys[i].accepted}
		}
	}}
	startTestCluster(c)
	c.preferredLeaders() // no balancer hand-over under the create and the sends

	_, b := c.leader("rot")
	qc := engine.DefaultQueueConfig()
	qc.VisibilityTimeout = time.Hour
	if _, err := b.CreateQueue("rot", qc); err != nil {
		t.Fatal(err)
	}
	send := func(body string) {
		t.Helper()
		_, b := c.leader("rot")
		q, err := b.Queue("rot")
		if err == nil {
			_, err = q.Send([]engine.SendEntry{{Body: []byte(body)}}, nil)
		}
		if err != nil {
			t.Fatalf("send %s: %v", body, err)
		}
	}
	send("a")
	send("b")
	_, b = c.leader("rot")
	q, _ := b.Queue("rot")
	ms, err := q.Receive(context.Background(), engine.ReceiveOptions{Max: 2}, nil)
	if err != nil || len(ms) != 2 {
		t.Fatalf("receive: %d messages, %v", len(ms), err)
	}
	// The receive is committed on every node before any restart (a
	// receive a leader answered and then lost in its stop leaves the
	// message visible, and its handle stale: at least once).
	c.converged("rot", 0, 2)
	deleteOne := func(h engine.ReceiptHandle) error {
		t.Helper()
		_, b := c.leader("rot")
		q, err := b.Queue("rot")
		if err != nil {
			t.Fatal(err)
		}
		errs := make([]error, 1)
		if _, err := q.Delete([]engine.ReceiptHandle{h}, errs); err != nil {
			t.Fatal(err)
		}
		return errs[0]
	}

	round := func(name string, k keyPair) {
		for i := range c.nodes {
			c.stop(i)
			keys[i] = k
			c.start(i)
			eventually(t, fmt.Sprintf("%s: node %d restarted reaches every shard", name, i+1), c.nodes[i].Health)
			send(fmt.Sprintf("%s-%d", name, i+1))
		}
	}
	round("accept the next key", keyPair{old, next})
	round("prove the next key", keyPair{next, old})
	if err := deleteOne(ms[0].Handle); err != nil {
		t.Fatalf("a handle of the old key, with the old key accepted: %v", err)
	}
	round("drop the old key", keyPair{next, nil})
	if err := deleteOne(ms[1].Handle); !errors.Is(err, engine.ErrReceiptHandleError) {
		t.Fatalf("a handle of the old key once it is dropped: %v, want ErrReceiptHandleError", err)
	}
	for i := range c.nodes {
		refused := c.nodes[i].refused.Load()
		if got, err := intrude(c.addrs[uint64(i+1)], 9, kindRaft, old, nil); err == nil && len(got) > 0 {
			t.Fatalf("node %d answered a process with the old key: %q", i+1, got)
		}
		eventually(t, fmt.Sprintf("node %d refuses the old key", i+1), func() error {
			if c.nodes[i].refused.Load() == refused {
				return errors.New("not refused")
			}
			return nil
		})
	}
	c.converged("rot", 9, 1) // 9 sends in the rounds; of a and b, one deleted
}
