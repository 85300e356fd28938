package engine

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// TestReplicaExportHoldsOnlyCommittedChanges (replica.go exportFence;
// docs/chaos.md, open findings): a leader's live state holds the change of
// a proposal in flight. A snapshot read then must not reach a new member
// unless that proposal commits: here a delete, which takes the message out
// of the state at once; if its proposal fails (the leader loses the lead),
// the log keeps the message, and a new member installing that snapshot
// would lack it for good (and could lead with that state). A send in
// flight is no such case: ExportState skips a message whose send is not
// settled, and the log replays it.
func TestReplicaExportHoldsOnlyCommittedChanges(t *testing.T) {
	for _, commit := range []bool{true, false} {
		name := "failed"
		if commit {
			name = "committed"
		}
		t.Run(name, func(t *testing.T) {
			h, q := newHandShard(t)
			snapIdx := h.next - 1
			h.do(func() error { _, err := q.Send([]SendEntry{{Body: []byte("a")}, {Body: []byte("b")}}, nil); return err })
			m := h.receiveOne(q)

			// The delete's proposal is in flight: the message is out of the
			// leader's state already.
			deleted := make(chan error, 1)
			go func() { deleted <- deleteHandle(q, m.Handle) }()
			h.waitProposals(1)
			var snap bytes.Buffer
			exported := make(chan error, 1)
			go func() { exported <- h.leader.ExportState(&snap) }()
			if commit {
				h.pump()
			} else if err := h.leader.SetLeader(false, 0); err != nil {
				t.Fatal(err)
			}
			if err := <-deleted; commit != (err == nil) {
				t.Fatalf("delete: %v", err)
			}
			err := <-exported
			b := h.open(t.TempDir(), &handReplica{kick: make(chan struct{}, 1)})
			defer b.Close()
			if !commit {
				if err == nil {
					t.Fatal("the export of a state holding a failed proposal's change succeeded")
				}
				if err := b.ImportState(&snap, snapIdx, 1, nil); err == nil {
					t.Fatal("a new member installed the stream of a failed export")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// A new member: the snapshot, then the log after its index.
			if err := b.ImportState(&snap, snapIdx, 1, nil); err != nil {
				t.Fatal(err)
			}
			ents, ok, err := h.leader.Entries(snapIdx+1, h.next, 1<<30)
			if err != nil || !ok {
				t.Fatalf("entries after the snapshot: ok %v, err %v", ok, err)
			}
			if err := b.PersistEntries(ents); err != nil {
				t.Fatal(err)
			}
			if err := b.ApplyCommitted(ents); err != nil {
				t.Fatal(err)
			}
			fq, err := b.Queue("q")
			if err != nil {
				t.Fatal(err)
			}
			info, err := fq.Attributes()
			if err != nil {
				t.Fatal(err)
			}
			if n := info.Active + info.Inactive + info.Delayed; n != 1 {
				t.Fatalf("the new member holds %d messages, want 1", n)
			}
		})
	}
}

// TestReplicaExportAfterAFailedProposal: a broker whose proposal failed
// holds its change until it is rebuilt (SetLeader's caller reopens it); a
// snapshot of it is refused even when nothing is in flight any more.
func TestReplicaExportAfterAFailedProposal(t *testing.T) {
	h, q := newHandShard(t)
	h.failedSend(q)
	var snap bytes.Buffer
	if err := h.leader.ExportState(&snap); !errors.Is(err, errExportUncommitted) {
		t.Fatalf("export: %v, want errExportUncommitted", err)
	}
}

// TestCopyStateNeedsTheEndMark: engine/cluster installs a snapshot only
// once CopyState has the whole stream; a stream cut anywhere before its
// end mark (a lost connection, a failed export) is refused, and a whole
// one is copied byte for byte, without what follows its end mark.
func TestCopyStateNeedsTheEndMark(t *testing.T) {
	h, q := newHandShard(t)
	for _, body := range []string{"a", "bb", "ccc"} {
		h.do(func() error { _, err := q.Send([]SendEntry{{Body: []byte(body)}}, nil); return err })
	}
	var snap bytes.Buffer
	if err := h.leader.ExportState(&snap); err != nil {
		t.Fatal(err)
	}
	whole := snap.Bytes()
	var out bytes.Buffer
	n, err := CopyState(&out, bytes.NewReader(append(append([]byte(nil), whole...), "trailing"...)))
	if err != nil || n != int64(len(whole)) || !bytes.Equal(out.Bytes(), whole) {
		t.Fatalf("whole stream: copied %d of %d bytes, err %v", n, len(whole), err)
	}
	for cut := 0; cut < len(whole); cut++ {
		out.Reset()
		if _, err := CopyState(&out, bytes.NewReader(whole[:cut])); err == nil {
			t.Fatalf("a stream cut at %d of %d bytes was accepted", cut, len(whole))
		}
	}
}

// liveSeqs returns the seqs of the messages a queue's replica holds.
func liveSeqs(q *Queue) map[uint64]bool {
	seqs := map[uint64]bool{}
	for si := range q.stripes {
		st := &q.stripes[si]
		st.mu.Lock()
		for i := uint32(0); i < st.slab.n; i++ {
			if !st.slab.valid(i) {
				continue
			}
			if s := st.slab.at(i); s.seq != 0 && st.slab.valid(i) {
				seqs[s.seq] = true
			}
		}
		st.mu.Unlock()
	}
	return seqs
}

// TestReplicaReplayKeepsTheNewerMessageInASlot (apply.go installLocked;
// docs/chaos.md, open findings): a snapshot is fuzzy, newer than its
// index, so the log replayed after it brings records of a message that
// was deleted and whose slot the snapshot shows reused by a newer one. A
// record of the older message must not displace the newer one: a slot's
// messages come in seq order, so an older seq there is a message gone.
func TestReplicaReplayKeepsTheNewerMessageInASlot(t *testing.T) {
	h, q := newHandShard(t)
	snapIdx := h.next - 1 // the queue's creation
	h.do(func() error { _, err := q.Send([]SendEntry{{Body: []byte("old")}}, nil); return err })
	m := h.receiveOne(q)
	h.deleteOne(q, m.Handle)
	h.do(func() error { _, err := q.Send([]SendEntry{{Body: []byte("new")}}, nil); return err })
	want := liveSeqs(q)
	if len(want) != 1 {
		t.Fatalf("the leader holds %d messages, want 1", len(want))
	}
	var snap bytes.Buffer
	if err := h.leader.ExportState(&snap); err != nil {
		t.Fatal(err)
	}
	ents, ok, err := h.leader.Entries(snapIdx+1, h.next, 1<<30)
	if err != nil || !ok {
		t.Fatalf("entries after the snapshot: ok %v, err %v", ok, err)
	}
	b := h.open(t.TempDir(), &handReplica{kick: make(chan struct{}, 1)})
	defer b.Close()
	if err := b.ImportState(&snap, snapIdx, 1, nil); err != nil {
		t.Fatal(err)
	}
	bq, err := b.Queue("q")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if err := b.PersistEntries([]ReplicaEntry{e}); err != nil {
			t.Fatal(err)
		}
		if err := b.ApplyCommitted([]ReplicaEntry{e}); err != nil {
			t.Fatal(err)
		}
		if got := liveSeqs(bq); len(got) != 1 || !got[firstKey(want)] {
			t.Fatalf("after entry %d the new member holds seqs %v, want %v", e.Index, got, want)
		}
	}
}

func firstKey(m map[uint64]bool) uint64 {
	for k := range m {
		return k
	}
	return 0
}

// waitProposals waits until n proposals are queued and not yet committed
// (a kick left over from an earlier operation says nothing).
func (h *handShard) waitProposals(n int) {
	for {
		h.rep.mu.Lock()
		k := len(h.rep.props)
		h.rep.mu.Unlock()
		if k >= n {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// TestReplicaEntriesBounded (replica_log.go Entries): a follower far
// behind asks for every entry to the end of the log with a byte budget;
// the answer is a prefix of the log within the budget (one entry at
// least), however long the rest.
func TestReplicaEntriesBounded(t *testing.T) {
	h, q := newHandShard(t)
	lo := h.next
	body := bytes.Repeat([]byte("x"), 1000)
	for range 200 {
		h.do(func() error { _, err := q.Send([]SendEntry{{Body: body}}, nil); return err })
	}
	all, ok, err := h.leader.Entries(lo, h.next, 1<<30)
	if err != nil || !ok || len(all) != 200 {
		t.Fatalf("all entries: %d, ok %v, err %v", len(all), ok, err)
	}
	for _, budget := range []int{1, 500, 5000, 50_000, 150_000} {
		got, ok, err := h.leader.Entries(lo, h.next, budget)
		if err != nil || !ok || len(got) == 0 {
			t.Fatalf("budget %d: %d entries, ok %v, err %v", budget, len(got), ok, err)
		}
		size := 0
		for i, e := range got {
			if e.Index != all[i].Index || e.Term != all[i].Term || !bytes.Equal(e.Data, all[i].Data) {
				t.Fatalf("budget %d: entry %d differs from the log's", budget, i)
			}
			size += len(e.Data)
		}
		if len(got) > 1 && size > budget {
			t.Fatalf("budget %d: %d entries of %d bytes", budget, len(got), size)
		}
		if next := len(all[0].Data); budget >= 2*next && size+next <= budget/2 {
			t.Fatalf("budget %d: only %d bytes returned", budget, size)
		}
	}
}

// BenchmarkReplicaEntriesFarBehind: what a leader pays per Entries call
// for a follower far behind (10,000 entries after lo, a 64 KiB budget).
func BenchmarkReplicaEntriesFarBehind(b *testing.B) {
	dir := b.TempDir()
	rep := &handReplica{kick: make(chan struct{}, 1)}
	o := Options{Dir: dir, Replica: rep, FreeSpaceReserve: -1, Stripes: 1}
	o.CheckpointInterval, o.CheckpointRecords, o.CheckpointBytes = time.Hour, 1<<40, 1<<40
	br, err := Open(o)
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	if err := br.SetLeader(true, 1); err != nil {
		b.Fatal(err)
	}
	body := bytes.Repeat([]byte("x"), 1000)
	next := uint64(1)
	commit := func() {
		rep.mu.Lock()
		props := rep.props
		rep.props = nil
		rep.mu.Unlock()
		for _, p := range props {
			ents := []ReplicaEntry{{Index: next, Term: 1, Kind: EntryRecords, Data: p}}
			next++
			if err := br.PersistEntries(ents); err != nil {
				b.Fatal(err)
			}
			if err := br.ApplyCommitted(ents); err != nil {
				b.Fatal(err)
			}
		}
	}
	done := make(chan error, 1)
	go func() { _, err := br.CreateQueue("q", DefaultQueueConfig()); done <- err }()
	for {
		select {
		case err := <-done:
			if err != nil {
				b.Fatal(err)
			}
		case <-rep.kick:
			commit()
			continue
		}
		break
	}
	q, err := br.Queue("q")
	if err != nil {
		b.Fatal(err)
	}
	for range 10_000 {
		go func() { _, err := q.Send([]SendEntry{{Body: body}}, nil); done <- err }()
		for waiting := true; waiting; {
			select {
			case err := <-done:
				if err != nil {
					b.Fatal(err)
				}
				waiting = false
			case <-rep.kick:
				commit()
			}
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ents, ok, err := br.Entries(2, next, 64<<10)
		if err != nil || !ok || len(ents) == 0 {
			b.Fatal(len(ents), ok, err)
		}
	}
}

// failedSend sends a message whose proposal fails: the leader steps down
// while it is in flight (its change stays in the leader's state).
func (h *handShard) failedSend(q *Queue) {
	h.t.Helper()
	sent := make(chan error, 1)
	go func() { _, err := q.Send([]SendEntry{{Body: []byte("failed")}}, nil); sent <- err }()
	h.waitProposals(1)
	if err := h.leader.SetLeader(false, 0); err != nil {
		h.t.Fatal(err)
	}
	if err := <-sent; !errors.Is(err, ErrNotLeader) {
		h.t.Fatalf("send: %v, want ErrNotLeader", err)
	}
}
