package engine

// Recovery: the durable backend's load (durable.go).
//
// Start-up, in order:
//  1. load the broker metadata from the index (the handle secret, the boot
//     counter, which is bumped and made durable before anything is served)
//     and the checkpoint position P;
//  2. (the log was opened by openDurable; a torn tail was cut and reported
//     there)
//  3. fold the log tail [P, end) (fold.go);
//  4. load the queues (index, overridden by the tail) and stream every
//     message of the index in (queue, seq) order, merged with the tail's
//     messages, into the stripes: each message goes back into its own stripe
//     and slot (so receipt handles issued before a restart stay valid), its
//     state derived from its times, Active ones into their lanes in seq order;
//  5. messages found expired get an expire record, so the next checkpoint
//     drops them from the index.
//
// Owner: load runs once, in Open, before the broker is returned; nothing
// else touches the broker meanwhile.

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"time"

	"github.com/smqd/smqd/index"
	"github.com/smqd/smqd/wal"
)

const (
	metaSecret  = "handle-secret"
	metaBoot    = "boot"
	metaQueueID = "queue-id-hwm" // highest queue id ever created: ids are never reused
	bootShift   = 40             // seq = boot<<40 | counter
)

// load rebuilds the broker from the index and the log tail (storage.go).
func (d *durableStore) load(b *Broker) error {
	d.b = b
	d.kick = b.compactor.kick
	if err := d.loadMeta(b); err != nil {
		return err
	}
	if err := d.recover(b); err != nil {
		return err
	}
	d.cp.kick() // fold the replayed tail into the index soon
	return nil
}

// loadMeta reads (or creates) the handle secret and bumps the boot counter.
func (d *durableStore) loadMeta(b *Broker) error {
	idx := d.idx
	batch := idx.NewBatch()
	secret, err := idx.Meta(metaSecret)
	if err != nil {
		return fmt.Errorf("engine: read index metadata: %w", err)
	}
	switch {
	case len(d.opts.HandleSecret) == len(b.secret):
		copy(b.secret[:], d.opts.HandleSecret)
		batch.PutMeta(metaSecret, b.secret[:])
	case len(secret) != len(b.secret):
		if _, err := rand.Read(b.secret[:]); err != nil {
			return fmt.Errorf("engine: generate handle key: %w", err)
		}
		batch.PutMeta(metaSecret, b.secret[:])
	default:
		copy(b.secret[:], secret)
	}
	bootVal, err := idx.Meta(metaBoot)
	if err != nil {
		return fmt.Errorf("engine: read index metadata: %w", err)
	}
	if len(bootVal) == 8 {
		d.boot = binary.LittleEndian.Uint64(bootVal)
	}
	d.boot++
	if d.boot >= 1<<(64-bootShift) {
		return fmt.Errorf("engine: boot counter exhausted")
	}
	return d.commitBoot(batch)
}

// commitBoot adds the boot counter to batch and commits it (loadMeta, and
// recover when it raises the counter).
func (d *durableStore) commitBoot(batch *index.Batch) error {
	var nb [8]byte
	binary.LittleEndian.PutUint64(nb[:], d.boot)
	batch.PutMeta(metaBoot, nb[:])
	if err := d.commit(batch); err != nil {
		return fmt.Errorf("engine: write index metadata: %w", err)
	}
	return nil
}

// foldFreeEntries: past this many entries, the fold of the replayed tail
// is dropped and its memory returned to the OS as soon as recovery is done.
const foldFreeEntries = 1 << 16

// tailResync is start-up's rewrite of the log tail (wal.Log.ResyncTail),
// run beside the replay, which only reads the same bytes.
type tailResync struct {
	done chan struct{}
	n    int64 // bytes rewritten; set before done closes
	err  error
}

func (d *durableStore) resyncTail(from uint64) *tailResync {
	t := &tailResync{done: make(chan struct{})}
	if d.opts.testNoTailResync {
		close(t.done)
		return t
	}
	go func() {
		defer close(t.done)
		t.n, t.err = d.wal.ResyncTail(wal.Pos(from))
	}()
	return t
}

// wait returns the rewrite's outcome once it is done.
func (t *tailResync) wait() (int64, error) {
	<-t.done
	return t.n, t.err
}

