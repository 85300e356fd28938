package engine

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"sync"
	"testing"
	"time"
)

// handReplica collects a leader's proposals; the test commits them by hand.
type handReplica struct {
	mu    sync.Mutex
	props [][]byte
	kick  chan struct{}
}

func (h *handReplica) Propose(data []byte) error {
	h.mu.Lock()
	h.props = append(h.props, append([]byte(nil), data...))
	h.mu.Unlock()
	select {
	case h.kick <- struct{}{}:
	default:
	}
	return nil
}

// handShard is a leader and a follower of one shard, driven by hand: every
// proposal becomes the next entry of term 1, persisted on both and applied
// on the leader at once and on the follower unless held.
type handShard struct {
	t        *testing.T
	rep      *handReplica
	leader   *Broker
	follower *Broker
	fdir     string
	clk      *FakeClock
	next     uint64         // the next entry index
	held     []ReplicaEntry // committed, not yet applied on the follower
	hold     bool
	keep     int            // ReplicaKeepEntries (0: the default)
	mod      func(*Options) // if set, changes the options of each broker opened
}

func (h *handShard) open(dir string, rep Replica) *Broker {
	h.t.Helper()
	o := Options{Dir: dir, Replica: rep, FreeSpaceReserve: -1, Stripes: 1, Clock: h.clk, Logger: testLogger(h.t)}
	o.WAL.SegmentBytes = 64 << 10
	o.ReplicaKeepEntries = h.keep
	o.CheckpointInterval, o.CheckpointRecords, o.CheckpointBytes = time.Hour, 1<<40, 1<<40
	if h.mod != nil {
		h.mod(&o)
	}
	b, err := Open(o)
	if err != nil {
		h.t.Fatal(err)
	}
	return b
}

// pump commits every proposal made so far.
func (h *handShard) pump() {
	h.t.Helper()
	h.rep.mu.Lock()
	props := h.rep.props
	h.rep.props = nil
	h.rep.mu.Unlock()
	for _, p := range props {
		ents := []ReplicaEntry{{Index: h.next, Term: 1, Kind: EntryRecords, Data: p}}
		h.next++
		for _, b := range []*Broker{h.leader, h.follower} {
			if err := b.PersistEntries(ents); err != nil {
				h.t.Fatal(err)
			}
		}
		if err := h.leader.ApplyCommitted(ents); err != nil {
			h.t.Fatal(err)
		}
		if h.hold {
			h.held = append(h.held, ents...)
		} else if err := h.follower.ApplyCommitted(ents); err != nil {
			h.t.Fatal(err)
		}
	}
}

// do runs a leader's operation, committing its proposals until it returns.
func (h *handShard) do(op func() error) {
	h.t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- op() }()
	for {
		select {
		case err := <-errc:
			h.pump()
			if err != nil {
				h.t.Fatal(err)
			}
			return
		case <-h.rep.kick:
			h.pump()
		}
	}
}

// receiveOne receives one message on the leader, committing the receive.
func (h *handShard) receiveOne(q *Queue) Message {
	h.t.Helper()
	var msgs []Message
	h.do(func() (err error) {
		msgs, err = q.Receive(context.Background(), ReceiveOptions{Max: 1}, nil)
		return err
	})
	if len(msgs) != 1 {
		h.t.Fatalf("received %d messages, want 1", len(msgs))
	}
	return msgs[0]
}

// deleteOne deletes a message on the leader by its handle, committing the
// delete.
func (h *handShard) deleteOne(q *Queue, hd ReceiptHandle) {
	h.t.Helper()
	h.do(func() error { return deleteHandle(q, hd) })
}

// deleteHandle deletes one message by its handle: the call's error, or
// the message's.
func deleteHandle(q *Queue, hd ReceiptHandle) error {
	errs := make([]error, 1)
	if _, err := q.Delete([]ReceiptHandle{hd}, errs); err != nil {
		return err
	}
	return errs[0]
}

// restartFollower closes the follower as a crash would (after making its
// log and commit index durable) and opens it again.
func (h *handShard) restartFollower() {
	h.t.Helper()
	if err := h.follower.PersistHardState(ReplicaHardState{Term: 1, Vote: 1, Commit: h.next - 1}); err != nil {
		h.t.Fatal(err)
	}
	if err := h.follower.SyncLog(); err != nil {
		h.t.Fatal(err)
	}
	if err := h.follower.CloseForRebuild(); err != nil {
		h.t.Fatal(err)
	}
	h.follower = h.open(h.fdir, &handReplica{kick: make(chan struct{}, 1)})
}

