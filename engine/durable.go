package engine

// Durable mode: the write-ahead log holds every body and every state change,
// the index (Badger) holds a checkpoint of the state, and start-up rebuilds
// the in-memory state from both.
//
// Data directory layout:
//
//	<Dir>/index/   the Badger store (opened first: its directory lock keeps a
//	               second process away from the whole data directory)
//	<Dir>/wal/     the log segments
//
// Start-up, in order:
//  1. open the index; load the broker metadata (the handle secret, the boot
//     counter, which is bumped and synced before anything is served) and the
//     checkpoint position P;
//  2. open the log (a torn tail is cut and reported there);
//  3. fold the log tail [P, end) (fold.go);
//  4. load the queues (index, overridden by the tail) and stream every
//     message of the index in (queue, seq) order, merged with the tail's
//     messages, into the stripes: each message goes back into its own stripe
//     and slot (so receipt handles issued before a restart stay valid), its
//     state derived from its times, Active ones into their lanes in seq order;
//  5. messages found expired get an expire record, so the next checkpoint
//     drops them from the index.
//
// Invariants:
//  1. The index never reflects a record that is not fsynced in the log: the
//     checkpointer reads only up to SyncedEnd after a Sync.
//  2. A segment is removed only when it ends at or before the checkpoint
//     position and holds no live body (compaction.go), so replay from the
//     checkpoint position always finds its records and every body it needs.
//  3. MessageIds stay unique across restarts whatever the sync mode: a
//     message's sequence number carries the boot counter in its top 24 bits.
//  4. Queue creation, attribute changes and deletion are fsynced before they
//     are acknowledged, in every sync mode.

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
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

// walStore is the log store of durable mode. The log itself makes a
// record's live-byte count atomic with its append (wal.Record.Live) and a
// segment's removal atomic with the check that it holds no live bytes
// (wal.Log.RemoveSegmentIfDead): logstore.go invariants 1 and 2.
type walStore struct {
	l       *wal.Log
	records atomic.Int64 // records appended since Open (checkpoint triggers)
}

func (w *walStore) append(recs []logRec) error {
	var arr [MaxBatch]wal.Record
	wr := arr[:0]
	if len(recs) > MaxBatch {
		wr = make([]wal.Record, 0, len(recs))
	}
	for i := range recs {
		wr = append(wr, wal.Record{Type: wal.RecordType(recs[i].typ), Head: recs[i].head, Body: recs[i].body, Live: recs[i].live})
	}
	if err := w.l.Append(wr); err != nil {
		return err
	}
	w.records.Add(int64(len(recs)))
	for i := range recs {
		recs[i].pos, recs[i].size = uint64(wr[i].Pos), uint32(wr[i].Size)
	}
	return nil
}

func (w *walStore) waitDurable(pos uint64) error { return w.l.WaitDurable(wal.Pos(pos)) }

func (w *walStore) read(pos uint64, size uint32, buf []byte) (uint8, []byte, error) {
	typ, payload, err := w.l.ReadAt(wal.Pos(pos), int(size), buf)
	if errors.Is(err, wal.ErrSegmentRemoved) {
		return 0, nil, errSegmentRemoved
	}
	return uint8(typ), payload, err
}

func (w *walStore) addLive(pos uint64, delta int64) { w.l.AddLive(wal.Pos(pos), delta) }

func (w *walStore) segments(dst []segInfo) []segInfo {
	for _, s := range w.l.Segments() {
		dst = append(dst, segInfo{start: uint64(s.Start), end: uint64(s.End), live: s.Live, active: s.Active})
	}
	return dst
}

func (w *walStore) scan(start uint64, fn func(pos uint64, size uint32, typ uint8, payload []byte)) (bool, error) {
	var seg *wal.SegmentInfo
	for _, s := range w.l.Segments() {
		if uint64(s.Start) == start {
			seg = &s
			break
		}
	}
	if seg == nil || seg.Active || seg.End > w.l.WrittenEnd() {
		return false, nil
	}
	r, err := w.l.NewReader(seg.Start, seg.End)
	if err != nil {
		return false, err
	}
	defer r.Close()
	for {
		p, typ, payload, err := r.Next()
		if err == io.EOF {
			return true, nil
		}
		if errors.Is(err, wal.ErrSegmentRemoved) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		fn(uint64(p), uint32(r.NextPos()-p), uint8(typ), payload)
	}
}