// recover rebuilds queues and messages from the index and the log tail.
func (d *durableStore) recover(b *Broker) error {
	start := time.Now()
	cp, _, err := d.idx.Position()
	if err != nil {
		return fmt.Errorf("engine: read checkpoint position: %w", err)
	}
	end := d.wal.WrittenEnd()
	segs := d.wal.Segments()
	if len(segs) > 0 && uint64(segs[0].Start) > cp {
		return fmt.Errorf("engine: the log starts at %d but the index checkpoint is at %d: log segments are missing", segs[0].Start, cp)
	}
	from, rs, err := d.planRepair(cp, end) // repair.go
	if err != nil {
		return err
	}
	// Compaction removes a segment only once no message's body is in it: a
	// message of the index whose body lies before the first segment lost it
	// with a segment file that went missing (checked after the rebuild).
	var head uint64
	if len(segs) > 0 && d.repl == nil {
		head = uint64(segs[0].Start)
		rs.spans = append(rs.spans, lostSpan{0, head})
	}
	// What this start reads past the checkpoint may be pages a dead
	// process's failed fsync left clean but unwritten (wal/resync.go): they
	// are written again and fsynced, beside the replay, and before the
	// first append or anything served (finishRepair below). After a clean
	// stop the range is empty or nearly so (close checkpoints).
	rt := d.resyncTail(from)
	defer rt.wait() // an error return below must not leave it running
	d.cpPos.Store(cp)
	d.bornFrom = uint64(end)

	// A replicated log: fold only the committed records (replica.go).
	var valid func(pos uint64, typ uint8) bool
	if d.repl != nil {
		if valid, err = d.repl.scanTail(from, uint64(end)); err != nil {
			return err
		}
	}

	// Fold the log tail.
	f := newFold(^uint64(0))
	var gaps *gapFinder // repair_gaps.go
	if rs.skipped {
		gaps = &gapFinder{}
	}
	r, err := d.wal.NewReader(wal.Pos(from), end)
	if err != nil {
		return fmt.Errorf("engine: replay log: %w", err)
	}
	for {
		p, typ, payload, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			r.Close()
			var ce *wal.CorruptionError
			if errors.As(err, &ce) && !ce.Skipped {
				// The log's Open verified only the newest segment: damage
				// in an older one of the tail is found here, and the
				// repair that Open's error names fixes it too.
				return fmt.Errorf("engine: replay log: %w; start with --wal-repair (Options.WAL.Repair) to skip the damaged bytes "+
					"and keep every valid record after them", err)
			}
			if errors.Is(err, wal.ErrSegmentRemoved) {
				// Compaction removes only segments that end before the
				// checkpoint: an index that needs one is older than the
				// log (put back from an older copy, or its newest
				// memtable log damaged), and the records it lacks are gone.
				return fmt.Errorf("engine: the index checkpoint is at %d, but the log past it has removed segments (%w): "+
					"the index is older than the log (lost, put back from an older copy, or its newest memtable log damaged) and the records between are gone; restore a backup", cp, err)
			}
			return fmt.Errorf("engine: replay log at %d: %w", p, err)
		}
		if valid != nil && !valid(uint64(p), uint8(typ)) {
			continue
		}
		if gaps != nil {
			gaps.note(uint64(p), uint8(typ), payload)
		}
		if err := f.apply(uint64(p), uint32(r.NextPos()-p), uint8(typ), payload); err != nil {
			r.Close()
			return fmt.Errorf("engine: replay log: %w", err)
		}
	}
	r.Close()
	if gaps != nil {
		gaps.find(rs)
	}
	// The boot counter lives in the index: an index lost (or older than the
	// log) starts it again below the boots the log's sends carry, and new
	// sends would take the seqs, MessageIds and index keys of live messages.
	if d.repl == nil {
		if mb := f.maxBoot(); mb >= d.boot {
			old := d.boot
			d.boot = mb + 1
			if err := d.commitBoot(d.idx.NewBatch()); err != nil {
				return err
			}
			b.log.Warn("the index's boot counter was behind the log's (index lost or older than the log): raised",
				"index_boot", old, "boot", d.boot)
		}
	}
	tornAt, torn := f.openGroupAt() // publish.go invariant 1
	if torn {
		b.log.Warn("dropped a publish cut short at the end of the log", "pos", tornAt)
	}

	// Queues: the index's, then the tail's changes.
	vals := map[uint64]queueVal{}
	err = d.idx.Queues(func(id uint64, val []byte) error {
		v, err := decodeQueueVal(val)
		if err != nil {
			return fmt.Errorf("queue %d: %w", id, err)
		}
		vals[id] = v
		return nil
	})
	if err != nil {
		return fmt.Errorf("engine: load queues: %w", err)
	}
	for id, fq := range f.queues {
		if fq.deleted {
			delete(vals, id)
		} else if fq.val != nil {
			v, _ := decodeQueueVal(fq.val)
			vals[id] = v
		}
	}
	hwm, err := d.idx.Meta(metaQueueID)
	if err != nil {
		return fmt.Errorf("engine: read index metadata: %w", err)
	}
	var idxMaxQueue uint64 // the highest queue id created before the checkpoint
	if len(hwm) == 8 {
		idxMaxQueue = binary.LittleEndian.Uint64(hwm)
	}
	now := b.nowMs()
	// One queue per name: a replica's log may hold a replayed create of an
	// older incarnation (a lower id) over a snapshot that held a later one
	// (apply.go applyQueue skips it at run time); the later one is live.
	byName := map[string]uint64{}
	for id, v := range vals {
		if o, ok := byName[v.name]; ok {
			if o > id {
				delete(vals, id)
				continue
			}
			delete(vals, o)
		}
		byName[v.name] = id
	}
	recreate, maxMsgQueue := d.settleQueues(rs, f, vals, cp, idxMaxQueue, now) // repair_queues.go
	if maxMsgQueue >= b.nextQueueID {
		b.nextQueueID = maxMsgQueue + 1 // never reuse the id of a message's queue
	}
	for id, v := range vals {
		q := newQueue(b, v.name, id, v.stripes, newQueueMeta(v.cfg, v.createMs, v.modifyMs))
		b.addQueueLocked(q)
		if id >= b.nextQueueID {
			b.nextQueueID = id + 1
		}
	}
	for id := range f.queues {
		if id >= b.nextQueueID {
			b.nextQueueID = id + 1
		}
	}
	if idxMaxQueue >= b.nextQueueID {
		b.nextQueueID = idxMaxQueue + 1
	}

	b.topics.mu.Lock()
	err = d.loadTopics(b, &f.ft)
	b.topics.mu.Unlock()
	if err == nil {
		err = d.loadCounts(b, &f.ft) // topic_count.go
	}
	if err != nil {
		return err
	}

	// Messages: the index's stream merged with the tail's, in (queue, seq)
	// order.
	rb := &rebuild{b: b, d: d, now: now, rs: rs, create: recreate, gaps: gaps, tailQueues: f.queues}
	tail := f.sorted()
	ti := 0
	flushTail := func(upto msgKey, inclusive bool) {
		for ; ti < len(tail); ti++ {
			if c := tail[ti].k.compare(upto); c > 0 || (c == 0 && !inclusive) {
				return
			}
			if m := f.ent(int(tail[ti].i)); !m.gone {
				rb.installTail(m.snap[:])
			}
		}
	}
	// A replica notes each queue's highest seq in the index (replica.go
	// invariant 8); the index's messages come in (queue, seq) order.
	var topQ, topSeq uint64
	if d.repl != nil {
		d.bornSeq = map[uint64]uint64{}
	}
	noteTop := func() {
		if d.bornSeq != nil && topSeq != 0 {
			d.bornSeq[topQ] = topSeq
		}
	}
	err = d.idx.Messages(func(qid, seq uint64, val []byte) error {
		if qid != topQ {
			noteTop()
		}
		topQ, topSeq = qid, seq
		k := msgKey{qid, seq}
		flushTail(k, false)
		if ti < len(tail) && tail[ti].k == k {
			// The tail's version wins.
			if m := f.ent(int(tail[ti].i)); !m.gone {
				rb.installTail(m.snap[:])
			}
			ti++
			return nil
		}
		rb.install(val)
		return nil
	})
	if err != nil {
		return fmt.Errorf("engine: load messages: %w", err)
	}
	noteTop()
	flushTail(msgKey{^uint64(0), ^uint64(0)}, true)
	rb.installLater()
	if n := rb.lostBefore(head); n > 0 {
		if !d.opts.WAL.Repair {
			return fmt.Errorf("engine: the log starts at %d, but %d messages of the index have their bodies before it: "+
				"log segments are missing; start with --wal-repair (Options.WAL.Repair) to drop the messages whose bodies are gone and report them", head, n)
		}
		rs.report.Ranges = append(rs.report.Ranges, reportRange{Start: 0, End: head, Reason: "segment files missing"})
		d.log.Warn("log segments missing before the first one", "first", head, "messages_lost", n)
	}
	inferred := 0
	if gaps != nil {
		inferred = gaps.report(b, rs)
	}
	replayed := f.n
	resynced, err := rt.wait()
	if err != nil {
		return fmt.Errorf("engine: make the log tail durable: %w", err)
	}
	if err := d.finishRepair(rs, cp); err != nil { // before any append (repair.go)
		return err
	}
	rb.finish()
	if b.usable() == nil {
		d.clearRepairPending() // the recreated queues are durable, the report written
	}
	if torn {
		// Seal the torn group (publish.go invariant 4).
		seal := [1]logRec{{typ: recPublish, head: encodePublishHead(0, 0, now, nil)}}
		if err := d.append(seal[:]); err != nil {
			b.storageFailed(err)
		}
	}
	aborted := f.aborted
	if f.nents > foldFreeEntries {
		// The fold of a long tail is garbage now; give its memory back
		// rather than carry it as resident memory for hours.
		f = nil
		debug.FreeOSMemory()
	}
	d.recovered = RecoveryStats{Messages: rb.installed, Expired: len(rb.expired), Orphans: rb.orphans, Moved: rb.moved,
		Lost: len(rb.lost) + inferred, Recreated: len(recreate), Replayed: replayed, Checkpoint: cp, LogEnd: uint64(end), Took: time.Since(start),
		AbortedPublishes: aborted, Resynced: resynced, Damaged: rs.skipped || cp > uint64(end)}
	b.log.Info("broker recovered", "dir", b.opts.Dir, "queues", len(vals), "messages", rb.installed,
		"expired", len(rb.expired), "orphans", rb.orphans, "log_records_replayed", replayed,
		"checkpoint", cp, "log_end", end, "tail_resynced_bytes", resynced, "took", time.Since(start))
	if ri := d.wal.Recovery(); ri.TornTail {
		b.log.Warn("log tail was torn and cut", "recovery", fmt.Sprintf("%+v", ri))
	}
	return nil
}

