package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
)

// Dead-letter audit (2026-12-07): a source whose dead-letter queue is on
// a shard that has no leader for a while (its leader cut off, as behind a
// dropping firewall, and a slow election: 250 ticks of 20 ms; a stopped
// node is replaced within ~100 ms here, its connections close). One
// receive with no wait, on the source's leader, with 160 messages due for
// the move ahead of one fresh message: the docs bound the receive's wait
// for a hop by 5 s and say the message behind is returned.
func TestClusterDeadLetterShardWithoutLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("slow elections on purpose; engine TestDeadLetterElsewhereNoLeaderOneReceive is the short one")
	}
	c := startTestCluster(&testCluster{t: t, nodes: make([]*Node, 3), shards: 2, electionTicks: 250})
	const src = "nl-src"
	dlq := c.sourceWithRemoteDeadLetters(src, "nl-dlq-")
	if dlq == "" {
		t.Skip("both shards led by one node")
	}
	_, b := c.leader(src)
	q, err := b.Queue(src)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 160; i += engine.MaxBatch {
		var es []engine.SendEntry
		for j := i; j < i+engine.MaxBatch; j++ {
			es = append(es, engine.SendEntry{Body: fmt.Appendf(nil, "poison-%d", j)})
		}
		if _, err := q.Send(es, nil); err != nil {
			t.Fatal(err)
		}
	}
	for got := 0; got < 160; {
		ms, err := q.Receive(context.Background(), engine.ReceiveOptions{Max: engine.MaxBatch}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got += len(ms)
	}
	eventually(t, "all visible again", func() error {
		if info, _ := q.Attributes(); info.Active != 160 {
			return fmt.Errorf("%+v", info)
		}
		return nil
	})
	c.onLeader(src, func(b *engine.Broker) error {
		q, err := b.Queue(src)
		if err == nil {
			_, err = q.Send([]engine.SendEntry{{Body: []byte("good")}}, nil)
		}
		return err
	})
	li, _ := c.leader(dlq)
	si, b := c.leader(src)
	if si == li {
		t.Skip("the leads moved onto one node")
	}
	q, _ = b.Queue(src)
	t.Logf("source led by node %d, cutting off node %d, the dead-letter queue's leader", si+1, li+1)
	heal := isolate(t, uint64(li+1))
	defer heal()
	stored0 := c.nodes[si].Status().DeadLetterHops
	failed0 := c.nodes[si].Status().DeadLetterHopsFailed
	start := time.Now()
	ms, err := q.Receive(context.Background(), engine.ReceiveOptions{Max: 1, HasWait: true}, nil)
	took := time.Since(start)
	if errors.Is(err, engine.ErrNotLeader) || errors.Is(err, engine.ErrRetryOnLeader) {
		// The source's lead moved during the hop (the balancer hands
		// leads to their preferred nodes): nothing to judge here.
		t.Skipf("the source's shard changed leaders during the receive: %v", err)
	}
	failed := c.nodes[si].Status().DeadLetterHopsFailed - failed0
	t.Logf("one receive (wait 0): %d messages, err %v, %d failed hops, took %v", len(ms), err, failed, took.Round(100*time.Millisecond))
	for _, m := range ms {
		t.Logf("received %s dequeue %d; stored hops %d", m.Body, m.DequeueCount, c.nodes[si].Status().DeadLetterHops-stored0)
	}
	if failed > 1 {
		t.Errorf("one receive with no wait made %d failed hops to the shard without a leader (each waits up to 5 s): it took %v", failed, took.Round(100*time.Millisecond))
	}
	if len(ms) != 1 || string(ms[0].Body) != "good" {
		t.Errorf("the Active message behind the hidden dead letters was not returned: %d messages, %v", len(ms), err)
	}
}