func (w *walStore) removeSegment(start uint64) (bool, error) {
	ok, err := w.l.RemoveSegmentIfDead(wal.Pos(start))
	if errors.Is(err, wal.ErrNoSegment) {
		return false, nil // already gone
	}
	return ok, err
}

func (w *walStore) close() error { return w.l.Close() }

// durableState is the part of the Broker that exists only in durable mode.
type durableState struct {
	idx    *index.Store
	wal    *wal.Log
	unlock func() // releases the data directory's lock
	boot   uint64
	// bornFrom is the log end found at start-up: the index may hold puts
	// of sends before it beyond its checkpoint position (fold.go).
	bornFrom  uint64
	recovered RecoveryStats
	cpMu      sync.Mutex    // serialises checkpoints
	fold      *fold         // guarded by cpMu: reused by every checkpoint
	cpRecords atomic.Int64  // walStore.records when the last checkpoint was taken
	cpKick    chan struct{} // asks the checkpointer to run now (capacity 1)
	cpWaitMu  sync.Mutex
	cpDone    chan struct{} // guarded by cpWaitMu: closed and replaced by each checkpoint
	cpLast    time.Time     // guarded by cpMu
}

// openDurable opens the index and the log and rebuilds the broker's state.
func (b *Broker) openDurable() error {
	o := &b.opts
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return fmt.Errorf("engine: create data directory: %w", err)
	}
	unlock, err := lockDataDir(o.Dir)
	if err != nil {
		return err
	}
	iopts := o.Index
	if iopts.Logger == nil {
		iopts.Logger = b.log
	}
	wo := o.WAL
	if wo.Logger == nil {
		wo.Logger = b.log
	}
	if wo.BufferBytes == 0 {
		// The ring caches recent bodies for receives and holds unwritten
		// data; 4 MiB covers both at several hundred MB/s (a group commit
		// writes well under 1 MiB) and keeps the process small.
		wo.BufferBytes = 4 << 20
	}
	// The index and the log are independent until the replay: open them
	// side by side (each checks its files), which shortens a restart.
	var l *wal.Log
	var walErr error
	walDone := make(chan struct{})
	go func() {
		defer close(walDone)
		l, walErr = wal.Open(filepath.Join(o.Dir, "wal"), wo)
	}()
	idx, err := index.Open(filepath.Join(o.Dir, "index"), iopts)
	<-walDone
	switch {
	case err != nil:
		if walErr == nil {
			l.Close()
		}
		unlock()
		return fmt.Errorf("engine: open index: %w", err)
	case walErr != nil:
		idx.Close()
		unlock()
		return fmt.Errorf("engine: open log: %w", walErr)
	}
	d := &durableState{idx: idx, wal: l, unlock: unlock, cpKick: make(chan struct{}, 1), cpDone: make(chan struct{})}
	b.d = d
	b.store = &walStore{l: l}
	err = b.loadMeta()
	if err == nil {
		err = b.recover()
	}
	if err != nil {
		l.Close()
		idx.Close()
		unlock()
		return err
	}
	return nil
}

// loadMeta reads (or creates) the handle secret and bumps the boot counter.
func (b *Broker) loadMeta() error {
	idx := b.d.idx
	batch := idx.NewBatch()
	secret, err := idx.Meta(metaSecret)
	if err != nil {
		return fmt.Errorf("engine: read index metadata: %w", err)
	}
	if len(secret) != len(b.secret) {
		if _, err := rand.Read(b.secret[:]); err != nil {
			return fmt.Errorf("engine: generate handle key: %w", err)
		}
		batch.PutMeta(metaSecret, b.secret[:])
	} else {
		copy(b.secret[:], secret)
	}
	bootVal, err := idx.Meta(metaBoot)
	if err != nil {
		return fmt.Errorf("engine: read index metadata: %w", err)
	}
	if len(bootVal) == 8 {
		b.d.boot = binary.LittleEndian.Uint64(bootVal)
	}
	b.d.boot++
	if b.d.boot >= 1<<(64-bootShift) {
		return fmt.Errorf("engine: boot counter exhausted")
	}
	var nb [8]byte
	binary.LittleEndian.PutUint64(nb[:], b.d.boot)
	batch.PutMeta(metaBoot, nb[:])
	if err := idx.Commit(batch); err != nil {
		return fmt.Errorf("engine: write index metadata: %w", err)
	}
	return nil
}

