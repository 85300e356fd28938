package cluster

import (
	"net"
	"sync/atomic"
	"testing"
)

// TestRejoinQuestionCountsAcksOfTheAskersOwnRun: a new member's shards run
// while it asks whether it lost data, so it may acknowledge entries while
// the question is in flight. The asked node counts such an acknowledgement;
// the asker must compare it with its log as it is after the answer, not
// before the question (which replaced members of new clusters:
// TestClusterPowerLoss). A member that really holds less than it
// acknowledged is still replaced, in the shard named.
func TestRejoinQuestionCountsAcksOfTheAskersOwnRun(t *testing.T) {
	for _, tc := range []struct {
		name     string
		acked    uint64 // what the asked node counts for shard 1
		last     uint64 // the asker's last index of shard 1 once it acknowledged
		replaced bool
	}{
		{"an acknowledgement sent during the question", 10, 10, false},
		{"data lost", 10, 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var last atomic.Uint64
			last.Store(2) // the fresh log when the question starts
			lostIn := -1
			tr := &transport{
				acked: func(from uint64, shards int) []uint64 {
					if from != 7 || shards != 2 {
						t.Errorf("asked for %d shards of member %d", shards, from)
					}
					// The asker persisted and acknowledged up to tc.last
					// before this answer: the ack was counted here.
					last.Store(tc.last)
					return []uint64{0, tc.acked}
				},
				rejoin: func(from uint64, lost int) bool { lostIn = lost; return true },
			}
			a, b := net.Pipe()
			done := make(chan struct{})
			go func() {
				defer close(done)
				defer b.Close()
				tr.serveRejoin(7, b)
			}()
			got, err := askRejoinOn(a, 2, func() []uint64 { return []uint64{5, last.Load()} })
			a.Close()
			<-done
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.replaced {
				t.Fatalf("replaced = %v, want %v", got, tc.replaced)
			}
			if want := map[bool]int{true: 1, false: -1}[tc.replaced]; lostIn != want {
				t.Fatalf("replaced for shard %d, want %d", lostIn, want)
			}
		})
	}
}
