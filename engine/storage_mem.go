package engine

// The in-memory backend: bodies in a segmented in-memory log, nothing else.
//
// memStore is the storage of a broker opened without a data directory.
// Nothing survives Close, so it keeps no state records (changeRecord ignores
// them), nothing is ever replayed (replayStart is the end of time, waitRoom
// returns at once) and sync has nothing to do. Its log is memLog: fixed
// capacity byte segments, append-only, framed as
//
//	[type u8][3 zero bytes][payload length u32][payload]
//
// Body records (recBody) carry the owner's queue id (low 32 bits), stripe and
// slot, so that compaction can find the message a body belongs to, then the
// MD5 and the body (recBodyProps: and the properties before it, record.go).
//
// Invariants: those of storage.go; in particular append counts live bytes
// and reserves space under mu, and removeSegment checks "inactive and no
// live bytes" under the same mu.

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"unsafe"
)

// memStore is the in-memory backend (storage.go).
type memStore struct {
	memLog
	kick func() // kicks the broker's compactor: bodies died or were appended
}

func newMemStore(segBytes int) *memStore {
	m := &memStore{kick: func() {}}
	m.memLog.init(segBytes)
	return m
}

func (m *memStore) load(b *Broker) error {
	m.kick = b.compactor.kick
	if len(b.opts.HandleSecret) == len(b.secret) {
		copy(b.secret[:], b.opts.HandleSecret)
		return nil
	}
	if _, err := rand.Read(b.secret[:]); err != nil {
		return fmt.Errorf("engine: generate handle key: %w", err)
	}
	return nil
}

func (m *memStore) seqBase() uint64 { return 0 }

func (m *memStore) append(recs []logRec) error {
	err := m.memLog.append(recs)
	if err == nil {
		countAppended(recs) // topic_count.go invariant 4
	}
	m.kick()
	return err
}

func (m *memStore) waitDurable(uint64) error { return nil }

func (m *memStore) recordLimit() int { return math.MaxInt } // a segment grows to a record that outgrows it

func (m *memStore) read(pos uint64, _ uint32, buf []byte) (uint8, []byte, []byte, error) {
	typ, payload, err := m.memLog.read(pos)
	return typ, payload, buf, err
}

func (m *memStore) readRun(pos uint64, sizes []int, buf []byte, sink runSink) []byte {
	for i, n := range sizes {
		if typ, payload, err := m.memLog.read(pos); err == nil {
			sink.take(i, typ, payload)
		}
		pos += uint64(n)
	}
	return buf
}

func (m *memStore) bodyRecord(rec *logRec, head *[bodyHeadLen]byte, qid uint64, stripeIdx uint8, idx uint32, _ *slot, sum *[16]byte, props, body []byte, _ bool) {
	putBodyID(head[:bodyIDLen], qid, stripeIdx, idx)
	copy(head[bodyIDLen:], sum[:])
	if len(props) == 0 {
		*rec = logRec{typ: recBody, head: head[:bodyIDLen+16], body: body, live: true}
		return
	}
	*rec = logRec{typ: recBodyProps, head: putPropsHead(head[:], bodyIDLen, props), body: body, live: true}
}

// moveRecord: in memory only the body (and properties) of the message
// entering its new queue needs a record; nothing is replayed.
func (m *memStore) moveRecord(rec *logRec, _ []byte, qid uint64, stripeIdx uint8, idx uint32, s *slot, sum *[16]byte, props, body []byte) {
	var head [bodyHeadLen]byte
	m.bodyRecord(rec, &head, qid, stripeIdx, idx, s, sum, props, body, false)
	if rec.typ == recBody {
		rec.head = append([]byte(nil), rec.head...) // head was local
	}
}

func (m *memStore) changeRecord(*stripe, uint8, uint32) {}

func (m *memStore) acceptNew() error              { return nil }
func (m *memStore) diskState() (bool, bool)       { return false, false }
func (m *memStore) writable() error               { return nil }
func (m *memStore) enter() error                  { return nil }
func (m *memStore) leave()                        {}
func (m *memStore) enterLeading() (uint64, error) { return 0, nil }
func (m *memStore) leading() uint64               { return 0 }
func (m *memStore) confirmLead(uint64) error      { return nil }

func (m *memStore) adminRecord(uint8, []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	return nil
}

func (m *memStore) addLive(pos uint64, delta int64) {
	m.memLog.addLive(pos, delta)
	if delta < 0 {
		m.kick()
	}
}

func (m *memStore) replayStart() uint64 { return ^uint64(0) }
func (m *memStore) waitRoom() error     { return nil }

func (m *memStore) sync() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	return nil
}

func (m *memStore) health() error           { return nil }
func (m *memStore) stalled() error          { return nil }
func (m *memStore) resync() error           { return nil }
func (m *memStore) stats(st *StorageStats)  {}
func (m *memStore) recovery() RecoveryStats { return RecoveryStats{} }
func (m *memStore) releaseMemory()          {}
func (m *memStore) close(bool) error        { return m.memLog.close() }

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
}

type memSeg struct {
	start   uint64
	buf     []byte       // fixed capacity, never reallocated
	used    atomic.Int64 // bytes of buf reserved by appends
	written atomic.Int64 // bytes of buf whose copy is complete (== used when idle)
	live    atomic.Int64
}

const memRecHeader = 8

func (l *memLog) init(segBytes int) {
	l.segBytes = segBytes
	l.segs = []*memSeg{{start: 0, buf: make([]byte, segBytes)}}
	l.publish()
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

func (l *memLog) read(pos uint64) (uint8, []byte, error) {
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
		// Its own end, not the next segment's start: after a segment
		// between them was removed, that start lies past the hole, and a
		// segment all live looked half dead, so compaction rewrote it
		// again and again (docs audit "diskuse", 2026-12-07).
		end := s.start + uint64(s.used.Load())
		dst = append(dst, segInfo{start: s.start, end: end, live: s.live.Load(), active: i == len(l.segs)-1, held: int64(len(s.buf))})
	}
	return dst
}

func (l *memLog) scan(start, from uint64, fn func(pos uint64, size uint32, typ uint8, payload []byte) bool) (bool, error) {
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
	off := int64(0)
	if from > start && from-start <= uint64(used) {
		off = int64(from - start)
	}
	for off < used {
		b := s.buf[off:]
		n := int64(binary.LittleEndian.Uint32(b[4:8]))
		if !fn(s.start+uint64(off), uint32(memRecHeader+n), b[0], b[memRecHeader:memRecHeader+n:memRecHeader+n]) {
			break
		}
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
	l.segs = nil // nothing survives Close: let the bodies go even if the *Broker is kept
	l.publish()
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