// RecoveryStats describes the last start-up of a durable broker.
type RecoveryStats struct {
	Messages   int           // messages rebuilt
	Expired    int           // messages found expired and dropped
	Orphans    int           // messages of unknown queues, skipped
	Moved      int           // messages put into another slot than recorded (their handles stop working)
	Lost       int           // messages whose bodies were in damaged or cut parts of the log (repair.go)
	Recreated  int           // queues recreated because their create record was lost (repair_queues.go)
	Replayed   int           // log records replayed after the checkpoint
	Checkpoint uint64        // the index's checkpoint position
	LogEnd     uint64        // the end of the log
	Took       time.Duration // time from opening the index to serving
	// AbortedPublishes counts publishes found cut short in the log and
	// dropped from every queue (publish.go invariant 1).
	AbortedPublishes int
	// Resynced counts the bytes past the checkpoint written again and
	// fsynced before serving (wal.Log.ResyncTail): the tail a crash left.
	Resynced int64
	// Damaged: the log lost records that the state depends on — a range a
	// repair skipped (Options.WAL.Repair), or a tail cut below what the
	// index had checkpointed — whether or not a message was lost with them
	// (a lost delete or receive is not counted in Lost). A torn tail past
	// the checkpoint, which only a crash leaves, is not damage. A cluster
	// shard does not start on such a replica unless it was repaired on
	// purpose (Options.WAL.Repair; engine/cluster/damaged.go).
	Damaged bool
}

