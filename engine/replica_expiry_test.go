package engine

import (
	"fmt"
	"testing"
	"time"
)

// shortQueue creates a queue whose messages expire after MinRetention on
// the hand-driven shard, and sends one message to it.
func (h *handShard) shortQueue() *Queue {
	h.t.Helper()
	cfg := DefaultQueueConfig()
	cfg.Retention = MinRetention
	h.do(func() error { _, err := h.leader.CreateQueue("short", cfg); return err })
	q, err := h.leader.Queue("short")
	if err != nil {
		h.t.Fatal(err)
	}
	h.do(func() error { _, err := q.Send([]SendEntry{{Body: []byte("ages out")}}, nil); return err })
	return q
}

// count returns how many messages broker b's queue name holds live.
func count(t *testing.T, b *Broker, name string) int64 {
	t.Helper()
	q, err := b.Queue(name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := q.Attributes()
	if err != nil {
		t.Fatal(err)
	}
	return info.Active + info.Inactive + info.Delayed
}

// takeProps returns and forgets the proposals broker b made to its
// handReplica.
func takeProps(t *testing.T, b *Broker) [][]byte {
	t.Helper()
	rep := b.store.(*replStore).rep.(*handReplica)
	rep.mu.Lock()
	defer rep.mu.Unlock()
	props := rep.props
	rep.props = nil
	return props
}

// expiresIn counts the expire records of a proposal.
func expiresIn(t *testing.T, prop []byte) int {
	t.Helper()
	n := 0
	if err := decodeRecords(prop[8:], func(typ uint8, _ []byte) error {
		if typ != recExpire {
			return fmt.Errorf("a record of type %d", typ)
		}
		n++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// leadsProposingNothing makes b lead in term and checks that it proposes
// nothing (what, if it does), then makes it follow again.
func leadsProposingNothing(t *testing.T, b *Broker, term uint64, what string) {
	t.Helper()
	if err := b.SetLeader(true, term); err != nil {
		t.Fatal(err)
	}
	if props := takeProps(t, b); len(props) != 0 {
		t.Fatalf("%s: %d entries", what, len(props))
	}
	if err := b.SetLeader(false, 0); err != nil {
		t.Fatal(err)
	}
}

func unloggedOf(b *Broker) int {
	r := b.store.(*replStore)
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.unlogged)
}

// TestReplicaYieldingLeaderLeavesExpiryToTheNext (replica_expiry.go,
// invariants 1-3): a leader handing its lead over does not propose the
// expiries its timer makes, so it stays Settled and never diverges while
// messages age out (the hand-over then waited out settleMax, and the old
// leader rebuilt its broker); the next leader proposes the expiry it made
// as a follower (by its timer, or by its recovery at a restart), once; and
// the log, so every index, then holds it: a restart finds nothing left
// to expire.
func TestReplicaYieldingLeaderLeavesExpiryToTheNext(t *testing.T) {
	for _, how := range []string{"timer", "restart"} {
		t.Run(how, func(t *testing.T) {
			h, _ := newHandShard(t)
			h.shortQueue()
			if err := h.leader.Yield(true); err != nil {
				t.Fatal(err)
			}
			h.clk.Advance(MinRetention + time.Second)
			if n := count(t, h.leader, "short"); n != 0 {
				t.Fatalf("the yielding leader holds %d messages past their retention", n)
			}
			if props := takeProps(t, h.leader); len(props) != 0 {
				t.Fatalf("the yielding leader proposed %d entries for its expiry", len(props))
			}
			if !h.leader.Settled() || h.leader.Diverged() {
				t.Fatalf("yielding leader with an expiry: settled %v (want true), diverged %v (want false)", h.leader.Settled(), h.leader.Diverged())
			}
			if how == "restart" {
				h.restartFollower()
				if got := h.follower.Recovery().Expired; got != 1 {
					t.Fatalf("the follower's recovery expired %d messages, want 1", got)
				}
			}
			if n := count(t, h.follower, "short"); n != 0 {
				t.Fatalf("the follower holds %d messages past their retention", n)
			}

			// The hand-over: the follower leads and logs the expiry.
			if err := h.leader.SetLeader(false, 0); err != nil {
				t.Fatal(err)
			}
			if err := h.follower.SetLeader(true, 2); err != nil {
				t.Fatal(err)
			}
			props := takeProps(t, h.follower)
			if len(props) != 1 || expiresIn(t, props[0]) != 1 {
				t.Fatalf("the new leader proposed %d entries, want 1 with one expiry", len(props))
			}
			ents := []ReplicaEntry{{Index: h.next, Term: 1, Kind: EntryRecords, Data: props[0]}}
			h.next++
			for _, b := range []*Broker{h.follower, h.leader} {
				if err := b.PersistEntries(ents); err != nil {
					t.Fatal(err)
				}
				if err := b.ApplyCommitted(ents); err != nil {
					t.Fatal(err)
				}
			}
			if a, b := unloggedOf(h.leader), unloggedOf(h.follower); a != 0 || b != 0 {
				t.Fatalf("expiries still remembered once logged: old leader %d, new leader %d", a, b)
			}
			if err := h.follower.SetLeader(false, 0); err != nil {
				t.Fatal(err)
			}
			leadsProposingNothing(t, h.follower, 3, "an expiry logged already was proposed again")
			h.restartFollower()
			if got := h.follower.Recovery().Expired; got != 0 {
				t.Fatalf("a restart found %d expired messages the log never expired, want 0", got)
			}
		})
	}
}

// TestReplicaFollowerForgetsExpiryTheLeaderLogged (replica_expiry.go,
// invariant 1): a follower that expired a message by its own timer
// forgets it once the leader's expiry is applied, and proposes nothing
// when it leads; the yielding leader that leads on logs its own.
func TestReplicaFollowerForgetsExpiryTheLeaderLogged(t *testing.T) {
	h, _ := newHandShard(t)
	h.shortQueue()
	h.clk.Advance(MinRetention + time.Second)
	if n := unloggedOf(h.follower); n != 1 {
		t.Fatalf("the follower remembers %d expiries, want 1", n)
	}
	h.pump() // the leader's expiry
	if n := unloggedOf(h.follower); n != 0 {
		t.Fatalf("the follower remembers %d expiries after applying the leader's, want 0", n)
	}
	leadsProposingNothing(t, h.follower, 2, "the follower, leading, proposed an expiry logged already")

	// A yield that ends with this leader leading on: it logs its expiry.
	q, err := h.leader.Queue("short")
	if err != nil {
		t.Fatal(err)
	}
	h.do(func() error { _, err := q.Send([]SendEntry{{Body: []byte("again")}}, nil); return err })
	if err := h.leader.Yield(true); err != nil {
		t.Fatal(err)
	}
	h.clk.Advance(MinRetention + time.Second)
	if props := takeProps(t, h.leader); len(props) != 0 {
		t.Fatalf("the yielding leader proposed %d entries", len(props))
	}
	if err := h.leader.Yield(false); err != nil {
		t.Fatal(err)
	}
	props := takeProps(t, h.leader)
	if len(props) != 1 || expiresIn(t, props[0]) != 1 {
		t.Fatalf("the leader leading on proposed %d entries, want 1 with one expiry", len(props))
	}
}

// TestReplicaFailedExpiryNeedsNoRebuild (replica_expiry.go, invariant 3):
// a leader that steps down with an expiry-only proposal in flight has not
// diverged (every replica makes that expiry), so it needs no rebuild; it
// remembers the expiry and logs it when it leads again.
func TestReplicaFailedExpiryNeedsNoRebuild(t *testing.T) {
	h, _ := newHandShard(t)
	h.shortQueue()
	h.clk.Advance(MinRetention + time.Second)
	if props := takeProps(t, h.leader); len(props) != 1 || expiresIn(t, props[0]) != 1 {
		t.Fatalf("the leader proposed %d entries, want 1 with its expiry", len(props))
	}
	if err := h.leader.SetLeader(false, 0); err != nil { // the proposal fails
		t.Fatal(err)
	}
	if h.leader.Diverged() {
		t.Fatal("a failed expiry made the broker diverge")
	}
	if n := unloggedOf(h.leader); n != 1 {
		t.Fatalf("the old leader remembers %d expiries, want 1", n)
	}
	if err := h.leader.SetLeader(true, 2); err != nil {
		t.Fatal(err)
	}
	if props := takeProps(t, h.leader); len(props) != 1 || expiresIn(t, props[0]) != 1 {
		t.Fatalf("leading again, it proposed %d entries, want 1 with the expiry", len(props))
	}
}
