package engine

import (
	"context"
	"testing"
)

// After one failed hop (hopFailed), the same receive went on hiding every
// message due for the move, 16 a round for up to maxMoveRounds rounds, each
// hide a state record (in a cluster a Raft proposal): one receive with
// waitseconds 0 on a queue whose dead-letter queue's shard has no leader
// hid a 4,000-message backlog, and did so again each heldHide (5 s) while
// the shard had no leader, for every consumer (review X, 2026-12-07). It
// hides the failed hop's batch and at most hideRoundsAfterFailedHop more.
func TestFailedHopHidesABoundedPart(t *testing.T) {
	r := &downRouter{}
	src := poisonedSource(t, r, 4000)
	before, _ := src.Attributes()
	ms, err := src.Receive(context.Background(), ReceiveOptions{Max: 1, HasWait: true}, nil)
	after, _ := src.Attributes()
	r.mu.Lock()
	hops := r.hops
	r.mu.Unlock()
	t.Logf("one receive: %d messages, err %v, %d hops; Active %d -> %d, Inactive %d -> %d", len(ms), err, hops, before.Active, after.Active, before.Inactive, after.Inactive)
	if hidden := after.Inactive; hidden > (16+1)*MaxBatch { // the failed hop's batch and 16 rounds (a literal: the test must fail if the bound grows)
		t.Errorf("one receive with no message to return hid %d messages (a state record each), after %d failed hop(s)", hidden, hops)
	}
}