// Recovery returns what the last start-up found (zero in memory mode).
func (b *Broker) Recovery() RecoveryStats { return b.store.recovery() }

// rebuild installs recovered messages into their stripes.
type rebuild struct {
	b         *Broker
	d         *durableStore
	rs        *repairState // what damage the log had (repair.go)
	now       int64
	installed int
	orphans   int
	moved     int
	expired   [][snapLen]byte
	lost      [][snapLen]byte // messages whose bodies are gone: delete records
	create    []queueVal      // queues recreated by the repair: create records
	last      *Queue
	later     [][snapLen]byte // messages whose slots were taken: installLater
	moving    bool            // installLater runs: a taken slot moves the message
	gaps      *gapFinder      // sends inferred lost (repair_gaps.go); nil without a skipped range
	// tailQueues: the queues the replayed tail changed; the index's
	// messages of one it deleted are dropped as the deletion says, not
	// reported one by one as orphans: after a DeleteQueue of 200,000
	// messages and a kill -9, the next start logged 200,000 warnings (30
	// MB) and orphans=200000 (recovery audit, 2026-12-06).
	tailQueues map[uint64]*foldQueue
	dropped    int  // messages of queues the tail deleted
	fromTail   bool // install: the message is the tail's (a reborn queue keeps it)
}

