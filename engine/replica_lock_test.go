package engine

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

// TestReplicaPersistHoldsNoMuForStripeLock: a follower's PersistEntries
// looks up its body of a received state record under the message's stripe
// lock, and must not hold replStore.mu while it waits for that lock: a
// stripe that flushes records (a follower's timer expiring a message) takes
// mu under its stripe lock, and the two would deadlock (docs/locking.md).
// The test holds the stripe lock, lets PersistEntries run up to the lookup
// (it names the message first, invariant 6), and then takes mu as the
// stripe's flush would.
func TestReplicaPersistHoldsNoMuForStripeLock(t *testing.T) {
	h := &handShard{t: t, rep: &handReplica{kick: make(chan struct{}, 1)}, clk: NewFakeClock(t0), next: 1}
	h.leader = h.open(t.TempDir(), h.rep)
	h.fdir = t.TempDir()
	h.follower = h.open(h.fdir, &handReplica{kick: make(chan struct{}, 1)})
	defer func() { h.leader.Close(); h.follower.Close() }()
	if err := h.leader.SetLeader(true, 1); err != nil {
		t.Fatal(err)
	}
	h.do(func() error { _, err := h.leader.CreateQueue("q", DefaultQueueConfig()); return err })
	q, err := h.leader.Queue("q")
	if err != nil {
		t.Fatal(err)
	}
	h.do(func() error { _, err := q.Send([]SendEntry{{Body: []byte("m")}}, nil); return err })

	// The leader receives the message: its state record is proposed; the
	// leader commits it, the follower gets it below.
	errc := make(chan error, 1)
	go func() {
		_, err := q.Receive(context.Background(), ReceiveOptions{Max: 1}, nil)
		errc <- err
	}()
	var props [][]byte
	for len(props) == 0 {
		<-h.rep.kick
		h.rep.mu.Lock()
		props, h.rep.props = h.rep.props, nil
		h.rep.mu.Unlock()
	}
	var ents []ReplicaEntry
	for _, p := range props {
		ents = append(ents, ReplicaEntry{Index: h.next, Term: 1, Kind: EntryRecords, Data: p})
		h.next++
	}
	if err := h.leader.PersistEntries(ents); err != nil {
		t.Fatal(err)
	}
	if err := h.leader.ApplyCommitted(ents); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	var key msgKey
	if err := decodeRecords(ents[0].Data[8:], func(typ uint8, payload []byte) error {
		s, err := decodeSnap(payload)
		if err == nil && typ == recState {
			key = msgKey{s.qid, s.seq}
		}
		return err
	}); err != nil || key.seq == 0 {
		t.Fatalf("no state record in the proposal: %v", err)
	}

	fq, err := h.follower.Queue("q")
	if err != nil {
		t.Fatal(err)
	}
	r := h.follower.store.(*replStore)
	st := &fq.stripes[0] // Stripes: 1
	st.mu.Lock()
	done := make(chan error, 1)
	go func() { done <- h.follower.PersistEntries(ents) }()
	for !r.isNamed(key.qid, key.seq) {
		runtime.Gosched() // PersistEntries is about to look the body up
	}
	// PersistEntries takes mu for a moment after naming the message (it
	// reads the unapplied sends); it must then wait for the stripe lock
	// without it. Held across that wait, mu stays taken until the stripe
	// lock is given back below, so this bounded wait gives up.
	free := r.mu.TryLock()
	for deadline := time.Now().Add(10 * time.Second); !free && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
		free = r.mu.TryLock()
	}
	var flushErr error
	if free {
		r.mu.Unlock()
		// What a stripe's flush does under its lock: refused, not blocked.
		flushErr = r.append([]logRec{{typ: recExpire, head: make([]byte, snapLen)}})
	}
	st.mu.Unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !free {
		t.Fatal("PersistEntries held replStore.mu while it waited for a stripe lock: a stripe's flush takes them the other way round (deadlock)")
	}
	if !errors.Is(flushErr, ErrNotLeader) {
		t.Fatalf("a follower's flush: %v, want ErrNotLeader", flushErr)
	}
	if err := h.follower.ApplyCommitted(ents); err != nil {
		t.Fatal(err)
	}
	info, err := fq.Attributes()
	if err != nil || info.Inactive != 1 {
		t.Fatalf("follower after the receive: %+v %v, want one inactive message", info, err)
	}
}