// recover rebuilds queues and messages from the index and the log tail.
func (b *Broker) recover() error {
	d := b.d
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
	if cp > uint64(end) {
		return fmt.Errorf("engine: the index checkpoint (%d) is beyond the end of the log (%d): the log lost data the index had", cp, end)
	}
	b.cpPos.Store(cp)
	d.bornFrom = uint64(end)

	// Fold the log tail.
	f := newFold(^uint64(0))
	r, err := d.wal.NewReader(wal.Pos(cp), end)
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
			return fmt.Errorf("engine: replay log at %d: %w", p, err)
		}
		if err := f.apply(uint64(p), uint32(r.NextPos()-p), uint8(typ), payload); err != nil {
			r.Close()
			return fmt.Errorf("engine: replay log: %w", err)
		}
	}
	r.Close()

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
	for id, v := range vals {
		q := newQueue(b, v.name, id, v.stripes, newQueueMeta(v.cfg, v.createMs, v.modifyMs))
		q.seq.Store(d.boot << bootShift)
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
	hwm, err := d.idx.Meta(metaQueueID)
	if err != nil {
		return fmt.Errorf("engine: read index metadata: %w", err)
	}
	if len(hwm) == 8 && binary.LittleEndian.Uint64(hwm) >= b.nextQueueID {
		b.nextQueueID = binary.LittleEndian.Uint64(hwm) + 1
	}

	// Messages: the index's stream merged with the tail's, in (queue, seq)
	// order.
	now := b.nowMs()
	rb := &rebuild{b: b, now: now}
	tail := f.sorted()
	ti := 0
	flushTail := func(upto msgKey, inclusive bool) {
		for ; ti < len(tail); ti++ {
			if c := tail[ti].k.compare(upto); c > 0 || (c == 0 && !inclusive) {
				return
			}
			if m := f.ent(int(tail[ti].i)); !m.gone {
				rb.install(m.snap[:])
			}
		}
	}
	err = d.idx.Messages(func(qid, seq uint64, val []byte) error {
		k := msgKey{qid, seq}
		flushTail(k, false)
		if ti < len(tail) && tail[ti].k == k {
			// The tail's version wins.
			if m := f.ent(int(tail[ti].i)); !m.gone {
				rb.install(m.snap[:])
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
	flushTail(msgKey{^uint64(0), ^uint64(0)}, true)
	replayed := f.n
	rb.finish()
	if f.nents > 1<<16 {
		// The fold of a long tail is garbage now; give its memory back
		// rather than carry it as resident memory for hours.
		f = nil
		debug.FreeOSMemory()
	}
	d.recovered = RecoveryStats{Messages: rb.installed, Expired: len(rb.expired), Orphans: rb.orphans, Moved: rb.moved,
		Replayed: replayed, Checkpoint: cp, LogEnd: uint64(end), Took: time.Since(start)}
	b.log.Info("broker recovered", "dir", b.opts.Dir, "queues", len(vals), "messages", rb.installed,
		"expired", len(rb.expired), "orphans", rb.orphans, "log_records_replayed", replayed,
		"checkpoint", cp, "log_end", end, "took", time.Since(start))
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
	Replayed   int           // log records replayed after the checkpoint
	Checkpoint uint64        // the index's checkpoint position
	LogEnd     uint64        // the end of the log
	Took       time.Duration // time from opening the index to serving
}

// Recovery returns what the last start-up found (zero in memory mode).
func (b *Broker) Recovery() RecoveryStats {
	if b.d == nil {
		return RecoveryStats{}
	}
	return b.d.recovered
}

// addQueueLocked registers q (start-up, or with adminMu held).
func (b *Broker) addQueueLocked(q *Queue) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.queues[q.name] = q
	b.byID[q.id] = q
	i := len(b.names)
	for i > 0 && b.names[i-1] > q.name {
		i--
	}
	b.names = append(b.names, "")
	copy(b.names[i+1:], b.names[i:])
	b.names[i] = q.name
}

// rebuild installs recovered messages into their stripes.
type rebuild struct {
	b         *Broker
	now       int64
	installed int
	orphans   int
	moved     int
	expired   [][snapLen]byte
	last      *Queue
}

func (rb *rebuild) install(val []byte) {
	s, err := decodeSnap(val)
	if err != nil {
		rb.b.log.Error("skipping unreadable message in the index", "err", err)
		rb.orphans++
		return
	}
	q := rb.last
	if q == nil || q.id != s.qid {
		q = rb.b.byID[s.qid]
		rb.last = q
	}
	if q == nil || int(s.stripe) >= len(q.stripes) || s.recSize == 0 {
		rb.b.log.Warn("skipping a message of no known queue", "queue_id", s.qid, "seq", s.seq, "stripe", s.stripe, "size", s.recSize)
		rb.orphans++
		return
	}
	enq := s.enqMs
	if enq+int64(s.expOff) <= rb.now {
		var e [snapLen]byte
		copy(e[:], val)
		rb.expired = append(rb.expired, e)
		return
	}
	st := &q.stripes[s.stripe]
	idx := s.slot
	if !st.slab.claim(idx) {
		// The slot is taken (only possible if the log and index disagree):
		// put the message elsewhere; handles issued for it stop working.
		idx = st.slab.n
		st.slab.claim(idx)
		rb.b.log.Warn("recovered message moved to another slot", "queue", q.name, "seq", s.seq)
		rb.moved++
	}
	sl := st.slab.at(idx)
	sl.seq = s.seq
	sl.bodyPos = s.bodyPos
	sl.recSize = s.recSize
	sl.visOff, sl.firstOff, sl.expOff = s.visOff, s.firstOff, s.expOff
	sl.dequeues, sl.gen = s.dequeues, s.gen
	sl.next, sl.prev, sl.tnext, sl.tprev = nilSlot, nilSlot, nilSlot, nilSlot
	rb.b.store.addLive(s.bodyPos, int64(s.recSize))
	visible := enq+int64(s.visOff) <= rb.now
	switch {
	case !visible && s.dequeues == 0:
		sl.setMeta(enq, int(s.prio), stDelayed)
		st.nDelayed++
		st.wheel.insert(&st.slab, idx, sl.deadline())
	case !visible:
		sl.setMeta(enq, int(s.prio), stInactive)
		st.nInactive++
		st.wheel.insert(&st.slab, idx, sl.deadline())
	default:
		sl.setMeta(enq, int(s.prio), stActive)
		st.activateLocked(idx, rb.now)
	}
	rb.installed++
}

// finish links the free lists, starts the timers and logs the expiries.
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
	if len(rb.expired) > 0 {
		recs := make([]logRec, len(rb.expired))
		for i := range rb.expired {
			recs[i] = logRec{typ: recExpire, head: rb.expired[i][:]}
		}
		if err := b.store.append(recs); err != nil {
			b.storageFailed(err)
		}
	}
}

// checkpoint folds the log from the checkpoint position to its synced end
// into the index.
func (b *Broker) checkpoint() error {
	d := b.d
	d.cpMu.Lock()
	defer d.cpMu.Unlock()
	d.cpLast = time.Now()
	if err := d.wal.Sync(); err != nil {
		return err
	}
	recsNow := b.store.(*walStore).records.Load()
	from, to := b.cpPos.Load(), uint64(d.wal.SyncedEnd())
	if to <= from {
		return nil
	}
	r, err := d.wal.NewReader(wal.Pos(from), wal.Pos(to))
	if err != nil {
		return err
	}
	defer r.Close()
	if d.fold == nil {
		d.fold = newFold(d.bornFrom)
	}
	f := d.fold
	f.reset(d.bornFrom)
	defer func() {
		// Keep the fold's memory for the next window unless this one was
		// large: a map never shrinks, and memory matters more then.
		if f.nents > 1<<12 {
			d.fold = nil
		}
	}()
	for {
		p, typ, payload, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("checkpoint: read log at %d: %w", p, err)
		}
		if err := f.apply(uint64(p), uint32(r.NextPos()-p), uint8(typ), payload); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
	}
	batch := d.idx.NewBatch()
	for id, fq := range f.queues {
		if fq.deleted {
			batch.DeleteQueue(id)
		} else if fq.val != nil {
			batch.PutQueue(id, fq.val)
		}
	}
	for i := range f.nents {
		switch m := f.ent(i); {
		case m.dead:
		case m.gone:
			batch.DeleteMessage(m.k.qid, m.k.seq)
		default:
			batch.PutMessage(m.k.qid, m.k.seq, m.snap[:])
		}
	}
	if f.maxQueue > 0 {
		var v [8]byte
		binary.LittleEndian.PutUint64(v[:], f.maxQueue)
		batch.PutMeta(metaQueueID, v[:])
	}
	batch.SetPosition(to)
	if err := d.idx.Commit(batch); err != nil {
		return fmt.Errorf("checkpoint: commit index: %w", err)
	}
	b.cpPos.Store(to)
	d.cpRecords.Store(recsNow)
	b.checkpoints.Add(1)
	d.cpWaitMu.Lock()
	close(d.cpDone)
	d.cpDone = make(chan struct{})
	d.cpWaitMu.Unlock()
	return nil
}

// waitReplayRoom holds an operation that writes to the log (send, receive,
// delete, visibility change) while more than MaxReplayBytes (or
// MaxReplayRecords) of log lie beyond the checkpoint: that bounds the log a
// restart must replay (and so the restart time) when clients outrun the
// checkpointer. In memory mode, and in the common case, it returns at
// once in the common case; no lock is held while it waits.
func (b *Broker) waitReplayRoom() error {
	d := b.d
	if d == nil {
		return nil // memory mode: nothing to replay
	}
	limit, limitRecs := uint64(b.opts.MaxReplayBytes), b.opts.MaxReplayRecords
	w := b.store.(*walStore)
	for uint64(d.wal.End())-b.cpPos.Load() > limit || w.records.Load()-d.cpRecords.Load() > limitRecs {
		d.cpWaitMu.Lock()
		done := d.cpDone
		d.cpWaitMu.Unlock()
		select {
		case d.cpKick <- struct{}{}:
		default:
		}
		b.replayWaits.Add(1)
		select {
		case <-done:
		case <-b.stop:
			return ErrClosed
		case <-time.After(time.Second):
		}
		if err := b.usable(); err != nil {
			return err
		}
	}
	return nil
}

// checkpointLoop checkpoints every CheckpointInterval, or sooner once
// CheckpointBytes of log or CheckpointRecords records have accumulated.
func (b *Broker) checkpointLoop(stop <-chan struct{}) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		case <-b.d.cpKick:
		}
		d := b.d
		d.cpMu.Lock()
		last := d.cpLast
		d.cpMu.Unlock()
		pending := uint64(d.wal.End()) - b.cpPos.Load()
		pendingRecs := b.store.(*walStore).records.Load() - d.cpRecords.Load()
		if pending == 0 || (pending < uint64(b.opts.CheckpointBytes) && pendingRecs < b.opts.CheckpointRecords &&
			time.Since(last) < b.opts.CheckpointInterval) {
			continue
		}
		if err := b.checkpoint(); err != nil && b.usable() == nil {
			// The log or the index failed: without checkpoints the log a
			// restart must replay grows without bound, so stop accepting
			// changes (reopening retries everything).
			b.log.Error("checkpoint failed", "err", err)
			b.storageFailed(fmt.Errorf("checkpoint: %w", err))
		}
	}
}

