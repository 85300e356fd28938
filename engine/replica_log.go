package engine

// The consensus layer's side of a replicated broker (replica.go): the
// entries it persists, syncs, reads back and applies, and where the local
// log's entries start.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/smqd/smqd/wal"
)

// PersistEntries writes entries to the local log (not synced: SyncLog). A
// leader's own proposals get only their header; others get their records
// (state, delete and expire records rewritten to name this replica's body
// locations, invariant 4) and then their header. An entry at an index this
// log already holds replaces it and everything after it (Raft's log
// truncation): their records become void.
//
// Those body locations are looked up under the messages' stripe locks
// before mu is taken: a stripe's flush takes mu under its stripe lock
// (replStore.append), so taking a stripe lock under mu could deadlock
// (docs/locking.md).
//
// For engine/cluster: it needs a broker opened with Options.Replica (others
// return an error).
func (b *Broker) PersistEntries(ents []ReplicaEntry) error {
	r, err := b.repl()
	if err != nil {
		return err
	}
	for _, e := range ents {
		var locs *bodyLocs
		for {
			r.mu.Lock()
			err := r.persistLocked(b, e, locs)
			r.mu.Unlock()
			if err != errLookUpBodies {
				if err != nil {
					return err
				}
				break
			}
			if locs, err = r.lookUpBodies(b, e.Data[8:]); err != nil {
				return err
			}
		}
	}
	return nil
}

// errLookUpBodies: persistLocked needs the body locations of a received
// entry (lookUpBodies), to be found without mu.
var errLookUpBodies = errors.New("engine: look up the bodies of a received entry first")

// bodyLocs are where this replica holds the bodies that a received entry's
// state, delete and expire records name (locs[i] for its record i; zero
// for other records), and the messages they and its dead-letter moves'
// sources name (invariant 6).
type bodyLocs struct {
	locs  [][2]uint64 // position, size
	names []msgKey
}

// lookUpBodies finds the body locations of a received entry's records
// (recs: its data after the proposal id). It takes stripe locks (bodyOf):
// never call it with mu held.
func (r *replStore) lookUpBodies(b *Broker, recs []byte) (*bodyLocs, error) {
	l := &bodyLocs{}
	err := decodeRecords(recs, func(typ uint8, payload []byte) error {
		var loc [2]uint64
		switch typ {
		case recState, recDelete, recExpire:
			s, err := decodeSnap(payload)
			if err != nil {
				return err
			}
			k := msgKey{s.qid, s.seq}
			r.name(k) // before its body is looked up (invariant 6)
			l.names = append(l.names, k)
			// The live state's body, else that of a send persisted and
			// not applied yet (invariant 4). unapplied is asked first:
			// an entry leaves it only once its sends are in the live
			// state, so a message found in neither is not held here.
			// The live body wins (compaction may have relocated the
			// message after its send was applied, before it was named).
			r.mu.Lock()
			held, ok := r.unapplied[k]
			r.mu.Unlock()
			pos, size := b.bodyOf(s.qid, s.stripe, s.slot, s.seq)
			loc = [2]uint64{pos, uint64(size)}
			if pos == 0 && ok {
				loc = held
			}
		}
		if typ == recDeadLetter && len(payload) >= snapLen {
			// A move: its source leaves as by a delete. Named before its
			// stripe's lock is taken, as above (invariant 6): a relocation
			// that found it not named yet then appends before the move.
			// The record carries its own body: nothing to look up.
			s, err := decodeSnap(payload[:snapLen])
			if err != nil {
				return err
			}
			k := msgKey{s.qid, s.seq}
			r.name(k)
			l.names = append(l.names, k)
			b.bodyOf(s.qid, s.stripe, s.slot, s.seq)
		}
		l.locs = append(l.locs, loc)
		return nil
	})
	if err != nil {
		r.unname(l.names)
		return nil, err
	}
	return l, nil
}

