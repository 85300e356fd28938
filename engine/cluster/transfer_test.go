package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
)

// TestClusterSendDuringAFailedLeaderTransfer (shard.go run): while a leader
// hands the lead over (balance.go), Raft drops proposals. When the
// transfer then fails (here: its target is down, so it times out after an
// election timeout), the leader goes on leading. A send proposed during
// the transfer used to be dropped and its proposal stayed pending for
// good: the send never returned, its message lived in the leader's state
// only, and the shard's checkpoints stopped at it. Now proposals are held
// while a transfer runs, and the send commits once it has failed.
func TestClusterSendDuringAFailedLeaderTransfer(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	li, b := c.leader("q")
	if _, err := b.CreateQueue("q", engine.DefaultQueueConfig()); err != nil {
		t.Fatal(err)
	}
	q, err := b.Queue("q")
	if err != nil {
		t.Fatal(err)
	}
	target := (li + 1) % 3
	c.stop(target)
	s := c.nodes[li].shards[0]
	sent := make(chan error, 1)
	started := make(chan struct{})
	s.do(func() {
		s.rn.TransferLeader(uint64(target + 1))
		if s.rn.BasicStatus().LeadTransferee != uint64(target+1) {
			t.Error("no transfer under way")
		}
		go func() {
			_, err := q.Send([]engine.SendEntry{{Body: []byte("during the transfer")}}, nil)
			sent <- err
		}()
		// The send's proposal is queued for the loop's next round, which
		// finds the transfer still under way (it lasts an election timeout).
		for i := 0; i < 1000; i++ {
			s.pmu.Lock()
			n := len(s.props)
			s.pmu.Unlock()
			if n > 0 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		close(started)
	})
	<-started
	select {
	case err := <-sent:
		if err != nil {
			t.Fatalf("send during a failed transfer: %v", err)
		}
	case <-time.After(30 * time.Second):
		// A liveness bound, not a timing assertion: without the fix the
		// send never returns.
		t.Fatal("the send proposed during a failed leader transfer never returned")
	}
	other := 3 - li - target
	eventually(t, "the other follower has the message", func() error {
		info, err := c.counts(other, "q")
		if err != nil {
			return err
		}
		if info.Active != 1 {
			return fmt.Errorf("active %d, want 1", info.Active)
		}
		return nil
	})
}
