package engine

// State transfer between replicas of a shard (engine/cluster): a replica
// too far behind its leader's log gets the leader's whole state instead.
//
// ExportState writes every queue, topic, subscription and message, each as
// the record that would create it (the replicated log's record encoding:
// type, length, payload), and each topic's publish counts as a
// recTopicCount record (topic_count.go; ExportStateAt makes them those of
// the snapshot's index), then an end mark. It is fuzzy:
// stripes are read one after the other while the leader goes on, so the
// stream is no single instant. That is enough because the follower then
// replays the log from the snapshot's index, and records carry full
// snapshots: replaying a change over a state that already has it, or a
// delete of a message the stream lacks, converges to the leader's state
// (apply.go). It holds committed changes only: a leader's state also holds
// those of its proposals in flight, so the end mark is written only once
// they have committed (replStore.exportFence); a stream without it is
// refused.
//
// ImportState writes the stream into a new, empty replicated broker as
// local records, installs them, records the snapshot's index and the
// configuration, and checkpoints, so that the imported state is in the
// index before anything else is appended (the records lie in no entry of
// the log: recovery would not fold them).

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
)

// ExportState streams the broker's queues and messages: each as the record
// that would create it, then an end mark. It is fuzzy (stripes are read one
// after the other while the broker goes on); the importer replays the log
// from the snapshot's index over it (the comment at the top of snapshot.go).
// On a replicated broker it ends with an error, and no end mark, if the
// state may hold a change that never commits.
//
// For engine/cluster, which sends it to a replica too far behind; it works
// on any broker.
func (b *Broker) ExportState(w io.Writer) error { return b.exportState(w, 0) }

// ExportStateAt is ExportState for a replica that installs the stream as
// the state of entry index: the topics' publish counts are those of that
// entry (topic_count.go invariant 5), since the replica counts each
// publish of the log after it as it replays it. It fails if this log no
// longer holds the entries after index.
//
// For engine/cluster: it needs a broker opened with Options.Replica
// (others return an error).
func (b *Broker) ExportStateAt(w io.Writer, index uint64) error {
	r, err := b.repl()
	if err != nil {
		return err
	}
	if index == 0 {
		return errors.New("engine: snapshot: counts as of entry 0")
	}
	unpin, err := r.pinAfter(index) // before anything is streamed
	if err != nil {
		return err
	}
	defer unpin()
	return b.exportState(w, index)
}

// ExportStateLeading is ExportState on a replica that leads its shard
// and has confirmed it (a majority still follows it) before it reads
// anything, so that the stream holds every change committed before the
// call: a backup's (engine/cluster). It fails with ErrNotLeader on a
// replica that does not lead, or cannot confirm it.
func (b *Broker) ExportStateLeading(w io.Writer) error {
	r, err := b.repl()
	if err != nil {
		return err
	}
	term := r.leading()
	if term == 0 {
		return fmt.Errorf("%w: a backup exports a shard from its leader", ErrNotLeader)
	}
	if err := r.confirmLead(term); err != nil {
		return err
	}
	return b.exportState(w, 0)
}

// ImportedTerm returns the highest term that the sequence number of a
// message ImportState imported carries (replica.go invariant 5): a shard
// restored from a backup must start past it, so that its leaders never
// hand out one of them again.
func (b *Broker) ImportedTerm() uint64 {
	r, err := b.repl()
	if err != nil {
		return 0
	}
	r.cpMu.Lock()
	defer r.cpMu.Unlock()
	var t uint64
	for _, seq := range r.bornSeq {
		t = max(t, seq>>bootShift)
	}
	return t
}

