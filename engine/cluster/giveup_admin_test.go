package cluster

import (
	"errors"
	"fmt"
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
	// A create the leader proposes waits for node wi, holding adminMu.
	c, li, wi, other, pending := proposedWhileASnapshotWaits(t, func(b *engine.Broker) error {
		_, err := b.CreateQueue("q2", engine.DefaultQueueConfig())
		return err
	})

	dump := func() string {
		buf := make([]byte, 1<<20)
		return string(buf[:runtime.Stack(buf, true)])
	}
	sendUntilOneCommits(t, c, li, fmt.Sprintf("with node %d down, node %d waiting for its snapshot and a queue's create in flight", other+1, wi+1), nil, dump)
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