// TestReplicaCompactionLeavesMessagesItsLogStillChanges (replica.go
// invariant 6): a follower that has persisted the delete of a message but
// not applied it yet must not relocate the message's body. Its relocate
// record would follow the delete in the log and bring the message back at
// the next recovery (an acknowledged delete came back in
// TestClusterPowerLoss, and its slot was claimed twice: "recovered message
// moved to another slot").
func TestReplicaCompactionLeavesMessagesItsLogStillChanges(t *testing.T) {
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
	// The first message stays; the rest are deleted: the first segment is
	// then mostly dead, a relocation candidate.
	keep := bytes.Repeat([]byte("k"), 1000)
	h.do(func() error { _, err := q.Send([]SendEntry{{Body: keep}}, nil); return err })
	for range 150 {
		h.do(func() error { _, err := q.Send([]SendEntry{{Body: bytes.Repeat([]byte("x"), 1000)}}, nil); return err })
	}
	var kept ReceiptHandle
	for n := 0; n < 151; {
		var msgs []Message
		h.do(func() (err error) {
			msgs, err = q.Receive(context.Background(), ReceiveOptions{Max: 10}, nil)
			return err
		})
		n += len(msgs)
		for _, m := range msgs {
			if bytes.Equal(m.Body, keep) {
				kept = m.Handle
				continue
			}
			h.do(func() error {
				_, err := q.Delete([]ReceiptHandle{m.Handle}, make([]error, 1))
				return err
			})
		}
	}
	// A restart gives the follower exact live-byte counts to compact by.
	h.restartFollower()

	// The follower persists the delete of the kept message, and compacts
	// before it applies it.
	h.hold = true
	h.deleteOne(q, kept)
	if _, _, err := h.follower.compactOnce(0); err != nil {
		t.Fatal(err)
	}
	h.hold = false
	if err := h.follower.ApplyCommitted(h.held); err != nil {
		t.Fatal(err)
	}

	h.restartFollower()
	fq, err := h.follower.Queue("q")
	if err != nil {
		t.Fatal(err)
	}
	info, err := fq.Attributes()
	if err != nil {
		t.Fatal(err)
	}
	if n := info.Active + info.Inactive + info.Delayed; n != 0 {
		t.Fatalf("after a restart the follower holds %d messages, want 0: a delete it had applied came back", n)
	}
	if rs := h.follower.Recovery(); rs.Moved != 0 {
		t.Fatalf("recovery moved %d messages to other slots", rs.Moved)
	}
}