// installTail installs a message of the tail.
func (rb *rebuild) installTail(val []byte) {
	rb.fromTail = true
	rb.install(val)
	rb.fromTail = false
}

func (rb *rebuild) install(val []byte) {
	s, err := decodeSnap(val)
	if err != nil {
		rb.b.log.Error("skipping unreadable message in the index", "err", err)
		rb.orphans++
		return
	}
	if g := rb.gaps; g != nil && len(g.lost) > 0 {
		delete(g.lost, msgKey{s.qid, s.seq}) // repair_gaps.go invariant 2
	}
	q := rb.last
	if q == nil || q.id != s.qid {
		q = rb.b.byID[s.qid]
		rb.last = q
	}
	if fq := rb.tailQueues[s.qid]; fq != nil && (q == nil && fq.deleted || fq.reborn && !rb.fromTail) {
		rb.dropped++ // an indexed message of a queue the tail deleted (and created again: fold.go)
		return
	}
	if q == nil || int(s.stripe) >= len(q.stripes) || s.recSize == 0 {
		rb.b.log.Warn("skipping a message of no known queue", "queue_id", s.qid, "seq", s.seq, "stripe", s.stripe, "size", s.recSize)
		rb.orphans++
		return
	}
	rb.rs.maxRef = max(rb.rs.maxRef, s.bodyPos+uint64(s.recSize))
	if rb.rs.lost(s.bodyPos) {
		var e [snapLen]byte
		copy(e[:], val)
		rb.lost = append(rb.lost, e)
		rb.rs.changed = true
		rb.rs.report.LostMessages = append(rb.rs.report.LostMessages, reportedLoss{
			MessageID: rb.b.messageID(s.qid, s.seq).String(), Queue: q.name, QueueID: s.qid, BodyPos: s.bodyPos})
		return
	}
	st := &q.stripes[s.stripe]
	// The queue's wheel read the time after the rebuild did: a deadline
	// (an expiry, the end of a delay or of a visibility timeout) between
	// the two readings is due, and the wheel would refuse it.
	now := max(rb.now, st.wheel.now)
	enq := s.enqMs
	if enq+int64(s.expOff) <= now {
		var e [snapLen]byte
		copy(e[:], val)
		rb.expired = append(rb.expired, e)
		return
	}
	idx := s.slot
	if !st.slab.claim(idx) {
		// The slot is taken (only possible if the log and index disagree).
		var e [snapLen]byte
		switch {
		case rb.moving:
			// Put the message elsewhere, above every recorded slot;
			// handles issued for it stop working.
			idx = st.slab.n
			st.slab.claim(idx)
			rb.b.log.Warn("recovered message moved to another slot", "queue", q.name, "seq", s.seq)
			rb.moved++
		case rb.d.repl != nil && st.slab.at(idx).seq < s.seq:
			// A replica: the leader sent the newer message into a slot
			// it had free, and the records after it name that slot;
			// the older one moves (replica.go invariant 9).
			putSnap(e[:], q.id, s.stripe, idx, st.slab.at(idx))
			rb.evict(st, idx)
			rb.later = append(rb.later, e)
			st.slab.claim(idx)
		default:
			// Moved once every message is in (install's caller): a slot
			// taken now is no other recorded message's.
			copy(e[:], val)
			rb.later = append(rb.later, e)
			return
		}
	}
	sl := st.slab.at(idx)
	sl.seq = s.seq
	sl.bodyPos = s.bodyPos
	sl.recSize = s.recSize
	sl.visOff, sl.firstOff, sl.expOff = s.visOff, s.firstOff, s.expOff
	sl.dequeues, sl.gen = s.dequeues, s.gen
	sl.next, sl.prev, sl.tnext, sl.tprev = nilSlot, nilSlot, nilSlot, nilSlot
	rb.d.addLive(s.bodyPos, int64(s.recSize))
	visible := s.visOff == 0 || enq+int64(s.visOff) <= now // as in apply.go
	switch {
	case !visible && s.dequeues == 0:
		sl.setMeta(enq, int(s.prio), stDelayed)
		st.nDelayed++
		st.insertFutureLocked(idx)
	case !visible:
		sl.setMeta(enq, int(s.prio), stInactive)
		st.nInactive++
		st.insertFutureLocked(idx)
	default:
		sl.setMeta(enq, int(s.prio), stActive)
		if rb.d.repl == nil {
			// An Active message has no live handle, but a receive whose
			// state record a crash lost issued generation gen+1, and
			// the next receive would issue that very handle again (a
			// receive's record rides the next group commit). Start this
			// boot's generations above every earlier boot's.
			sl.gen = max(sl.gen, uint32(rb.d.boot)<<16)
		}
		st.activateLocked(idx)
	}
	rb.installed++
	if w := rb.rs.watch; w != nil {
		for _, i := range w[s.qid] {
			qs := &rb.rs.report.Queues[i]
			qs.Messages = append(qs.Messages, rb.b.messageID(s.qid, s.seq).String())
		}
	}
}

