package engine

// Replication: a durable broker whose log is a shard's replicated log.
//
// A cluster (engine/cluster) runs one broker per shard on every node. The
// broker keeps its ordinary durable backend — one WAL and one index per
// shard — and the shard's Raft log is that WAL: an entry of the Raft log is a
// run of the engine's own records followed by an entry header naming its
// index and term. There is no second log.
//
//	record kinds in a replicated shard's WAL
//	engine records (1-8)  a leader's own changes (written at once, header later),
//	                      or a received entry's records (written with their header)
//	recEntry (10)         entry header: index, term, proposal id, the position
//	                      of its first record and the end of its last, kind,
//	                      conf-change data
//	recHardState (11)     Raft's hard state (term, vote, commit)
//	recConfState (12)     the shard's Raft configuration after a conf change
//
// Roles. The leader executes operations on its in-memory state as a single
// broker does, and its backend (replStore) appends their records to the WAL
// at once and hands them to the consensus layer as a proposal (Replica). An
// operation that waits for durability (a send, delete or visibility change)
// waits until its proposal is committed: a majority holds it durably.
// Followers never execute operations (ErrNotLeader); the consensus layer
// persists the entries it receives (PersistEntries) and applies committed
// ones to their state record by record (ApplyCommitted, apply.go). A leader
// serves only once it has applied every entry before its own term's first
// (SetLeader); a leader that steps down with changes never committed in its
// state (Diverged) is closed without a checkpoint and reopened.
//
// Invariants:
//  1. A record is part of the shard's state iff it is local (a relocation)
//     or lies in the record range of the last header written for its entry
//     index and that index is committed. Recovery (load) and the
//     checkpointer fold nothing else; records of a dropped proposal or a
//     truncated entry stay in the WAL and are skipped.
//  2. Records reach the WAL in the same order as their proposals reach the
//     consensus layer (append holds mu across both), so a follower applies a
//     message's records in the order its leader made the changes.
//  3. The checkpointer folds only up to the first record whose fate is not
//     known yet (a pending proposal, or a persisted entry not committed).
//  4. A state, delete or expire record a follower persists names the
//     follower's own body location (PersistEntries rewrites it), never the
//     leader's; and it names one whenever this replica holds the message,
//     also when the message's send is persisted but not applied yet
//     (unapplied): entries are persisted and applied side by side, and a
//     record with no body location makes the fold forget the body (the
//     message is then dropped at the next start).
//  5. Message sequence numbers of a term carry the term in their top 24
//     bits (seqBase): the terms' leaders never hand out the same one.
//  6. Compaction never relocates a message that a persisted but not yet
//     applied received entry changes (named): a replica's state lags its
//     log, and a relocate record written after such a record but acting
//     on the older state would undo it — after a delete, recovery's fold
//     would bring the message back (and its slot is claimed twice); after
//     a state record naming the old body, the apply would point the
//     message at a body whose segment compaction may have removed.
//     A message is named before its record's body is looked up (under its
//     stripe lock, bodyOf, without mu: PersistEntries), and unnamed only
//     once the entry is applied or truncated away.
//  7. Compaction removes no segment holding a record of an entry the log
//     still serves (replayStart): the entries kept after a checkpoint are
//     read back from their records (Entries).
//  8. A replica's log may send a message its index holds already: after a
//     snapshot (ImportState checkpoints the snapshot's messages, and the
//     log from the snapshot's index replays their sends), also across a
//     restart. The checkpoint therefore never takes such a send and its
//     delete for a message born and dead inside its window, which would
//     leave no tombstone and the imported copy in the index: sends of a
//     seq up to the highest imported or found in the index at start-up
//     (durableStore.bornSeq) are not born.
//  9. Should a replica's index and log ever hold two live messages in one
//     slot, recovery gives the slot to the newer one (the leader sent it
//     into a slot it had free, and the later records about it name the
//     slot, as a follower's apply of the newer send does: installLocked)
//     and moves the older one.
// 10. Once a yielding leader reports Settled (Broker.Yield), it proposes
//     nothing more until the yield ends: every operation that changes
//     messages or queues is admitted (enter) before it changes anything,
//     admission is refused while yielding (ErrRetryOnLeader), and Settled
//     counts the admitted operations that have not appended their records
//     yet (inflight) beside the proposals waiting for their commit. A send
//     is not admitted; it is refused at its append instead (its messages
//     are only pending until then). Expiries are not proposed (11).
// 11. An expiry a replica makes and does not log (a follower's, a yielding
//     leader's) is proposed by it once it leads (replica_expiry.go).
//
// Owner: mu guards the proposal and entry bookkeeping; the consensus layer
// calls PersistEntries, ApplyCommitted and the role changes from one
// goroutine per shard.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smqd/smqd/index"
)