// exportState is ExportState, with the counts as of entry at (0: the
// live counts).
func (b *Broker) exportState(w io.Writer, at uint64) error {
	if err := b.readable(); err != nil {
		return err // it wrote a stream of nothing after Close (embedding audit 2)
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	b.mu.RLock()
	qs := make([]*Queue, 0, b.names.n)
	for n := range b.names.all() {
		qs = append(qs, b.queues[n])
	}
	for n, q := range b.queues {
		if isInternalQueue(n) {
			qs = append(qs, q) // push queues (push_queue.go)
		}
	}
	b.mu.RUnlock()
	put := func(typ uint8, head, body []byte) error {
		var h [5]byte
		h[0] = typ
		binary.LittleEndian.PutUint32(h[1:], uint32(len(head)+len(body)))
		if _, err := bw.Write(h[:]); err != nil {
			return err
		}
		if _, err := bw.Write(head); err != nil {
			return err
		}
		_, err := bw.Write(body)
		return err
	}
	for _, q := range qs {
		v := q.value()
		if err := put(recQueueCreate, v.encode(), nil); err != nil {
			return err
		}
	}
	// The topics, then their subscriptions (topic_replica.go), then the
	// highest ids used, as deletes of ids no longer live (topic_replica.go
	// invariant 2): topic id 0 is never used.
	var tvals, svals, marks [][]byte
	var topics []*topic // their counts are read after topicSet.mu (lock order: topic.go)
	if err := b.lockAdminForExport(); err != nil {
		return err
	}
	lastTopic, lastSub := b.topics.nextTopicID-1, b.topics.nextSubID-1
	b.adminMu.Unlock()
	b.topics.mu.RLock()
	liveSub := false
	for _, t := range b.topics.byID {
		m := t.meta.Load()
		v := topicVal{id: t.id, createMs: m.createMs, modifyMs: m.modifyMs, cfg: m.cfg, name: t.name}
		tvals = append(tvals, v.encode())
		topics = append(topics, t)
		for _, s := range t.subs {
			svals = append(svals, encodeSub(s))
			liveSub = liveSub || s.id == lastSub
		}
	}
	if lastTopic > 0 && b.topics.byID[lastTopic] == nil {
		marks = append(marks, encodeTopicDelete(lastTopic, nil))
	}
	if lastSub > 0 && !liveSub {
		marks = append(marks, encodeTopicDelete(0, []uint64{lastSub}))
	}
	b.topics.mu.RUnlock()
	for _, vals := range []struct {
		typ  uint8
		vals [][]byte
	}{{recTopic, tvals}, {recSubscription, svals}, {recTopicDelete, marks}} {
		for _, v := range vals.vals {
			if err := put(vals.typ, v, nil); err != nil {
				return err
			}
		}
	}
	r := b.getReader()
	defer b.putReader(r)
	type item struct {
		snap [snapLen]byte
		loc  bodyLoc
	}
	var items []item
	var head [snapLen + 16]byte
	for _, q := range qs {
		for si := range q.stripes {
			st := &q.stripes[si]
			items = items[:0]
			st.mu.Lock()
			for i := uint32(0); !st.dead && i < st.slab.n; i++ {
				if !st.slab.valid(i) {
					i = nextChunk(i) - 1
					continue
				}
				s := st.slab.at(i)
				if s.seq == 0 || s.state() == stPending {
					continue
				}
				var it item
				putSnap(it.snap[:], q.id, st.idx, i, s)
				it.loc = bodyLoc{pos: s.bodyPos, size: s.recSize, slot: i, seq: s.seq, stripe: st.idx}
				items = append(items, it)
			}
			st.mu.Unlock()
			for i := range items {
				var m Message
				ok, err := q.readBody(r, &m, &items[i].loc)
				switch {
				case errors.Is(err, errDamaged) && b.isReplica():
					// A replica drops nothing: its copy fails (poison.go),
					// and the follower gets the message from another.
					b.replicaDamaged(fmt.Errorf("queue %s, message %s, body at %d: %w", q.name, q.messageID(items[i].loc.seq), items[i].loc.pos, err))
					return err
				case errors.Is(err, errDamaged):
					// Lost here too: a receive drops it (poison.go).
					b.log.Warn("snapshot: a message's body is damaged; the follower does without it", "queue", q.name, "seq", items[i].loc.seq, "err", err)
					continue
				case err != nil:
					return err // the stream must not lack a live message
				case !ok:
					continue // gone meanwhile: by a change the log replays after the snapshot
				}
				copy(head[:snapLen], items[i].snap[:])
				copy(head[snapLen:], m.MD5[:])
				typ, h := recSend, head[:]
				if len(m.props) > 0 {
					typ, h = recSendProps, putPropsHead(head[:], snapLen, m.props)
				}
				if err := put(typ, h, m.Body); err != nil {
					return err
				}
			}
		}
	}
	// The topics' counts, read before the fence, so that it covers the
	// proposals of the publishes they hold (topic_count.go).
	now := b.nowMs()
	counts := make([]countVal, len(topics))
	for i, t := range topics {
		counts[i].buckets, counts[i].upto = t.count.liveUpto(now)
	}
	rs, _ := b.store.(*replStore)
	if rs != nil {
		// Only committed changes (exportFence); without the end mark the
		// follower refuses the stream.
		if err := rs.exportFence(); err != nil {
			return err
		}
	}
	if at > 0 {
		if err := rs.countsAt(at, topics, counts); err != nil {
			return err
		}
	}
	for i, t := range topics {
		cs := slices.DeleteFunc(counts[i].buckets, func(c countBucket) bool { return c.n == 0 })
		if len(cs) > 0 {
			v := countVal{upto: at, buckets: cs} // a stream's upto: the index (topic_count.go)
			if err := put(recTopicCount, v.encode(t.id), nil); err != nil {
				return err
			}
		}
	}
	if err := put(0, nil, nil); err != nil { // the end mark
		return err
	}
	return bw.Flush()
}

// lockAdminForExport takes adminMu for exportState. On a replica it waits
// at most exportSettleTimeout, and then fails with ErrExportUnsettled, as
// exportFence does: a queue or topic change holds adminMu until its
// proposal commits, which may wait for the very member the snapshot is
// for (with another member down). Waiting on, the export never reached
// its fence, the shard's loop never gave the proposal up
// (engine/cluster giveUpIfAsked), and the shard took no change until the
// other member was back (locking audit, 2026-12-07:
// TestClusterSnapshotIsSentWithAnAdminChangeInFlight).
func (b *Broker) lockAdminForExport() error {
	if _, ok := b.store.(*replStore); !ok {
		b.adminMu.Lock()
		return nil
	}
	deadline := time.Now().Add(exportSettleTimeout)
	for !b.adminMu.TryLock() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%w within %v: a queue or topic change in flight", ErrExportUnsettled, exportSettleTimeout)
		}
		time.Sleep(time.Millisecond) // admin changes are rare: a wait here is one in flight
	}
	return nil
}