// lostBefore counts the messages lost because their bodies lie before pos.
func (rb *rebuild) lostBefore(pos uint64) int {
	n := 0
	for i := range rb.lost {
		if s, err := decodeSnap(rb.lost[i][:]); err == nil && s.bodyPos < pos {
			n++
		}
	}
	return n
}

// evict takes the message in slot i out again (its slot goes to another
// message: install).
func (rb *rebuild) evict(st *stripe, i uint32) {
	sl := st.slab.at(i)
	st.unlinkLocked(i)
	rb.d.addLive(sl.bodyPos, -int64(sl.recSize))
	st.slab.release(i)
	rb.installed--
}

// installLater installs the messages whose slots were taken, each above
// every recorded slot (so that none takes another recorded message's).
func (rb *rebuild) installLater() {
	rb.moving = true
	rb.fromTail = true // an index message of a reborn queue never got here
	defer func() { rb.fromTail = false }()
	for i := range rb.later {
		rb.install(rb.later[i][:])
	}
	rb.later = nil
}

// finish rebuilds the free sets, starts the timers and logs the expiries.
func (rb *rebuild) finish() {
	b := rb.b
	for _, q := range b.byID {
		for i := range q.stripes {
			st := &q.stripes[i]
			st.mu.Lock()
			st.slab.rebuildFree()
			st.scheduleLocked(rb.now)
			st.mu.Unlock()
		}
	}
	if len(rb.create) > 0 {
		// Recreated queues (repair_queues.go): durable before anything is
		// served, so that a crash now does not leave their messages
		// orphans again on a log that no longer shows any damage.
		recs := make([]logRec, 0, len(rb.create))
		for i := range rb.create {
			recs = append(recs, logRec{typ: recQueueCreate, head: rb.create[i].encode()})
		}
		err := rb.d.appendInPieces(recs)
		if err == nil {
			err = rb.d.sync()
		}
		if err != nil {
			b.storageFailed(err)
		}
	}
	if len(rb.expired)+len(rb.lost) > 0 {
		recs := make([]logRec, 0, len(rb.expired)+len(rb.lost))
		for i := range rb.expired {
			recs = append(recs, logRec{typ: recExpire, head: rb.expired[i][:]})
		}
		for i := range rb.lost {
			recs = append(recs, logRec{typ: recDelete, head: rb.lost[i][:]})
		}
		if r := rb.d.repl; r != nil {
			// A replica's own expire records are void (replica.go,
			// invariant 1): it logs them once it leads (replica_expiry.go).
			r.mu.Lock()
			r.rememberLocked(recs[:len(rb.expired)])
			r.mu.Unlock()
		}
		if err := rb.d.appendInPieces(recs); err != nil {
			b.storageFailed(err)
		}
	}
}

// checkpoint folds the log from the checkpoint position to its synced end