// Replica record types (payloads: replica_record.go): part of the on-disk
// format; never change.
const (
	recEntry     uint8 = 10
	recHardState uint8 = 11
	recConfState uint8 = 12
)

// entryHeaderLen is the fixed part of an entry header (replica_record.go):
//
//	index u64 | term u64 | proposal id u64 | first u64 | records end u64 | kind u8 | conf-change data
//
// The entry's records are the engine records in [first, records end) (a
// leader's records were appended before its header, maybe with later
// proposals' records between; local records there are not the entry's).
const entryHeaderLen = 8 + 8 + 8 + 8 + 8 + 1

// EntryKind says what a replicated log entry holds.
type EntryKind uint8

// Entry kinds.
const (
	EntryRecords    EntryKind = 0 // engine records (Data: a proposal id, then EncodeRecords' bytes)
	EntryConfChange EntryKind = 1 // a configuration change (Data: the consensus layer's bytes)
	EntryEmpty      EntryKind = 2 // no data (a new leader's first entry)
)

// ReplicaEntry is one entry of a shard's replicated log.
type ReplicaEntry struct {
	Index, Term uint64
	Kind        EntryKind
	Data        []byte
}

// ReplicaHardState is the consensus layer's hard state.
type ReplicaHardState struct{ Term, Vote, Commit uint64 }

// ReplicaState is what a replicated broker found in its log at open.
type ReplicaState struct {
	HardState ReplicaHardState
	// SnapIndex and SnapTerm name the entry before the oldest one the log
	// still holds (SnapshotPoint).
	SnapIndex, SnapTerm uint64
	Applied             uint64 // the last entry whose effect is in the state
	AppliedTerm         uint64
	// ConfState is the configuration recorded last (PersistConfState),
	// with the entry index it is as of.
	ConfState      []byte
	ConfStateIndex uint64
	// Entries lists the entries the log holds after SnapIndex, oldest
	// first (those after Applied are persisted, not known to be committed).
	Entries []ReplicaEntryInfo
}

// ReplicaEntryInfo names an entry of the log.
type ReplicaEntryInfo struct {
	Index, Term uint64
	Kind        EntryKind
}

// Replica is what a replicated broker needs from its consensus layer
// (engine/cluster implements it over etcd raft; the engine never imports
// the library).
type Replica interface {
	// Propose hands over a batch of records the leader just appended to its
	// log (data: a proposal id, then their encoding). It is called in
	// append order, with the appending stripe's lock held: it only queues.
	Propose(data []byte) error
}

// ErrNotLeader: this replica of the queue's shard does not take changes;
// the shard's leader does (or none is elected yet). Retryable elsewhere.
var ErrNotLeader = errors.New("engine: not the leader of this queue's shard")

// ErrRetryOnLeader is the ErrNotLeader of an operation refused before it
// changed anything: this replica does not lead its shard, or it is handing
// the lead over (Yield). Running the operation again on the shard's
// leader is safe, whatever the operation: nothing of it ran here. A bare
// ErrNotLeader (a proposal that failed at a step-down) promises no such
// thing: the change may still commit under the next leader.
var ErrRetryOnLeader = fmt.Errorf("%w (refused before it changed anything: run it on the leader)", ErrNotLeader)

// pendingProp is a leader's proposal whose fate is not known yet.
type pendingProp struct {
	id         uint64
	first, end uint64 // its records' positions in the local log
	done       chan struct{}
	err        error     // set before done is closed
	start      time.Time // when it was proposed (ReplicaStats.ProposalSeconds)
	expiries   []byte    // an expiry-only proposal's snapshots (replica_expiry.go, invariant 3)
}