// persistLocked persists one entry; a received entry of records needs its
// body locations (locs; nil: errLookUpBodies, before anything changed).
func (r *replStore) persistLocked(b *Broker, e ReplicaEntry, locs *bodyLocs) error {
	var own *pendingProp
	if e.Kind == EntryRecords {
		if len(e.Data) < 8 {
			return fmt.Errorf("%w: entry %d data of %d bytes", errBadRecord, e.Index, len(e.Data))
		}
		if own = r.pendingByID(binary.LittleEndian.Uint64(e.Data)); own == nil && locs == nil {
			return errLookUpBodies
		}
	}
	// Truncation: drop our entries at and after e.Index.
	if k := sort.Search(len(r.ents), func(i int) bool { return r.ents[i].index >= e.Index }); k < len(r.ents) {
		for _, old := range r.ents[k:] {
			if old.applied {
				return fmt.Errorf("engine: entry %d is applied and cannot be replaced", old.index)
			}
			r.void = append(r.void, lostSpan{old.first, old.recEnd})
			r.unname(old.names)
			r.forgetSendsLocked(old.sends)
		}
		r.ents = r.ents[:k]
	}
	info := entryInfo{index: e.Index, term: e.Term, kind: e.Kind}
	nrecs := 0
	switch e.Kind {
	case EntryRecords:
		info.id = binary.LittleEndian.Uint64(e.Data)
		if own != nil {
			info.first, info.recEnd = own.first, own.end // a leader's own: written already
			if locs != nil {
				r.unname(locs.names) // not received after all
			}
			break
		}
		// A received entry: its records one by one, so that a change to a
		// message sent earlier in this entry or in a persisted entry not
		// applied yet names the send's position here (invariant 4);
		// otherwise the body lookUpBodies found.
		info.names = locs.names
		i := 0
		err := decodeRecords(e.Data[8:], func(typ uint8, payload []byte) error {
			if i >= len(locs.locs) {
				return fmt.Errorf("%w: entry %d changed since its bodies were looked up", errBadRecord, e.Index)
			}
			loc := locs.locs[i]
			i++
			// The log copies what it appends; only a record patched here
			// needs a copy of its own.
			rec := [1]logRec{{typ: typ, head: payload, live: isSendRec(typ) || typ == recDeadLetter}}
			switch typ {
			case recState, recDelete, recExpire:
				rec[0].head = append([]byte(nil), payload...)
				s, err := decodeSnap(rec[0].head)
				if err != nil {
					return err
				}
				pos, size := loc[0], uint32(loc[1])
				if loc, ok := r.unapplied[msgKey{s.qid, s.seq}]; ok && pos == 0 {
					pos, size = loc[0], uint32(loc[1]) // sent earlier in this entry
				}
				setSnapBody(rec[0].head, pos, size)
			}
			if err := r.durableStore.append(rec[:]); err != nil {
				return err
			}
			if isSendRec(typ) || typ == recDeadLetter {
				h := rec[0].head
				if typ == recDeadLetter {
					h = h[snapLen:]
				}
				s, _ := decodeSnap(h)
				k := msgKey{s.qid, s.seq}
				r.sentLocked(k, [2]uint64{rec[0].pos, uint64(rec[0].size)})
				info.sends = append(info.sends, k)
			}
			if nrecs == 0 {
				info.first = rec[0].pos
			}
			info.recEnd = rec[0].pos + uint64(rec[0].size)
			nrecs++
			return nil
		})
		if err != nil {
			return err
		}
	case EntryConfChange:
		info.data = append([]byte(nil), e.Data...)
	}
	hdr := putEntryHeader(e.Index, e.Term, info.id, info.first, info.recEnd, e.Kind, info.data)
	h := [1]logRec{{typ: recEntry, head: hdr}}
	if err := r.durableStore.append(h[:]); err != nil {
		return err
	}
	if info.first == 0 && info.recEnd == 0 {
		info.first, info.recEnd = h[0].pos, h[0].pos // no records
	}
	info.end = h[0].pos + uint64(h[0].size)
	r.ents = append(r.ents, info)
	return nil
}

// sentLocked notes where a persisted, not yet applied received entry sent
// message k (invariant 4); forgetSendsLocked forgets it again once the
// entry is applied (the live state holds the message then) or truncated.
func (r *replStore) sentLocked(k msgKey, loc [2]uint64) {
	if r.unapplied == nil {
		r.unapplied = map[msgKey][2]uint64{}
	}
	r.unapplied[k] = loc
}

func (r *replStore) forgetSendsLocked(keys []msgKey) {
	for _, k := range keys {
		delete(r.unapplied, k)
	}
}

// pendingByID finds a pending proposal.
func (r *replStore) pendingByID(id uint64) *pendingProp {
	for _, p := range r.pending {
		if p.id == id {
			return p
		}
	}
	return nil
}

// bodyOf returns where this replica holds a message's body (0, 0: it does
// not hold it).
func (b *Broker) bodyOf(qid uint64, stripeIdx uint8, slotIdx uint32, seq uint64) (uint64, uint32) {
	q := b.queueByID(qid)
	if q == nil || int(stripeIdx) >= len(q.stripes) {
		return 0, 0
	}
	st := &q.stripes[stripeIdx]
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.slab.valid(slotIdx) {
		return 0, 0
	}
	s := st.slab.at(slotIdx)
	if s.seq != seq || s.state() == stPending {
		return 0, 0
	}
	return s.bodyPos, s.recSize
}