// Sync makes every change made so far durable: in durable mode it writes and
// fsyncs the log (whatever the sync mode); in memory mode it does nothing.
func (b *Broker) Sync() error {
	if err := b.usable(); err != nil {
		return err
	}
	if !b.durable {
		return nil
	}
	if err := b.d.wal.Sync(); err != nil {
		b.storageFailed(err)
		return err
	}
	return nil
}

// logQueueRecord appends a queue record and fsyncs it (invariant 4).
func (b *Broker) logQueueRecord(typ uint8, payload []byte) error {
	if !b.durable {
		return nil
	}
	recs := [1]logRec{{typ: typ, head: payload}}
	if err := b.store.append(recs[:]); err != nil {
		b.storageFailed(err)
		return err
	}
	if err := b.d.wal.Sync(); err != nil {
		b.storageFailed(err)
		return err
	}
	return nil
}

// closeDurable writes a final checkpoint and closes the log and the index.
func (b *Broker) closeDurable() error {
	var errs []error
	if b.failure.Load() == nil {
		if err := b.checkpoint(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := b.store.close(); err != nil {
		errs = append(errs, err)
	}
	if err := b.d.idx.Close(); err != nil {
		errs = append(errs, err)
	}
	b.d.unlock()
	return errors.Join(errs...)
}