// maxStateRecord bounds one record of an ExportState stream (a queue or a
// message with its body).
const maxStateRecord = 32 << 20

// ImportState fills a new, empty replicated broker from an ExportState
// stream, as the state of entry index of term, with the configuration conf,
// and checkpoints it into the index before anything else is appended.
//
// For engine/cluster: it needs a broker opened with Options.Replica (others
// return an error).
func (b *Broker) ImportState(rd io.Reader, index, term uint64, conf []byte) error {
	r, err := b.repl()
	if err != nil {
		return err
	}
	br := bufio.NewReaderSize(rd, 1<<20)
	var h [5]byte
	imported := map[uint64]uint64{} // per queue, the highest seq imported
	for {
		if _, err := io.ReadFull(br, h[:]); err != nil {
			return fmt.Errorf("engine: snapshot stream: %w", err)
		}
		typ, n := h[0], binary.LittleEndian.Uint32(h[1:])
		if typ == 0 {
			break
		}
		if n > maxStateRecord {
			return fmt.Errorf("%w: snapshot record of %d bytes", errBadRecord, n)
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(br, payload); err != nil {
			return fmt.Errorf("engine: snapshot stream: %w", err)
		}
		if typ != recQueueCreate && typ != recTopic && typ != recSubscription && typ != recTopicDelete && typ != recTopicCount && !isSendRec(typ) {
			return fmt.Errorf("%w: snapshot record of type %d", errBadRecord, typ)
		}
		if typ == recTopicCount {
			// Counts of another point than the snapshot's would be
			// counted twice, or miss publishes (topic_count.go).
			if _, v, err := decodeCountVal(payload); err != nil {
				return err
			} else if v.upto != 0 && v.upto != index {
				return fmt.Errorf("engine: snapshot stream: topic counts as of entry %d, not the snapshot's %d", v.upto, index)
			}
		}
		recs := [1]logRec{{typ: typ, head: payload, live: isSendRec(typ)}}
		if err := r.durableStore.append(recs[:]); err != nil {
			return err
		}
		if err := b.applyRecord(recs[0].pos, recs[0].size, typ, payload); err != nil {
			return err
		}
		if isSendRec(typ) {
			if s, err := decodeSnap(payload); err == nil {
				imported[s.qid] = max(imported[s.qid], s.seq)
			}
		}
	}
	// The log from index on replays the sends of messages imported here:
	// such a send and its delete in one checkpoint window must leave a
	// tombstone (replica.go invariant 8).
	r.cpMu.Lock()
	if r.bornSeq == nil {
		r.bornSeq = map[uint64]uint64{}
	}
	for qid, seq := range imported {
		r.bornSeq[qid] = max(r.bornSeq[qid], seq)
	}
	r.cpMu.Unlock()
	r.mu.Lock()
	r.applied, r.appTerm = index, term
	r.marks = append(r.marks[:0], appliedMark{index, term, uint64(r.wal.End())})
	r.state.SnapIndex, r.state.SnapTerm = index, term
	r.state.Applied, r.state.AppliedTerm = index, term
	r.mu.Unlock()
	if err := b.PersistConfState(index, conf); err != nil {
		return err
	}
	if err := r.checkpoint(); err != nil {
		return err
	}
	if r.cpPos.Load() < uint64(r.wal.End()) {
		return errors.New("engine: snapshot import: the checkpoint did not cover the imported state")
	}
	return nil
}

// CopyState copies an ExportState stream from src to dst up to and
// including its end mark, checking only its framing. It fails if src ends
// first: an export that failed (or a connection lost) sends no end mark.
//
// For engine/cluster: a member spools the stream and installs it only once
// it is whole, so that a failed transfer leaves its old state as it was.
func CopyState(dst io.Writer, src io.Reader) (int64, error) {
	br := bufio.NewReaderSize(src, 1<<20)
	var h [5]byte
	var n int64
	for {
		if _, err := io.ReadFull(br, h[:]); err != nil {
			return n, fmt.Errorf("engine: snapshot stream: %w", noEOF(err))
		}
		if _, err := dst.Write(h[:]); err != nil {
			return n, err
		}
		n += int64(len(h))
		if h[0] == 0 {
			return n, nil
		}
		size := binary.LittleEndian.Uint32(h[1:])
		if size > maxStateRecord {
			return n, fmt.Errorf("%w: snapshot record of %d bytes", errBadRecord, size)
		}
		c, err := io.CopyN(dst, br, int64(size))
		n += c
		if err != nil {
			return n, fmt.Errorf("engine: snapshot stream: %w", noEOF(err))
		}
	}
}

// noEOF turns a stream's early end into io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