// entryInfo is an entry persisted in the local log.
type entryInfo struct {
	index, term   uint64
	kind          EntryKind
	id            uint64 // proposal id (EntryRecords)
	first, recEnd uint64 // its records lie in [first, recEnd)
	end           uint64 // the end of its header
	data          []byte // EntryConfChange: the change
	applied       bool
	names         []msgKey // a received entry: the messages its state, delete and expire records name (named)
	sends         []msgKey // a received entry: the messages its records send (unapplied)
}

// hardMark is a persisted hard state and the end of its record, for the
// checkpoint's metaHardState.
type hardMark struct {
	end uint64
	hs  ReplicaHardState
}

// appliedMark is an applied entry, for the checkpoint's applied point.
type appliedMark struct{ index, term, end uint64 }

// replStore is the durable backend of a replicated broker.
type replStore struct {
	*durableStore
	rep Replica

	mu     sync.Mutex
	leader bool // guarded by mu: takes changes
	yield  bool // guarded by mu: a leader handing the lead over takes no new operation (Yield)
	// pushDrain, drainEnd (guarded by mu): a yielding leader's stopped push
	// workers may still give back (enterGiveBack), until Settled or drainEnd.
	pushDrain bool
	drainEnd  time.Time
	// inflight: admitted operations still changing state (invariant 10).
	inflight int            // guarded by mu
	term     uint64         // guarded by mu: the term it leads (seqBase)
	nextID   uint64         // guarded by mu: proposal ids
	pending  []*pendingProp // guarded by mu: in position order
	ents     []entryInfo    // guarded by mu: persisted entries after applied, by index
	void     []lostSpan     // guarded by mu: record ranges of dropped proposals and truncated entries
	applied  uint64         // guarded by mu: last entry applied
	appTerm  uint64         // guarded by mu
	marks    []appliedMark  // guarded by mu: applied entries not yet checkpointed
	pins     []uint64       // guarded by mu: exports in progress keep the entries after these (pinAfter)
	hards    []hardMark     // guarded by mu: hard states persisted since the one a checkpoint's meta holds
	conf     []byte         // guarded by mu: last conf state
	confIdx  uint64         // guarded by mu
	// Expiries made and not logged; those not kept (replica_expiry.go).
	unlogged        map[msgKey][snapLen]byte // guarded by mu
	unloggedDropped uint64                   // guarded by mu
	// unapplied: where this replica's log holds the bodies of messages
	// sent by persisted, not yet applied received entries (position,
	// size), for the records of later entries that change them
	// (invariant 4): the live state does not hold them yet.
	unapplied map[msgKey][2]uint64 // guarded by mu
	state     ReplicaState         // what load found

	// namedMu guards named: the messages that persisted, not yet applied
	// received entries change (invariant 6), with how many such records
	// name each. Taken last: nothing else is locked under it.
	namedMu sync.Mutex
	named   map[msgKey]int

	propLat    latencyHist // guarded by mu: proposal to commit
	propFailed uint64      // guarded by mu: proposals that failed (leader lost)

	// enterHook, if set (tests only, before any operation), runs in enter
	// before (admitted false) and after (true) the admission.
	enterHook func(admitted bool)

	// diverged: the live state may hold a change the log does not make —
	// a failed proposal's, or one whose records were refused because the
	// replica no longer led (Diverged). Set under mu.
	diverged atomic.Bool
}

// name records that a persisted, not yet applied entry changes the
// messages keys (invariant 6); unname forgets it again.
func (r *replStore) name(keys ...msgKey) {
	r.namedMu.Lock()
	if r.named == nil {
		r.named = map[msgKey]int{}
	}
	for _, k := range keys {
		r.named[k]++
	}
	r.namedMu.Unlock()
}

func (r *replStore) unname(keys []msgKey) {
	if len(keys) == 0 {
		return
	}
	r.namedMu.Lock()
	for _, k := range keys {
		if r.named[k]--; r.named[k] <= 0 {
			delete(r.named, k)
		}
	}
	r.namedMu.Unlock()
}

// isNamed reports whether a persisted, not yet applied entry changes the
// message (compaction leaves it where it is: invariant 6).
func (r *replStore) isNamed(qid, seq uint64) bool {
	r.namedMu.Lock()
	defer r.namedMu.Unlock()
	return r.named[msgKey{qid, seq}] > 0
}