// TestReplicaCompactionLeavesADeadLetterSourceItsLogStillMoves (replica.go
// invariant 6): a dead-letter move's source is named before its stripe's
// lock is taken, as a delete's message is. It was named only as the move
// was persisted, with no lock: a relocation that had found the message not
// named (relocateLocked, under that lock) appended its relocate record after
// the move, and the follower's next recovery brought the message back
// beside its dead-letter copy. The move here is an entry of its own, after
// the hide's entry was applied (two appends).
func TestReplicaCompactionLeavesADeadLetterSourceItsLogStillMoves(t *testing.T) {
	h, _ := newHandShard(t)
	h.do(func() error { _, err := h.leader.CreateQueue("dlq", DefaultQueueConfig()); return err })
	cfg := DefaultQueueConfig()
	cfg.VisibilityTimeout = time.Second
	cfg.DeadLetterQueue, cfg.MaxReceiveCount = "dlq", 1
	h.do(func() error { _, err := h.leader.CreateQueue("src", cfg); return err })
	q, err := h.leader.Queue("src")
	if err != nil {
		t.Fatal(err)
	}
	body := []byte("poison")
	h.do(func() error { _, err := q.Send([]SendEntry{{Body: body}}, nil); return err })
	h.receiveOne(q)
	h.clk.Advance(2 * time.Second)
	received := make(chan error, 1)
	go func() { // moves the message: a hide's state record, then the move
		_, err := q.Receive(context.Background(), ReceiveOptions{Max: 1}, nil)
		received <- err
	}()
	h.waitProposals(2)
	h.rep.mu.Lock()
	move := h.rep.props[1:]
	h.rep.props = h.rep.props[:1]
	h.rep.mu.Unlock()
	h.pump() // the hide, persisted and applied everywhere

	// The follower's compaction in relocateLocked: the source's stripe
	// locked, the message found not named.
	fq, err := h.follower.Queue("src")
	if err != nil {
		t.Fatal(err)
	}
	st := &fq.stripes[0]
	r := h.follower.store.(*replStore)
	st.mu.Lock()
	idx := uint32(0)
	for ; idx < st.slab.n && (!st.slab.valid(idx) || st.slab.at(idx).seq == 0); idx++ {
	}
	if idx == st.slab.n {
		st.mu.Unlock()
		t.Fatal("the follower does not hold the message")
	}
	s := st.slab.at(idx)
	if r.isNamed(fq.id, s.seq) {
		st.mu.Unlock()
		t.Fatal("named before its move was persisted")
	}
	// Meanwhile the move arrives; the follower persists it.
	h.hold = true
	h.rep.mu.Lock()
	h.rep.props = append(move, h.rep.props...)
	h.rep.mu.Unlock()
	persisted := make(chan struct{})
	go func() { defer close(persisted); h.pump() }()
	for deadline := time.Now().Add(10 * time.Second); !r.isNamed(fq.id, s.seq); {
		if time.Now().After(deadline) {
			st.mu.Unlock()
			t.Fatal("the move's source was never named")
		}
		time.Sleep(time.Millisecond)
	}
	// The rest of relocateLocked: the relocate record.
	sum := md5.Sum(body)
	var recs [1]logRec
	var head [bodyHeadLen]byte
	pos := s.bodyPos
	h.follower.store.bodyRecord(&recs[0], &head, fq.id, st.idx, idx, s, &sum, nil, body, true)
	err = h.follower.store.append(recs[:])
	if err == nil {
		h.follower.store.addLive(pos, -int64(s.recSize))
		s.bodyPos, s.recSize = recs[0].pos, recs[0].size
	}
	st.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-persisted:
	case <-time.After(20 * time.Second):
		t.Fatal("the follower never persisted the move")
	}
	h.hold = false
	if err := <-received; err != nil && !errors.Is(err, ErrMessageNotExist) {
		t.Fatal(err)
	}
	h.pump()
	if err := h.follower.ApplyCommitted(h.held); err != nil {
		t.Fatal(err)
	}
	h.held = nil

	h.restartFollower()
	for name, want := range map[string]int64{"src": 0, "dlq": 1} {
		fq, err := h.follower.Queue(name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := fq.Attributes()
		if err != nil {
			t.Fatal(err)
		}
		if n := info.Active + info.Inactive + info.Delayed; n != want {
			t.Fatalf("after a restart the follower's %s holds %d messages, want %d: the moved message came back", name, n, want)
		}
	}
}

// TestReplicaCompactionKeepsTheEntriesItServes: after a checkpoint a
// replica keeps the newest entries for followers that lag a little
// (ReplicaKeepEntries); compaction must not remove the segments their
// records lie in, dead bodies or not, or reading them back fails and etcd
// raft panics ("entries ... unavailable from storage").
func TestReplicaCompactionKeepsTheEntriesItServes(t *testing.T) {
	h := &handShard{t: t, rep: &handReplica{kick: make(chan struct{}, 1)}, clk: NewFakeClock(t0), next: 1, keep: 100}
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
	for range 200 {
		h.do(func() error { _, err := q.Send([]SendEntry{{Body: bytes.Repeat([]byte("x"), 1000)}}, nil); return err })
	}
	for n := 0; n < 200; {
		var msgs []Message
		h.do(func() (err error) {
			msgs, err = q.Receive(context.Background(), ReceiveOptions{Max: 10}, nil)
			return err
		})
		n += len(msgs)
		hs := make([]ReceiptHandle, len(msgs))
		for i := range msgs {
			hs[i] = msgs[i].Handle
		}
		h.do(func() error { _, err := q.Delete(hs, make([]error, len(hs))); return err })
	}
	r, err := h.leader.repl()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.checkpoint(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.leader.compactOnce(0); err != nil {
		t.Fatal(err)
	}
	snap, _, err := h.leader.SnapshotPoint()
	if err != nil {
		t.Fatal(err)
	}
	if snap == 0 {
		t.Fatal("the checkpoint kept every entry: the test tests nothing")
	}
	ents, ok, err := h.leader.Entries(snap+1, h.next, 1<<30)
	if err != nil || !ok {
		t.Fatalf("entries %d..%d the log still serves: ok %v, err %v", snap+1, h.next-1, ok, err)
	}
	if len(ents) != int(h.next-snap-1) {
		t.Fatalf("got %d entries, want %d", len(ents), h.next-snap-1)
	}
}
