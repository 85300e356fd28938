package engine

// The engine's seam to storage.
//
// Every message body lives in a log of records: the write-ahead log on disk
// in durable mode (Options.Dir set), an in-memory segmented log otherwise.
// The engine addresses a record by its log position and counts, per segment,
// the bytes of records that still hold a live message body; compaction
// removes segments with no live bytes and rewrites the live bodies of mostly
// dead ones (relocate records).
//
// Invariants:
//  1. A record appended with live=true has its size added to its segment's
//     live counter atomically with the append, so no segment is ever judged
//     dead while a body in it is on its way to being committed.
//  2. removeSegment removes a segment only if it is not the active one and its
//     live counter is zero at that moment (checked under the same lock as 1).
//  3. A record's position never changes; read(pos) returns exactly the payload
//     appended there, or an error (never another record's bytes).

import (
	"encoding/binary"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"unsafe"
)

// logRec is one record to append.
type logRec struct {
	typ  uint8
	head []byte // copied
	body []byte // copied after head
	live bool   // count the record's size as live in its segment
	pos  uint64 // set by append
	size uint32 // set by append: bytes the record occupies in its segment
}

// segInfo describes one segment of a log.
type segInfo struct {
	start, end uint64 // positions covered: [start, end)
	live       int64  // bytes of live body records
	active     bool   // the segment appends go to
}

// logStore is what the engine needs from a log. Implementations: memLog
// (in-memory mode and tests) and the wal-backed store (durable mode).
type logStore interface {
	// append appends recs contiguously and in order, filling pos and size.
	append(recs []logRec) error
	// waitDurable waits until the record at pos is acknowledged by the
	// store's sync mode (in-memory: at once).
	waitDurable(pos uint64) error
	// read returns the type and payload of the record at pos; size is the
	// size append reported (a read hint). The payload may alias store memory
	// or buf; the caller must not modify it.
	read(pos uint64, size uint32, buf []byte) (typ uint8, payload []byte, err error)
	// addLive adds delta to the live counter of the segment holding pos.
	addLive(pos uint64, delta int64)
	// segments appends the segments, oldest first, to dst.
	segments(dst []segInfo) []segInfo
	// scan calls fn for each record of the inactive segment starting at
	// start, in log order. It reports false (calling nothing) if the segment
	// is gone or still being written.
	scan(start uint64, fn func(pos uint64, size uint32, typ uint8, payload []byte)) (bool, error)
	// removeSegment removes the segment starting at start if it is inactive
	// and has no live bytes; it reports whether it did.
	removeSegment(start uint64) (bool, error)
	close() error
}

// errSegmentRemoved: a read raced with compaction; the caller looks the
// message up again (its body has moved).
var errSegmentRemoved = errors.New("engine: log segment removed")

// memLog is the in-memory log: fixed-capacity byte segments, append-only,
// framed as [type u8][3 zero bytes][payload length u32][payload].
//
// Owner: mu guards appends and the segment list; segment bytes below a
// segment's used mark are immutable and read without the lock (the list is
// published through an atomic pointer).
type memLog struct {
	segBytes int
	mu       sync.Mutex
	segs     []*memSeg                 // guarded by mu
	snap     atomic.Pointer[[]*memSeg] // copy of segs for lock-free lookup
	end      uint64                    // guarded by mu: position after the last record
	closed   bool                      // guarded by mu
	failNext error                     // guarded by mu: test hook, returned by the next append
}

type memSeg struct {
	start   uint64
	buf     []byte       // fixed capacity, never reallocated
	used    atomic.Int64 // bytes of buf reserved by appends
	written atomic.Int64 // bytes of buf whose copy is complete (== used when idle)
	live    atomic.Int64
}

const memRecHeader = 8

func newMemLog(segBytes int) *memLog {
	l := &memLog{segBytes: segBytes}
	l.segs = []*memSeg{{start: 0, buf: make([]byte, segBytes)}}
	l.publish()
	return l
}

func (l *memLog) publish() {
	s := append([]*memSeg(nil), l.segs...)
	l.snap.Store(&s)
}