// PersistHardState records the consensus layer's hard state (not synced).
//
// For engine/cluster: it needs a broker opened with Options.Replica (others
// return an error).
func (b *Broker) PersistHardState(hs ReplicaHardState) error {
	r, err := b.repl()
	if err != nil {
		return err
	}
	recs := [1]logRec{{typ: recHardState, head: putHardState(hs)}}
	if err := r.durableStore.append(recs[:]); err != nil {
		return err
	}
	// What a checkpoint must carry is the term and the vote (the commit
	// index is learnt again, and is at least the applied index at start):
	// a mark per change of them, the earliest record of each, keeps the
	// list short.
	r.mu.Lock()
	if n := len(r.hards); n == 0 || r.hards[n-1].hs.Term != hs.Term || r.hards[n-1].hs.Vote != hs.Vote {
		r.hards = append(r.hards, hardMark{recs[0].pos + uint64(recs[0].size), hs})
	}
	r.mu.Unlock()
	return nil
}

// PersistConfState records the shard's configuration as of entry index
// (not synced).
//
// For engine/cluster: it needs a broker opened with Options.Replica (others
// return an error).
func (b *Broker) PersistConfState(idx uint64, cs []byte) error {
	r, err := b.repl()
	if err != nil {
		return err
	}
	recs := [1]logRec{{typ: recConfState, head: putConfState(idx, cs)}}
	if err := r.durableStore.append(recs[:]); err != nil {
		return err
	}
	r.mu.Lock()
	r.conf, r.confIdx = append([]byte(nil), cs...), idx
	r.mu.Unlock()
	return nil
}

// SyncLog makes everything persisted so far durable (whatever the sync
// mode: the consensus layer acknowledges entries only after this).
//
// For engine/cluster: it needs a broker opened with Options.Replica (others
// return an error); an embedder uses Sync.
func (b *Broker) SyncLog() error {
	r, err := b.repl()
	if err != nil {
		return err
	}
	return mapErr(r.wal.Sync())
}

// WaitLogWritten returns once everything persisted so far is written to
// the log's files (not necessarily fsynced): what a kill -9 of the process
// then loses, the operating system still holds. The consensus layer waits
// for it before it acknowledges entries or a vote when it does not sync
// them (--sync interval or none), so that a crash of the process loses
// nothing it acknowledged, as on a single broker.
//
// For engine/cluster: it needs a broker opened with Options.Replica (others
// return an error).
func (b *Broker) WaitLogWritten() error {
	r, err := b.repl()
	if err != nil {
		return err
	}
	if end := r.wal.End(); end > 0 {
		return mapErr(r.wal.WaitWritten(end - 1))
	}
	return nil
}

// Entries returns the entries [lo, hi) of the local log, rebuilt from it,
// up to maxBytes of data (at least one), for the consensus layer's log
// storage. ok is false if lo is not in the log any more.
//
// For engine/cluster: it needs a broker opened with Options.Replica (others
// return an error).
func (b *Broker) Entries(lo, hi uint64, maxBytes int) ([]ReplicaEntry, bool, error) {
	r, err := b.repl()
	if err != nil {
		return nil, false, err
	}
	r.mu.Lock()
	k := sort.Search(len(r.ents), func(i int) bool { return r.ents[i].index >= lo })
	if k == len(r.ents) || r.ents[k].index != lo {
		r.mu.Unlock()
		return nil, false, nil
	}
	// Only as many as maxBytes can take: a follower catching up asks from
	// far behind, and copying every entry to the end of the log on each
	// call made a catch-up quadratic. The records' extent in the log
	// estimates an entry's size; the loop below cuts at maxBytes exactly.
	var infos []entryInfo
	est := 0
	for _, e := range r.ents[k:] {
		if e.index >= hi || (len(infos) > 0 && est > maxBytes) {
			break
		}
		infos = append(infos, e)
		est += int(e.recEnd-e.first) + 8
	}
	r.mu.Unlock()
	var out []ReplicaEntry
	size := 0
	for _, e := range infos {
		re := ReplicaEntry{Index: e.index, Term: e.term, Kind: e.kind}
		switch e.kind {
		case EntryConfChange:
			re.Data = e.data
		case EntryRecords:
			data := binary.LittleEndian.AppendUint64(make([]byte, 0, 8+int(e.recEnd-e.first)), e.id)
			err := r.readRange(e.first, e.recEnd, func(pos uint64, size uint32, typ uint8, payload []byte) {
				switch typ {
				case recEntry, recHardState, recConfState, recRelocate, recRelocateProps:
					return // not the entry's (local records may lie between its records)
				}
				if typ == recState || typ == recDelete || typ == recExpire {
					// Followers rewrite body locations anyway (invariant 4).
					payload = append([]byte(nil), payload...)
					setSnapBody(payload, 0, 0)
				}
				data = append(data, typ)
				data = binary.LittleEndian.AppendUint32(data, uint32(len(payload)))
				data = append(data, payload...)
			})
			if err != nil {
				if errors.Is(err, errDamaged) {
					// A replica drops nothing and serves nothing damaged:
					// its copy fails (poison.go, review M).
					b.replicaDamaged(fmt.Errorf("log entry %d: %w", e.index, err))
				}
				return out, len(out) > 0, err
			}
			re.Data = data
		}
		if len(out) > 0 && size+len(re.Data) > maxBytes {
			break
		}
		size += len(re.Data)
		out = append(out, re)
	}
	return out, true, nil
}