// newReplStore wraps an opened durable backend.
func newReplStore(d *durableStore, rep Replica) *replStore {
	r := &replStore{durableStore: d, rep: rep}
	d.repl = r
	return r
}

// EncodeRecords appends the encoding of recs to dst: per record its type
// (1 byte), payload length (4, little endian) and payload (head then body).
func encodeRecords(dst []byte, recs []logRec) []byte {
	for i := range recs {
		r := &recs[i]
		dst = append(dst, r.typ)
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(r.head)+len(r.body)))
		dst = append(dst, r.head...)
		dst = append(dst, r.body...)
	}
	return dst
}

// decodeRecords splits an encoding of records.
func decodeRecords(b []byte, fn func(typ uint8, payload []byte) error) error {
	for len(b) > 0 {
		if len(b) < 5 {
			return fmt.Errorf("%w: truncated entry data", errBadRecord)
		}
		typ, n := b[0], int(binary.LittleEndian.Uint32(b[1:5]))
		if len(b) < 5+n {
			return fmt.Errorf("%w: entry data record of %d bytes, %d left", errBadRecord, n, len(b)-5)
		}
		if err := fn(typ, b[5:5+n]); err != nil {
			return err
		}
		b = b[5+n:]
	}
	return nil
}

func (r *replStore) seqBase() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.term << bootShift
}

// acceptNew refuses changes on a replica that does not lead the shard.

func (r *replStore) acceptNew() error {
	if err := r.writable(); err != nil {
		return err
	}
	return r.durableStore.acceptNew()
}

// writable is every operation's first check (Broker.usable), made before
// it changes anything: so its refusal is ErrRetryOnLeader.
func (r *replStore) writable() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.leader || r.yield {
		return ErrRetryOnLeader
	}
	return nil
}