func (l *memLog) append(recs []logRec) error {
	// Reserve space and count live bytes under the lock (invariant 1); copy
	// the bytes after releasing it.
	var segs [MaxBatch]*memSeg
	var many []*memSeg
	if len(recs) > MaxBatch {
		many = make([]*memSeg, len(recs))
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	if err := l.failNext; err != nil {
		l.failNext = nil
		l.mu.Unlock()
		return err
	}
	for i := range recs {
		r := &recs[i]
		n := memRecHeader + len(r.head) + len(r.body)
		seg := l.segs[len(l.segs)-1]
		used := int(seg.used.Load())
		if used+n > len(seg.buf) {
			c := l.segBytes
			if n > c {
				c = n
			}
			seg = &memSeg{start: l.end, buf: make([]byte, c)}
			l.segs = append(l.segs, seg)
			l.publish()
			used = 0
		}
		r.pos = seg.start + uint64(used)
		r.size = uint32(n)
		if r.live {
			seg.live.Add(int64(n))
		}
		seg.used.Store(int64(used + n))
		l.end = r.pos + uint64(n)
		if many != nil {
			many[i] = seg
		} else {
			segs[i] = seg
		}
	}
	l.mu.Unlock()
	for i := range recs {
		r := &recs[i]
		seg := segs[min(i, MaxBatch-1)]
		if many != nil {
			seg = many[i]
		}
		b := seg.buf[r.pos-seg.start : r.pos-seg.start+uint64(r.size)]
		b[0] = r.typ
		b[1], b[2], b[3] = 0, 0, 0
		binary.LittleEndian.PutUint32(b[4:8], uint32(len(r.head)+len(r.body)))
		copy(b[memRecHeader:], r.head)
		copy(b[memRecHeader+len(r.head):], r.body)
		seg.written.Add(int64(r.size))
	}
	return nil
}

func (l *memLog) waitDurable(uint64) error { return nil }

func (l *memLog) find(pos uint64) *memSeg {
	segs := *l.snap.Load()
	i := sort.Search(len(segs), func(i int) bool { return segs[i].start > pos }) - 1
	if i < 0 {
		return nil
	}
	s := segs[i]
	if pos-s.start >= uint64(s.used.Load()) {
		return nil
	}
	return s
}

func (l *memLog) read(pos uint64, _ uint32, _ []byte) (uint8, []byte, error) {
	s := l.find(pos)
	if s == nil {
		return 0, nil, errSegmentRemoved
	}
	off := pos - s.start
	b := s.buf[off:]
	n := binary.LittleEndian.Uint32(b[4:8])
	return b[0], b[memRecHeader : memRecHeader+n : memRecHeader+n], nil
}

// prefetch hints the record at pos, of size bytes, into the CPU caches.
func (l *memLog) prefetch(pos uint64, size uint32) {
	s := l.find(pos)
	if s == nil {
		return
	}
	off := pos - s.start
	n := uint64(size)
	if rest := uint64(len(s.buf)) - off; n > rest {
		n = rest
	}
	if n > 0 {
		prefetchLines(unsafe.Pointer(&s.buf[off]), uintptr(n))
	}
}

func (l *memLog) addLive(pos uint64, delta int64) {
	if s := l.find(pos); s != nil {
		s.live.Add(delta)
	}
}

func (l *memLog) segments(dst []segInfo) []segInfo {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, s := range l.segs {
		end := l.end
		if i+1 < len(l.segs) {
			end = l.segs[i+1].start
		}
		dst = append(dst, segInfo{start: s.start, end: end, live: s.live.Load(), active: i == len(l.segs)-1})
	}
	return dst
}

func (l *memLog) scan(start uint64, fn func(pos uint64, size uint32, typ uint8, payload []byte)) (bool, error) {
	s := l.find(start)
	if s == nil || s.start != start {
		return false, nil
	}
	l.mu.Lock()
	active := s == l.segs[len(l.segs)-1]
	l.mu.Unlock()
	used := s.used.Load()
	if active || s.written.Load() != used {
		return false, nil
	}
	for off := int64(0); off < used; {
		b := s.buf[off:]
		n := int64(binary.LittleEndian.Uint32(b[4:8]))
		fn(s.start+uint64(off), uint32(memRecHeader+n), b[0], b[memRecHeader:memRecHeader+n:memRecHeader+n])
		off += memRecHeader + n
	}
	return true, nil
}

func (l *memLog) removeSegment(start uint64) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, s := range l.segs {
		if s.start != start {
			continue
		}
		if i == len(l.segs)-1 || s.live.Load() != 0 {
			return false, nil
		}
		l.segs = append(l.segs[:i:i], l.segs[i+1:]...)
		l.publish()
		return true, nil
	}
	return false, nil
}

func (l *memLog) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	l.closed = true
	return nil
}

// bytes returns the memory held by segments (for tests and stats).
func (l *memLog) bytes() int64 {
	var n int64
	for _, s := range *l.snap.Load() {
		n += int64(len(s.buf))
	}
	return n
}