// readRange calls fn for each record in [from, to) of the local log.
func (r *replStore) readRange(from, to uint64, fn func(pos uint64, size uint32, typ uint8, payload []byte)) error {
	if to > uint64(r.wal.WrittenEnd()) {
		// A reader reads what is written: wait for the writer's write of the
		// range (it is under way: every append kicks the writer), not for
		// an fsync, which the consensus layer asks for where it needs one.
		if err := r.wal.WaitWritten(wal.Pos(to - 1)); err != nil {
			return mapErr(err)
		}
	}
	rd, err := r.wal.NewReader(wal.Pos(from), wal.Pos(to))
	if err != nil {
		return mapErr(err)
	}
	defer rd.Close()
	for {
		p, typ, payload, err := rd.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return mapErr(err)
		}
		fn(uint64(p), uint32(rd.NextPos()-p), uint8(typ), payload)
	}
}

// replayStart is also the oldest record of an entry the log still serves
// (the entries kept after a checkpoint for followers that lag a little,
// Entries): compaction removes no segment at or after it. Otherwise their
// reads failed with a removed segment and etcd raft panicked ("entries
// ... unavailable from storage").
func (r *replStore) replayStart() uint64 {
	p := r.durableStore.replayStart()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.ents {
		p = min(p, e.first)
	}
	return p
}

// SnapshotPoint returns the last entry folded into the index (its index
// and term) and the configuration as of then: where the local log's
// entries start for the consensus layer (entries before it are
// compacted).
//
// For engine/cluster: it needs a broker opened with Options.Replica (others
// return an error).
func (b *Broker) SnapshotPoint() (idx, term uint64, err error) {
	r, err := b.repl()
	if err != nil {
		return 0, 0, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state.SnapIndex, r.state.SnapTerm, nil
}

// Applied returns the last entry applied to the state.
//
// For engine/cluster; 0, 0 on a broker without Options.Replica.
func (b *Broker) Applied() (idx, term uint64) {
	r, err := b.repl()
	if err != nil {
		return 0, 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.applied, r.appTerm
}

// ReplicaStats are a replicated broker's counters (metrics).
type ReplicaStats struct {
	// ProposalSeconds: from a leader's proposal of its records to their
	// commit (what a client waits for beyond the local work).
	ProposalSeconds wal.Histogram
	// ProposalsFailed: proposals that never committed (the leader lost its
	// lead first; their operations were answered ErrNotLeader).
	ProposalsFailed uint64
	// Applied is the last entry applied; Pending the proposals in flight.
	Applied uint64
	Pending int
	// UnloggedExpiries: expiries this replica made that no entry has
	// logged yet (replica_expiry.go); UnloggedDropped: those it had no
	// room to remember (they stay in the index until a restart).
	UnloggedExpiries int
	UnloggedDropped  uint64
}

// ReplicaStats returns the replication counters (ok false for a broker
// that is not a replica).
//
// For engine/cluster's metrics.
func (b *Broker) ReplicaStats() (st ReplicaStats, ok bool) {
	r, err := b.repl()
	if err != nil {
		return st, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return ReplicaStats{ProposalSeconds: r.propLat.snapshot(), ProposalsFailed: r.propFailed,
		Applied: r.applied, Pending: len(r.pending), UnloggedExpiries: len(r.unlogged), UnloggedDropped: r.unloggedDropped}, true
}

// latencyHist is a fixed-bucket latency histogram in seconds, recorded
// under its owner's lock.
type latencyHist struct {
	counts [len(proposalBounds) + 1]uint64
	count  uint64
	sum    float64
}

// proposalBounds are the proposal latency buckets in seconds (part of the
// metrics contract).
var proposalBounds = [...]float64{250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1, 2.5}

func (h *latencyHist) observe(v float64) {
	i := 0
	for i < len(proposalBounds) && v > proposalBounds[i] {
		i++
	}
	h.counts[i]++
	h.count++
	h.sum += v
}

func (h *latencyHist) snapshot() wal.Histogram {
	out := wal.Histogram{Bounds: append(proposalBounds[:len(proposalBounds):len(proposalBounds)], math.Inf(1)),
		Counts: append([]uint64(nil), h.counts[:]...), Count: h.count, Sum: h.sum}
	return out
}