// append appends recs to the local log and proposes them (a leader), or,
// for relocations, only appends them (local records). A follower's own
// records (an expiry its timer found) are refused with ErrNotLeader, which
// is no storage failure: its leader logs them.
func (r *replStore) append(recs []logRec) error {
	if len(recs) > 0 && isRelocateRec(recs[0].typ) {
		return r.durableStore.append(recs)
	}
	// The proposal's data, encoded before r.mu (the shard loop's applies
	// wait for it): the id goes in its first 8 bytes under it. A publish's
	// group can be MaxPublishBytes (review W: 163 ms with r.mu held for a
	// 37.5 MiB one, then uncapped).
	// Not an expiry batch: a follower's timer sends those here, to be
	// refused (ErrNotLeader) and remembered, and they are small.
	var data []byte
	if !allExpires(recs) {
		data = encodeProposal(recs)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.leader {
		// Not (or no longer) the leader: an operation that passed writable
		// just before the replica stepped down must not be acknowledged, so
		// its records are refused, not silently dropped. Its change is in
		// the live state, so the broker is rebuilt from the log (Diverged);
		// an expiry is not such a change: every replica makes it at the
		// same time, and the leader logs it.
		r.rememberLocked(recs) // its expiries: replica_expiry.go
		for i := range recs {
			recs[i].pos, recs[i].size = 0, 0
			if recs[i].typ != recExpire {
				r.diverged.Store(true)
			}
		}
		return ErrNotLeader
	}
	if r.yield && allExpires(recs) {
		return r.yieldExpiryLocked(recs) // replica_expiry.go, invariant 3
	}
	if r.yield && allSends(recs) {
		// A send that passed its first check just before the broker
		// yielded (Yield): its messages are still pending, seen by nothing
		// else, and it releases them when its append fails. Refused like
		// a new operation, it runs again on the next leader, instead of
		// being proposed during the hand-over, held, and failed at the
		// step-down (which would make the broker rebuild).
		for i := range recs {
			recs[i].pos, recs[i].size = 0, 0
		}
		return ErrRetryOnLeader
	}
	if err := r.durableStore.append(recs); err != nil {
		return err
	}
	r.nextID++
	id := r.term<<bootShift | r.nextID
	if data == nil {
		data = encodeProposal(recs)
	}
	binary.LittleEndian.PutUint64(data[:8], id)
	last := &recs[len(recs)-1]
	p := &pendingProp{id: id, first: recs[0].pos, end: last.pos + uint64(last.size), done: make(chan struct{}), start: time.Now(), expiries: expiryCopy(recs)}
	r.pending = append(r.pending, p)
	if err := r.rep.Propose(data); err != nil {
		r.resolveLocked(p, fmt.Errorf("%w: %w", ErrNotLeader, err))
	}
	return nil
}

// encodeProposal encodes recs as a proposal's data, its first 8 bytes
// left for the proposal's id.
func encodeProposal(recs []logRec) []byte {
	size := 8
	for i := range recs {
		size += 5 + len(recs[i].head) + len(recs[i].body)
	}
	return encodeRecords(make([]byte, 8, size), recs)
}

// resolveLocked settles p and removes it from pending.
func (r *replStore) resolveLocked(p *pendingProp, err error) {
	select {
	case <-p.done:
		return
	default:
	}
	p.err = err
	if err == nil {
		r.propLat.observe(time.Since(p.start).Seconds())
	} else {
		r.propFailed++
		// Before done is closed: exportFence waits on done without r.mu
		// and then reads diverged, and a snapshot holding this failed
		// change was exported when it read it first (seen once under
		// load, TestReplicaExportHoldsOnlyCommittedChanges). An expiry
		// is made by every replica: no divergence (replica_expiry.go).
		if !r.failedExpiryLocked(p) {
			r.diverged.Store(true)
		}
	}
	close(p.done)
	for i, q := range r.pending {
		if q == p {
			r.pending = append(r.pending[:i], r.pending[i+1:]...)
			break
		}
	}
	if err != nil {
		r.void = append(r.void, lostSpan{p.first, p.end})
	}
}

func (r *replStore) changeRecord(st *stripe, typ uint8, idx uint32) {
	r.durableStore.changeRecord(st, typ, idx)
}

func (r *replStore) adminRecord(typ uint8, payload []byte) error {
	recs := [1]logRec{{typ: typ, head: payload}}
	if err := r.append(recs[:]); err != nil {
		return err
	}
	return r.waitDurable(recs[0].pos)
}

func (b *Broker) repl() (*replStore, error) {
	r, ok := b.store.(*replStore)
	if !ok {
		return nil, errors.New("engine: not a replicated broker")
	}
	return r, nil
}

// ReplicaState returns what Open found in the shard's log.
//
// For engine/cluster: it needs a broker opened with Options.Replica (others
// return an error).
func (b *Broker) ReplicaState() (ReplicaState, error) {
	r, err := b.repl()
	if err != nil {
		return ReplicaState{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.state
	st.Entries = nil
	for _, e := range r.ents {
		st.Entries = append(st.Entries, ReplicaEntryInfo{e.index, e.term, e.kind})
	}
	return st, nil
}

// checkpointMeta adds the replication state to a checkpoint's batch.
func (r *replStore) checkpointMeta(to uint64, batch *index.Batch) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := 0
	for k < len(r.marks) && r.marks[k].end <= to {
		k++
	}
	if k > 0 {
		m := r.marks[k-1]
		var v [16]byte
		binary.LittleEndian.PutUint64(v[0:], m.index)
		binary.LittleEndian.PutUint64(v[8:], m.term)
		batch.PutMeta(metaApplied, v[:])
		r.marks = append(r.marks[:0], r.marks[k:]...)
		// Entries folded into the index are part of the snapshot now: keep
		// the newest keepEntries of them for followers that lag a little,
		// forget the rest.
		keep := uint64(r.opts.ReplicaKeepEntries)
		if m.index > keep {
			drop := m.index - keep
			for _, p := range r.pins {
				drop = min(drop, p) // an export in progress reads them (pinAfter)
			}
			j := sort.Search(len(r.ents), func(i int) bool { return r.ents[i].index > drop })
			if j > 0 {
				r.state.SnapIndex, r.state.SnapTerm = r.ents[j-1].index, r.ents[j-1].term
				r.ents = append(r.ents[:0], r.ents[j:]...)
			}
		}
	}
	if r.conf != nil {
		batch.PutMeta(metaConf, putConfState(r.confIdx, r.conf))
	}
	// The newest hard state the checkpoint folds past: the restart replays
	// only the log after it, and Raft's term and vote must survive
	// (scanTail takes it, then any newer record).
	h := 0
	for h < len(r.hards) && r.hards[h].end <= to {
		h++
	}
	if h > 0 {
		batch.PutMeta(metaHardState, putHardState(r.hards[h-1].hs))
		r.hards = append(r.hards[:0], r.hards[h:]...)
	}
}

// checkpointLimit is the end of what the checkpointer may fold now
// (invariant 3).
func (r *replStore) checkpointLimit(synced uint64) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	limit := synced
	for _, p := range r.pending {
		limit = min(limit, p.first)
	}
	for _, e := range r.ents {
		if !e.applied {
			limit = min(limit, e.first)
			break
		}
	}
	return limit
}

// pruneVoid forgets the void spans that end at or before to, the end of a
// checkpoint just committed: no later checkpoint reads a record there. A
// broker one of whose proposals failed keeps them all: an operation whose
// proposal failed may come to waitDurable only after a checkpoint, and
// must find its records void (such a broker has diverged, and its spans go
// with it when it is reopened). Any other broker — a follower, a leader,
// or one that stepped down with every change committed and follows on —
// has no such operation, and its spans (entries Raft truncated, gaps in
// the tail at load) would otherwise only grow.
func (r *replStore) pruneVoid(to uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.diverged.Load() {
		return
	}
	keep := r.void[:0]
	for _, v := range r.void {
		if v.to > to {
			keep = append(keep, v)
		}
	}
	clear(r.void[len(keep):])
	r.void = keep
}

// validAt reports whether the record at pos belongs to the state
// (invariant 1), at run time.
func (r *replStore) validAt(pos uint64, typ uint8) bool {
	switch typ {
	case recEntry, recHardState, recConfState:
		return false
	case recRelocate, recRelocateProps:
		return true // local (as at load: scanTail)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range r.void {
		if pos >= v.from && pos < v.to {
			return false
		}
	}
	return true
}

const (
	metaApplied   = "raft-applied"   // index u64, term u64: the last entry folded into the index
	metaConf      = "raft-conf"      // index u64, then the conf state
	metaHardState = "raft-hardstate" // the last hard state record folded past (a recHardState payload)
)

// scanTail reads the log tail [from, end) at load: the entry headers (a
// header at index i replaces every entry at or after i: Raft's
// truncation), the last hard state and configuration. It settles the
// bookkeeping (persisted entries not yet committed, the applied point) and
// returns which records the fold may take (invariant 1).
func (r *replStore) scanTail(from, end uint64) (func(pos uint64, typ uint8) bool, error) {
	var hs ReplicaHardState
	applied, appTerm := uint64(0), uint64(0)
	if v, err := r.idx.Meta(metaApplied); err != nil {
		return nil, fmt.Errorf("engine: read index metadata: %w", err)
	} else if len(v) == 16 {
		applied, appTerm = binary.LittleEndian.Uint64(v), binary.LittleEndian.Uint64(v[8:])
	}
	snapIdx, snapTerm := applied, appTerm
	if v, err := r.idx.Meta(metaHardState); err != nil {
		return nil, fmt.Errorf("engine: read index metadata: %w", err)
	} else if v != nil {
		if h, ok := parseHardState(v); ok {
			hs = h // a record in the tail below is newer
		}
	}
	if v, err := r.idx.Meta(metaConf); err != nil {
		return nil, fmt.Errorf("engine: read index metadata: %w", err)
	} else if idx, cs, ok := parseConfState(v); ok {
		r.confIdx, r.conf = idx, cs
	}
	var ents []entryInfo
	if from < end {
		err := r.readRange(from, end, func(pos uint64, size uint32, typ uint8, payload []byte) {
			switch typ {
			case recHardState:
				if v, ok := parseHardState(payload); ok {
					hs = v
				}
			case recConfState:
				if idx, cs, ok := parseConfState(payload); ok {
					r.confIdx, r.conf = idx, cs
				}
			case recEntry:
				e, ok := parseEntryHeader(payload)
				if !ok {
					return
				}
				e.end = pos + uint64(size)
				if e.index <= snapIdx {
					return // folded into the index already
				}
				k := sort.Search(len(ents), func(i int) bool { return ents[i].index >= e.index })
				ents = append(ents[:k], e)
			}
		})
		if err != nil {
			return nil, fmt.Errorf("engine: scan the replicated log: %w", err)
		}
	}
	// Committed entries are folded now; the rest wait for the consensus
	// layer to say they are committed (ApplyCommitted).
	var spans []lostSpan
	k := 0
	for k < len(ents) && ents[k].index <= applied {
		ents[k].applied = true // folded into the index, kept for followers
		k++
	}
	for k < len(ents) && ents[k].index <= hs.Commit {
		e := &ents[k]
		if e.kind == EntryConfChange && e.index > r.confIdx {
			// Committed, but the configuration recorded predates it: the
			// node stopped before the consensus layer applied it (a node
			// stopped right after its first start had its bootstrap
			// members committed and never applied, and came back with no
			// members). It and what follows are applied again, through
			// the consensus layer (PersistConfState, then ApplyCommitted).
			break
		}
		e.applied = true
		spans = append(spans, lostSpan{e.first, e.recEnd})
		applied, appTerm = e.index, e.term
		r.marks = append(r.marks, appliedMark{e.index, e.term, e.end})
		k++
	}
	// The entries not applied yet name the messages they change (invariant
	// 6), and where they hold the bodies of the messages they send
	// (invariant 4).
	sent := map[msgKey][2]uint64{}
	for i := k; i < len(ents); i++ {
		e := &ents[i]
		if e.kind != EntryRecords || e.first >= e.recEnd {
			continue
		}
		err := r.readRange(e.first, e.recEnd, func(pos uint64, size uint32, typ uint8, payload []byte) {
			switch typ {
			case recState, recDelete, recExpire, recDeadLetter: // a dead-letter record: its source
				if s, err := decodeSnap(payload); err == nil {
					e.names = append(e.names, msgKey{s.qid, s.seq})
				}
			}
			h := payload
			switch typ {
			case recDeadLetter:
				if len(h) < 2*snapLen {
					return
				}
				h = h[snapLen:] // the message it sends
			case recSend, recSendProps:
			default:
				return
			}
			if s, err := decodeSnap(h); err == nil {
				k := msgKey{s.qid, s.seq}
				sent[k] = [2]uint64{pos, uint64(size)}
				e.sends = append(e.sends, k)
			}
		})
		if err != nil {
			return nil, fmt.Errorf("engine: scan the replicated log: %w", err)
		}
		r.name(e.names...)
	}
	// The tail's records in no entry it holds (dropped proposals, truncated
	// entries) are void for this run's checkpoints too (invariant 1):
	// recovery skips them, and so must the fold of the tail into the index.
	covered := make([]lostSpan, 0, len(ents))
	for _, e := range ents {
		if e.first < e.recEnd {
			covered = append(covered, lostSpan{e.first, e.recEnd})
		}
	}
	sort.Slice(covered, func(i, j int) bool { return covered[i].from < covered[j].from })
	var void []lostSpan
	at := from
	for _, c := range covered {
		if c.from > at {
			void = append(void, lostSpan{at, c.from})
		}
		at = max(at, c.to)
	}
	if at < end {
		void = append(void, lostSpan{at, end})
	}
	r.mu.Lock()
	r.void = append(r.void, void...)
	r.ents = append(r.ents[:0], ents...)
	for k, loc := range sent {
		r.sentLocked(k, loc)
	}
	r.applied, r.appTerm = applied, appTerm
	r.state = ReplicaState{HardState: hs, SnapIndex: snapIdx, SnapTerm: snapTerm, Applied: applied, AppliedTerm: appTerm,
		ConfState: r.conf, ConfStateIndex: r.confIdx}
	r.mu.Unlock()
	sort.Slice(spans, func(i, j int) bool { return spans[i].from < spans[j].from })
	return func(pos uint64, typ uint8) bool {
		switch typ {
		case recRelocate, recRelocateProps:
			return true // local
		case recEntry, recHardState, recConfState:
			return false
		}
		i := sort.Search(len(spans), func(i int) bool { return spans[i].to > pos })
		return i < len(spans) && spans[i].from <= pos
	}, nil
}
