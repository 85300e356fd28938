package wal

// log.go owns the Log type: its fields and their guards, Append (framing
// records into the ring), the durability waits, and Close. Open and
// recovery are in recovery.go, the writer goroutine in writer.go, reads in
// reader.go.

import (
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

const osCreateRW = os.O_CREATE | os.O_EXCL | os.O_RDWR

// Modes of what the log creates: the log holds message bodies, so its files
// are readable by the owner only. A directory that already exists keeps its
// mode, and so does a file created by an older version (recycling keeps a
// file's mode too).
const (
	filePerm os.FileMode = 0o600 // segment, spare and hole files
	dirPerm  os.FileMode = 0o700 // the log directory and missing parents
)

// Record is one record to append. Append copies Head and Body (payload =
// Head||Body) and fills Pos and Size.
type Record struct {
	Type RecordType
	Head []byte // small header bytes, copied
	Body []byte // body bytes, copied after Head
	// Live adds the record's framed size to its segment's live counter
	// (see AddLive) as part of the append, atomically with respect to
	// RemoveSegmentIfDead.
	Live bool
	Pos  Pos // set by Append: where the record was placed
	Size int // set by Append: framed size on disk (after compression and padding)
}

// Log is a segmented write-ahead log. All methods are safe for concurrent use.
type Log struct {
	dir  string
	fs   FS
	opts Options // with defaults applied
	log  *slog.Logger

	maxPayload  int  // min(MaxPayload, SegmentBytes-12)
	deferWrites bool // Options.DeferWrites, in SyncAlways

	// ring holds the most recent log bytes; see ring.go for who may touch
	// which part of it.
	ring ring

	// mu guards the fields in it, the ring bytes at and after End, and
	// replacing the segment list. Appenders take it exclusively, ring
	// readers shared.
	mu struct {
		sync.RWMutex
		end     Pos    // position after the last appended record
		records uint64 // records appended since Open (for batch sizes)
		closed  bool   // Close was called
		stalled int    // appenders waiting in spaceCond for ring room
		large   bool   // a batch larger than the ring is being appended (appendLarge)
		openEnd Pos    // End at Open: the ring holds nothing before it
	}
	// spaceCond (L = &mu) wakes appenders when WrittenEnd advances.
	spaceCond *sync.Cond

	endPos  atomic.Uint64 // mirror of mu.end for lock-free End()
	written atomic.Uint64 // WrittenEnd; only the writer stores
	synced  atomic.Uint64 // SyncedEnd; only the writer stores
	// syncWant asks the writer to fsync up to here (Sync and Close).
	syncWant atomic.Uint64
	// fail is the sticky error, set once by the writer.
	fail atomic.Pointer[failure]
	// resynced: Resync made the failed log's unsynced bytes durable (resync.go).
	resynced atomic.Bool
	// stall is set by the writer while a roll has no segment file (nil
	// otherwise); retryable, see writer.go.
	stall  atomic.Pointer[stallState]
	closed atomic.Bool // mirror of mu.closed for lock-free checks

	// ack wakes WaitDurable and Sync; the writer stores written/synced,
	// then takes and releases ack, then broadcasts.
	ack struct {
		sync.Mutex
		written sync.Cond // broadcast when written advances (interval, none; always while writtenWaiters > 0)
		synced  sync.Cond // broadcast when synced advances
	}
	// writtenWaiters counts WaitWritten callers waiting: in SyncAlways the
	// writer announces writes only to them (every other waiter waits for
	// the fsync).
	writtenWaiters atomic.Int32

	// segs is the copy-on-write list of live segments (segment.go).
	segs atomic.Pointer[segList]
	// removeMu serializes the file operations of RemoveSegment.
	removeMu sync.Mutex
	// holes are the starts of the hole markers in the directory, in
	// position order; guarded by removeMu (segment.go, pruneHoles).
	holes []Pos
	// removing counts segments out of the list whose files RemoveSegment
	// has not unlinked yet: while any is, the list does not show every
	// segment file on disk, and no hole marker is pruned.
	removing atomic.Int32
	// keepHoles is set, under removeMu, when a removal's file operations
	// failed: its file may still be on disk, so markers are pruned no
	// more (until the next start: Open deletes the leading ones, the
	// first removal after it the others).
	keepHoles bool

	// Writer goroutine plumbing (writer.go).
	kick       chan struct{} // cap 1: there is work
	stop       chan struct{} // closed by Close
	writerDone chan struct{}
	w          writerState // owned by the writer goroutine

	// Spare-segment goroutine plumbing (writer.go).
	spares chan spareFile
	// spareErr is the spare goroutine's current failure (nil when its last
	// attempt succeeded); only the spare goroutine stores it.
	spareErr atomic.Pointer[spareError]
	// spareNote (cap 1) tells a writer waiting at a roll that the spare
	// goroutine's attempt failed.
	spareNote chan struct{}
	// recycled holds removed segment files renamed to spares (segment.go),
	// handed out by the spare goroutine before it makes a new file.
	recycled struct {
		sync.Mutex
		names []string
		seq   int
	}
	spareStop chan struct{}
	spareDone chan struct{}

	scratch  sync.Pool // *appendScratch for compression
	recovery RecoveryInfo
	stats    counters
}

// appendScratch holds the compressed payloads of one Append call.
type appendScratch struct {
	cat  []byte      // head||body of the record being compressed
	out  []byte      // compressed payloads, back to back
	comp []compShape // per record: where its compressed form is, if any
}

type compShape struct {
	off, n int  // compressed payload is out[off:off+n]
	ok     bool // the record is stored compressed
}

// End returns the position after the last appended record.
func (l *Log) End() Pos { return Pos(l.endPos.Load()) }

// WrittenEnd returns the position before which everything has been written
// to the segment files.
func (l *Log) WrittenEnd() Pos { return Pos(l.written.Load()) }

// SyncedEnd returns the position before which everything has been fdatasync'ed.
func (l *Log) SyncedEnd() Pos { return Pos(l.synced.Load()) }

// Dir returns the log's directory.
func (l *Log) Dir() string { return l.dir }

// MaxRecord returns the largest payload (head and body) one record may
// carry: it must fit a segment, and, framed, the ring that Append writes it
// through (compression, which may shrink a record, is not counted on).
func (l *Log) MaxRecord() int {
	return min(l.maxPayload, (l.ring.size()&^(recordAlign-1))-headerSize)
}

// Options returns the options in effect (defaults applied).
func (l *Log) Options() Options { return l.opts }

// Append appends recs contiguously and in order, fills in their Pos and
// Size, and returns without waiting for I/O. It blocks only while the ring
// lacks room for the unwritten bytes (back-pressure). Each record must fit
// in the ring; a batch larger than it is framed one record at a time while
// other appenders wait (invariant 12). After a write or fsync failure it
// returns the sticky error.
func (l *Log) Append(recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	// Validate and compress outside the lock. The scratch (pooled) is taken
	// only when some record is large enough to try compression, so the
	// common small-record path allocates nothing.
	var sc *appendScratch
	total, payload := 0, 0
	for i := range recs {
		r := &recs[i]
		n := len(r.Head) + len(r.Body)
		switch {
		case r.Type == 0:
			return ErrInvalidType
		case n > l.maxPayload:
			return fmt.Errorf("%w: payload %d bytes, limit %d", ErrRecordTooLarge, n, l.maxPayload)
		}
		payload += n
		if l.opts.CompressMinBytes >= 0 && n >= l.opts.CompressMinBytes && n > 0 {
			if sc == nil {
				sc = l.getScratch(len(recs))
			}
			if sc.compress(i, r.Head, r.Body) {
				n = sc.comp[i].n
			}
		}
		total += framedSize(n)
	}
	defer l.putScratch(sc)
	if total > l.ring.size() {
		if err := l.appendLarge(recs, sc); err != nil {
			return err
		}
		l.stats.records.Add(uint64(len(recs)))
		l.stats.payloadBytes.Add(uint64(payload))
		l.stats.bytes.Add(uint64(total))
		return nil
	}

	// Under the lock: wait for room, assign positions in order (invariant
	// 3), frame into the ring. The checksum is computed here because it is
	// seeded with the position, which is known only now; xxhash runs at
	// many GB/s, so this costs less than the copy.
	l.mu.Lock()
	if err := l.waitRoomLocked(total, false); err != nil {
		l.mu.Unlock()
		return err
	}
	for i := range recs {
		l.frameLocked(&recs[i], sc, i)
	}
	l.mu.records += uint64(len(recs))
	l.endPos.Store(uint64(l.mu.end))
	unwritten := uint64(l.mu.end) - l.written.Load()
	l.mu.Unlock()

	// Wake the writer, unless its writes are deferred (Options.DeferWrites)
	// and the ring has room to spare. The channel has room for one token:
	// if one is already there, the writer will see these records on its
	// next pass.
	if !l.deferWrites || unwritten >= uint64(l.ring.size()/4) {
		l.kickWriter()
	}
	l.stats.records.Add(uint64(len(recs)))
	l.stats.payloadBytes.Add(uint64(payload))
	l.stats.bytes.Add(uint64(total))
	return nil
}

// appendLarge appends a batch larger than the ring (invariant 12): one
// record at a time, each once the writer has made room for it, while every
// other appender waits (mu.large), so the batch stays contiguous. An error
// between two records leaves the records framed so far in the log, as a
// crash in the middle of a write leaves a prefix of one: the caller takes
// the batch as not appended (their Pos and Size are reset). What they
// added to their segments' live bytes is taken back.
func (l *Log) appendLarge(recs []Record, sc *appendScratch) error {
	for i := range recs {
		if f := framedSize(l.payloadLen(&recs[i], sc, i)); f > l.ring.size() {
			return fmt.Errorf("%w: a record of %d framed bytes exceeds the %d-byte buffer", ErrRecordTooLarge, f, l.ring.size())
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range recs {
		framed := framedSize(l.payloadLen(&recs[i], sc, i))
		if err := l.waitRoomLocked(framed, i > 0); err != nil {
			sl := l.segs.Load()
			for j := range i {
				if r := &recs[j]; r.Live {
					if seg := sl.find(r.Pos); seg != nil {
						seg.live.Add(-int64(r.Size))
					}
				}
				recs[j].Pos, recs[j].Size = 0, 0
			}
			if i > 0 {
				l.mu.large = false
				l.spaceCond.Broadcast()
			}
			return err
		}
		l.mu.large = true // from the first record on: the others wait
		l.frameLocked(&recs[i], sc, i)
		l.mu.records++
		l.endPos.Store(uint64(l.mu.end))
		if uint64(l.mu.end)-l.written.Load() >= uint64(l.ring.size()/4) {
			l.kickWriter() // write behind the framing, not only once the ring is full
		}
	}
	l.mu.large = false
	l.spaceCond.Broadcast() // the appenders that waited for it
	l.kickWriter()
	return nil
}

// payloadLen is the length of record i of a batch as it is framed
// (compressed or not; frameLocked).
func (l *Log) payloadLen(r *Record, sc *appendScratch, i int) int {
	if sc != nil && sc.comp[i].ok {
		return sc.comp[i].n
	}
	return len(r.Head) + len(r.Body)
}

// waitRoomLocked blocks until total more bytes fit in the ring without
// overwriting unwritten bytes (invariant 5), and no larger batch than the
// ring is being appended by another appender (invariant 12: large says the
// caller is that appender), or the log fails or closes.
func (l *Log) waitRoomLocked(total int, large bool) error {
	stalled := false
	for {
		switch {
		case l.mu.closed:
			return ErrClosed
		case l.fail.Load() != nil:
			return l.fail.Load()
		}
		if (large || !l.mu.large) && uint64(l.mu.end)+uint64(total)-l.written.Load() <= uint64(l.ring.size()) {
			return nil
		}
		// No room, and none will come while the writer is stalled on a
		// roll: fail instead of blocking (retryable).
		if st := l.stall.Load(); st != nil {
			return st.err
		}
		if !stalled {
			stalled = true
			l.stats.stalls.Add(1)
		}
		l.kickWriter() // the room comes from the writer (DeferWrites: it may not know)
		l.mu.stalled++
		l.spaceCond.Wait()
		l.mu.stalled--
	}
}

// frameLocked places r at the end of the log (rolling to a new segment if it
// does not fit in the active one) and frames it into the ring.
func (l *Log) frameLocked(r *Record, sc *appendScratch, i int) {
	a, b, flags := r.Head, r.Body, uint8(0)
	if sc != nil && sc.comp[i].ok {
		c := sc.comp[i]
		a, b, flags = sc.out[c.off:c.off+c.n], nil, flagCompressed
		l.stats.compressed.Add(1)
	}
	n := len(a) + len(b)
	framed := framedSize(n)
	p := l.mu.end
	// Invariant 1: a record that does not fit in what is left of the active
	// segment starts a new one at exactly p (positions stay dense).
	active := l.segs.Load().last()
	if int64(p-active.start)+int64(framed) > active.capacity {
		l.rollLocked(p)
	}
	// Header on the stack, checksum over pos||header[0:8]||payload, then
	// header, payload and zero padding into the ring (which is reused, so
	// the padding must be written explicitly).
	var h [headerSize]byte
	putHeader(h[:], n, r.Type, flags)
	sum := recordChecksum(p, h[:], a, b)
	h[8], h[9], h[10], h[11] = byte(sum), byte(sum>>8), byte(sum>>16), byte(sum>>24)
	l.ring.write(p, h[:])
	l.ring.write(p+headerSize, a)
	l.ring.write(p+headerSize+Pos(len(a)), b)
	if pad := framed - headerSize - n; pad > 0 {
		l.ring.zero(p+Pos(headerSize+n), pad)
	}
	r.Pos, r.Size = p, framed
	l.mu.end = p + Pos(framed)
	if r.Live {
		l.segs.Load().last().live.Add(int64(framed))
	}
}

// rollLocked ends the active segment at p and publishes a new active segment
// starting at p. Its file is created by the writer when it gets there.
func (l *Log) rollLocked(p Pos) {
	sl := l.segs.Load()
	sl.last().end.Store(uint64(p))
	ns := &segment{start: p, capacity: l.opts.SegmentBytes}
	ns.end.Store(openEnded)
	segs := make([]*segment, len(sl.segs), len(sl.segs)+1)
	copy(segs, sl.segs)
	l.segs.Store(&segList{segs: append(segs, ns)})
}

func (l *Log) getScratch(n int) *appendScratch {
	sc, _ := l.scratch.Get().(*appendScratch)
	if sc == nil {
		sc = &appendScratch{}
	}
	if cap(sc.comp) < n {
		sc.comp = make([]compShape, n)
	}
	sc.comp = sc.comp[:n]
	clear(sc.comp)
	sc.out = sc.out[:0]
	return sc
}

func (l *Log) putScratch(sc *appendScratch) {
	if sc == nil {
		return
	}
	if cap(sc.out) > 4<<20 || cap(sc.cat) > 4<<20 {
		return // let a rare huge batch's buffers go
	}
	l.scratch.Put(sc)
}

// compress tries s2 on record i's payload and records the result.
func (sc *appendScratch) compress(i int, head, body []byte) bool {
	src := body
	if len(head) > 0 {
		sc.cat = append(append(sc.cat[:0], head...), body...)
		src = sc.cat
	}
	off := len(sc.out)
	need := off + s2MaxEncodedLen(len(src))
	if cap(sc.out) < need {
		grown := make([]byte, off, max(need, 2*cap(sc.out)))
		copy(grown, sc.out)
		sc.out = grown
	}
	enc, ok := compressInto(sc.out[off:need], src)
	if !ok {
		return false
	}
	sc.out = sc.out[:off+len(enc)]
	sc.comp[i] = compShape{off: off, n: len(enc), ok: true}
	return true
}

// WaitDurable returns when the record at p and everything before it is
// acknowledged per Options.Sync: fsynced (SyncAlways) or written (the other
// modes). It returns the sticky error if the write or fsync covering p failed.
// While the writer is stalled on a roll (no segment file could be prepared)
// it returns, for a p at or after the stalled segment, an error wrapping
// ErrSpareFailed (retryable): the record is not durable now, but it stays
// queued in order and is written once a segment file can be made (or lost
// at a crash or Close before that), so its outcome is unknown, not failed.
func (l *Log) WaitDurable(p Pos) error {
	if l.closed.Load() {
		return ErrClosed
	}
	if l.opts.Sync == SyncAlways {
		// Ask for the fsync: records nobody waits for (receives, deletes)
		// ride the next one instead of each costing one (writer.go).
		l.wantSync(uint64(p) + 1)
		return l.waitFor(&l.synced, &l.ack.synced, p)
	}
	return l.waitFor(&l.written, &l.ack.written, p)
}

// kickWriter wakes the writer: everything appended is to be written. The
// channel has room for one token: if one is already there, the writer
// will see everything on its next pass.
func (l *Log) kickWriter() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// WaitWritten returns when the record at p and everything before it is
// written to its segment file (not necessarily fsynced), whatever the
// SyncMode; errors as WaitDurable. A Reader may then read up to there.
func (l *Log) WaitWritten(p Pos) error {
	if l.closed.Load() {
		return ErrClosed
	}
	if l.written.Load() > uint64(p) {
		return nil
	}
	if l.deferWrites {
		l.kickWriter()
	}
	// Counted before waitFor looks at written, while the writer stores
	// written before it looks at the count: one of the two sees the other.
	l.writtenWaiters.Add(1)
	defer l.writtenWaiters.Add(-1)
	return l.waitFor(&l.written, &l.ack.written, p)
}

// wantSync asks the writer to fsync at least up to end and wakes it.
func (l *Log) wantSync(end uint64) {
	for {
		w := l.syncWant.Load()
		if w >= end || l.syncWant.CompareAndSwap(w, end) {
			break
		}
	}
	l.kickWriter()
}

// waitFor blocks until *v > p (a record at p is covered once the end passed
// it, since ends are record boundaries).
func (l *Log) waitFor(v *atomic.Uint64, c *sync.Cond, p Pos) error {
	if v.Load() > uint64(p) {
		return nil
	}
	if uint64(p) >= l.endPos.Load() {
		return fmt.Errorf("%w: wait for %d, end is %d", ErrOutOfRange, p, l.End())
	}
	l.ack.Lock()
	defer l.ack.Unlock()
	for v.Load() <= uint64(p) {
		if f := l.fail.Load(); f != nil {
			return f
		}
		if st := l.stall.Load(); st != nil && p >= st.at {
			return st.err
		}
		if l.writerExited() {
			return ErrClosed
		}
		c.Wait()
	}
	return nil
}

// writerExited reports whether the writer goroutine is gone.
func (l *Log) writerExited() bool {
	select {
	case <-l.writerDone:
		return true
	default:
		return false
	}
}

// Sync writes and fsyncs everything appended so far and waits for it,
// whatever the SyncMode.
func (l *Log) Sync() error {
	if l.closed.Load() {
		return ErrClosed
	}
	if f := l.fail.Load(); f != nil {
		return f
	}
	end := l.endPos.Load()
	if end == 0 || l.synced.Load() >= end {
		return nil
	}
	l.wantSync(end)
	return l.waitFor(&l.synced, &l.ack.synced, Pos(end-1))
}

// Recovery returns what Open found and did.
func (l *Log) Recovery() RecoveryInfo { return l.recovery }

// Stalled returns, while a roll waits for a segment file that cannot be
// prepared, an error wrapping ErrSpareFailed (plus ErrNoSpace when the cause
// is lack of space): a record appended now is not durable until one can be
// made. Nil otherwise, even while the next spare is failing but the
// current segment still has room (Health reports that too).
func (l *Log) Stalled() error {
	if st := l.stall.Load(); st != nil {
		return st.err
	}
	return nil
}

// Health reports whether the log can make appends durable:
//   - nil: it can;
//   - the sticky failure (errors.Is(err, ErrFailed), and the cause) after a
//     failed write or fsync: the log must be reopened;
//   - an error wrapping ErrSpareFailed (plus ErrNoSpace when the cause is
//     lack of space) and the cause, while the next segment file cannot be
//     prepared, whether or not a roll already waits for it; it clears by
//     itself once a spare is made (the spare goroutine retries);
//   - ErrClosed after Close.
func (l *Log) Health() error {
	if f := l.fail.Load(); f != nil {
		return f
	}
	if l.closed.Load() {
		return ErrClosed
	}
	if st := l.stall.Load(); st != nil {
		return st.err
	}
	if se := l.spareErr.Load(); se != nil {
		return se
	}
	return nil
}

// FreeBytes returns the free bytes of the file system holding the log (see
// FS.FreeBytes), for the engine's free-space guard.
func (l *Log) FreeBytes() (int64, error) { return l.fs.FreeBytes(l.dir) }

// Close stops the writer after it wrote and fsynced everything appended,
// stops the spare goroutine and releases the files. It returns the sticky
// error if the log had failed, and an error wrapping ErrSpareFailed if
// appended records could not be written because no segment file could be
// made (the writer tries once more to make one itself). A second Close
// returns ErrClosed; so does every later call.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	l.mu.closed = true
	l.closed.Store(true)
	l.mu.Unlock()
	l.spaceCond.Broadcast()

	// The writer sees stop, writes and fsyncs what is left, and exits; only
	// then may the spare goroutine stop (a final roll may need a spare).
	start := time.Now()
	close(l.stop)
	<-l.writerDone
	close(l.spareStop)
	<-l.spareDone
	l.wakeWaiters()

	l.mu.Lock()
	sl := l.segs.Load()
	l.mu.Unlock()
	// Drop the list's references; files still used by an in-flight read
	// close when that read finishes.
	for _, s := range sl.segs {
		if sf := s.file.Load(); sf != nil {
			sf.unref()
		}
	}
	if f := l.fail.Load(); f != nil {
		return f
	}
	if st := l.stall.Load(); st != nil && l.WrittenEnd() < l.End() {
		return fmt.Errorf("wal: closed with %d appended bytes from pos %d unwritten: %w",
			l.End()-l.WrittenEnd(), l.WrittenEnd(), st.err)
	}
	l.log.Info("wal closed", "dir", l.dir, "end", l.End(), "took", time.Since(start))
	return nil
}

// wakeWaiters wakes every WaitDurable/Sync waiter so it rechecks.
func (l *Log) wakeWaiters() {
	l.ack.Lock()
	//lint:ignore SA2001 an empty section orders the stores before the broadcast
	l.ack.Unlock()
	l.ack.written.Broadcast()
	l.ack.synced.Broadcast()
}
