package cluster

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
)

// TestClusterSnapshotIsSentWithAnAdminChangeInFlight is
// TestClusterSnapshotForTheOnlyOtherMemberIsSent with a queue's create in
// flight instead of a send. The create holds Broker.adminMu until its
// proposal commits, which needs the member waiting for its snapshot; the
// export took adminMu (for the next topic and subscription ids) before it
// reached its fence, so it waited for the create instead of giving it up
// (ErrExportUnsettled, giveUpIfAsked): the create, every later change of
// the shard and the snapshot all waited for the stopped member.
func TestClusterSnapshotIsSentWithAnAdminChangeInFlight(t *testing.T) {
	c := startTestCluster(&testCluster{t: t, nodes: make([]*Node, 3), shards: 1, infoLogs: true})
	wi, release := c.holdSnapshot()
	li, _ := c.leader("q")
	other := 3 - li - wi
	c.stop(other)

	// A create the leader proposes now waits for node wi, holding adminMu.
	pending := make(chan error, 1)
	go func() {
		_, b := c.leader("q")
		_, err := b.CreateQueue("q2", engine.DefaultQueueConfig())
		pending <- err
	}()
	time.Sleep(100 * time.Millisecond) // proposed (its outcome is checked below, either way)
	release()

	dump := func() string {
		buf := make([]byte, 1<<20)
		return string(buf[:runtime.Stack(buf, true)])
	}
	// Each attempt bounded: a send the shard never commits never returns.
	for deadline := time.Now().Add(60 * time.Second); ; {
		res := make(chan error, 1)
		go func() {
			b := c.nodes[li].shards[0].broker()
			if b == nil {
				res <- errors.New("no broker")
				return
			}
			q, err := b.Queue("q")
			if err == nil {
				_, err = q.Send([]engine.SendEntry{{Body: []byte("after")}}, nil)
			}
			res <- err
		}()
		var err error
		select {
		case err = <-res:
		case <-time.After(30 * time.Second):
			t.Fatalf("a send through node %d, with node %d down, node %d waiting for its snapshot and a queue's create in flight, hung for 30 s\n%s", li+1, other+1, wi+1, dump())
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no send through node %d within 60 s, with node %d down and node %d waiting for its snapshot: %v", li+1, other+1, wi+1, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-pending:
		if err != nil && !errors.Is(err, engine.ErrNotLeader) {
			t.Fatalf("the create in flight: %v", err)
		}
		t.Logf("the create in flight: %v; given up %d times", err, c.nodes[li].shards[0].givenUp.Load())
	case <-time.After(30 * time.Second):
		t.Fatalf("the create in flight never returned\n%s", dump())
	}
}
