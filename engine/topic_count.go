package engine

// A topic's MessageCount across restarts and snapshots. A topic counts its
// publishes of the last TopicRetention in five-minute buckets
// (countWindow); the live window counts them as they are made, and this
// file keeps them in the index, so that a restart, or a member that
// installs a snapshot, shows the count the broker showed.
//
// The checkpoint folds each committed publish (its header's topic and
// time, publish.go) and adds it to the topic's counts in the index ('c'
// key space). Adding is not idempotent, and the index's data part may land
// without its position (index invariant 2: a crash between the two parts
// folds the window again). So a topic's stored counts carry upto, one past
// the position of the last publish they count, and a fold adds only the
// publishes at or past it.
//
// A snapshot carries each topic's counts as a recTopicCount record (a
// local record: never in a replicated entry). It replaces the topic's
// counts; publishes folded after it add to them. In a snapshot stream the
// record's upto field is the Raft index its counts are as of (0: not
// said); in the index and the log it is a position, as above.
//
// A snapshot's counts must be those of its index S, since the member
// that installs it replays the log from S on and counts each publish of
// it (applyTopicRecord). The exporter's live counts go further (its state
// is newer than S), so ExportStateAt takes out the publishes of its
// entries after S that its counts hold: those whose header lies before
// the window's upto. That needs the window to hold exactly the publishes
// whose headers lie before its upto, which invariant 4 gives.
//
// Invariants:
//  1. A publish is counted once in the index: a fold adds the publishes of
//     a topic at or past its stored upto, and stores upto past the last.
//  2. Only a committed publish group counts (publish.go invariant 1): one
//     cut short by a crash was never acknowledged.
//  3. Recovery shows the index's counts plus the log tail's publishes at
//     or past upto, as the next checkpoint will store them.
//  4. A live window counts exactly the publishes whose headers lie in the
//     local log before its upto, each once, and (on a replica) only
//     those of entries it holds or made: a publish counts when its header
//     is appended (countAppended, under the append's lock, so in log
//     order on a replicated broker, whose appends hold replStore.mu) or
//     applied (in log order), never before its append, which may fail.
//  5. ExportStateAt(S) writes counts that hold each publish of an entry
//     up to S and none after: the live counts less the publishes of the
//     entries after S whose headers lie before upto.
//
// What is not exact: ExportState (no index) reads the live counts, which
// may hold publishes after the snapshot's index; an importer replays
// those from the log and counts them again. A member of an earlier
// version asks for a snapshot so.

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"time"
)

// recTopicCount is a topic's counts in a snapshot stream (snapshot.go).
// Part of the on-disk format; never change.
const recTopicCount uint8 = 37

// countWindow counts events in five-minute buckets over TopicRetention.
// Its buckets are allocated at the first event: a topic never published
// to costs a pointer, not 4.6 KB (BenchmarkManyTopics).
type countWindow struct {
	mu      sync.Mutex
	buckets *[countBuckets]countBucket // guarded by mu; nil until the first event
	upto    uint64                     // guarded by mu: one past the last publish header counted (topic_count.go invariant 4)
}

const (
	countBucketMs = 5 * 60 * 1000
	countBuckets  = int64(TopicRetention / (countBucketMs * time.Millisecond))
)

// slot returns the bucket of number k (ms / 5 min), allocating the
// buckets if need be. The caller holds w.mu.
func (w *countWindow) slot(k int64) *countBucket {
	if w.buckets == nil {
		w.buckets = new([countBuckets]countBucket)
	}
	return &w.buckets[k%countBuckets]
}

func (w *countWindow) add(nowMs int64) {
	w.mu.Lock()
	w.addLocked(nowMs)
	w.mu.Unlock()
}

func (w *countWindow) addLocked(nowMs int64) {
	k := nowMs / countBucketMs
	b := w.slot(k)
	if b.at != k {
		b.at, b.n = k, 0
	}
	b.n++
}

func (w *countWindow) total(nowMs int64) int64 {
	var n int64
	for _, b := range w.live(nowMs) {
		n += b.n
	}
	return n
}

// countBucket is one five-minute bucket of a countWindow.
type countBucket struct{ at, n int64 }

// countVal is a topic's stored counts.
type countVal struct {
	upto    uint64 // one past the position of the last publish counted
	buckets []countBucket
}

func (v countVal) encode(id uint64) []byte {
	le := binary.LittleEndian
	b := make([]byte, 0, 20+16*len(v.buckets))
	b = le.AppendUint64(b, id)
	b = le.AppendUint64(b, v.upto)
	b = le.AppendUint32(b, uint32(len(v.buckets)))
	for _, c := range v.buckets {
		b = le.AppendUint64(b, uint64(c.at))
		b = le.AppendUint64(b, uint64(c.n))
	}
	return b
}

func decodeCountVal(b []byte) (id uint64, v countVal, err error) {
	le := binary.LittleEndian
	if len(b) < 20 {
		return 0, v, fmt.Errorf("%w: topic counts of %d bytes", errBadRecord, len(b))
	}
	n := int(le.Uint32(b[16:]))
	if int64(n) > countBuckets || len(b) != 20+16*n {
		return 0, v, fmt.Errorf("%w: topic counts of %d buckets in %d bytes", errBadRecord, n, len(b))
	}
	id, v.upto = le.Uint64(b), le.Uint64(b[8:])
	v.buckets = make([]countBucket, n)
	for i := range v.buckets {
		o := 20 + 16*i
		v.buckets[i] = countBucket{int64(le.Uint64(b[o:])), int64(le.Uint64(b[o+8:]))}
	}
	return id, v, nil
}

// live returns w's buckets within the retention at nowMs.
func (w *countWindow) live(nowMs int64) []countBucket {
	out, _ := w.liveUpto(nowMs)
	return out
}

// liveUpto returns w's buckets within the retention at nowMs and its upto
// (invariant 4), read together.
func (w *countWindow) liveUpto(nowMs int64) ([]countBucket, uint64) {
	k := nowMs / countBucketMs
	var out []countBucket
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.buckets != nil {
		for _, b := range w.buckets {
			if b.n > 0 && b.at > k-countBuckets && b.at <= k {
				out = append(out, b)
			}
		}
	}
	return out, w.upto
}

// addAt counts a publish made at ms whose header lies at pos in the
// local log (invariant 4).
func (w *countWindow) addAt(ms int64, pos uint64) {
	w.mu.Lock()
	w.addLocked(ms)
	w.upto = max(w.upto, pos+1)
	w.mu.Unlock()
}

// addBuckets adds cs to w. Of two buckets that share a slot, the later
// one stays.
func (w *countWindow) addBuckets(cs []countBucket) {
	w.mu.Lock()
	for _, c := range cs {
		b := w.slot(c.at)
		switch {
		case b.at == c.at:
			b.n += c.n
		case b.at < c.at:
			b.at, b.n = c.at, c.n
		}
	}
	w.mu.Unlock()
}

// replace makes w count cs, the publishes before position upto.
func (w *countWindow) replace(cs []countBucket, upto uint64) {
	w.mu.Lock()
	w.buckets, w.upto = nil, upto
	w.mu.Unlock()
	w.addBuckets(cs)
}

// takeOut removes one publish made at ms from buckets (ExportStateAt); a
// bucket gone from the retention is left alone.
func takeOut(buckets []countBucket, ms int64) {
	k := ms / countBucketMs
	for i := range buckets {
		if buckets[i].at == k && buckets[i].n > 0 {
			buckets[i].n--
			return
		}
	}
}

// countAppended counts the publish headers among recs, just appended
// (invariant 4). The store's append calls it before it returns, so a
// replicated broker's appends count under replStore.mu, in log order.
func countAppended(recs []logRec) {
	for i := range recs {
		if c := recs[i].count; c != nil {
			c.addAt(int64(binary.LittleEndian.Uint64(recs[i].head[16:])), recs[i].pos)
		}
	}
}

// foldCount is what a fold window holds of one topic's counts.
type foldCount struct {
	base *countVal // a snapshot's counts (recTopicCount): they replace the stored ones
	pubs []foldPub // the window's publishes after base, in log order
}

// foldPub is one committed publish folded.
type foldPub struct {
	pos uint64
	ms  int64
}

// published folds a committed publish of topic id (invariant 2).
func (ft *foldTopics) published(id, pos uint64, ms int64) {
	if id == 0 {
		return // recovery's seal (recovery.go), no topic's
	}
	fc := ft.count(id)
	fc.pubs = append(fc.pubs, foldPub{pos, ms})
}

func (ft *foldTopics) count(id uint64) *foldCount {
	if ft.counts == nil {
		ft.counts = map[uint64]*foldCount{}
	}
	fc := ft.counts[id]
	if fc == nil {
		fc = &foldCount{}
		ft.counts[id] = fc
	}
	return fc
}

// setCount folds a recTopicCount record at pos.
func (ft *foldTopics) setCount(pos uint64, payload []byte) error {
	id, v, err := decodeCountVal(payload)
	if err != nil {
		return err
	}
	v.upto = pos + 1
	fc := ft.count(id)
	fc.base, fc.pubs = &v, fc.pubs[:0]
	return nil
}

// merged returns stored (a topic's index value, nil if none) with fc's
// publishes past its upto added (invariant 1), without the buckets older
// than the retention at nowMs.
func (fc *foldCount) merged(stored []byte, nowMs int64) (countVal, error) {
	var v countVal
	switch {
	case fc.base != nil:
		v = countVal{upto: fc.base.upto, buckets: append([]countBucket(nil), fc.base.buckets...)}
	case stored != nil:
		_, sv, err := decodeCountVal(stored)
		if err != nil {
			return v, err
		}
		v = sv
	}
	var w countWindow
	w.addBuckets(v.buckets)
	for _, p := range fc.pubs {
		if p.pos >= v.upto {
			w.add(p.ms)
			v.upto = p.pos + 1
		}
	}
	v.buckets = w.live(nowMs)
	return v, nil
}

// writeCounts adds the window's counts to a checkpoint batch. stored
// reads a topic's index value.
func (ft *foldTopics) writeCounts(batch batcher, stored func(id uint64) ([]byte, error), nowMs int64) error {
	for id, fc := range ft.counts {
		if o := ft.topics[id]; o != nil && o.deleted {
			continue // DeleteTopicCount (write)
		}
		var old []byte
		if fc.base == nil {
			var err error
			if old, err = stored(id); err != nil {
				return err
			}
		}
		v, err := fc.merged(old, nowMs)
		if err != nil {
			return fmt.Errorf("topic %d: %w", id, err)
		}
		batch.PutTopicCount(id, v.encode(id))
	}
	return nil
}

// pinAfter makes the log keep the entries after index until unpin is
// called (checkpointMeta forgets none of them), for ExportStateAt, which
// reads them once it has streamed the messages. It fails if the log no
// longer holds them all.
func (r *replStore) pinAfter(index uint64) (unpin func(), err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	last := r.applied
	if n := len(r.ents); n > 0 {
		last = max(last, r.ents[n-1].index)
	}
	if index > last || (index < last && r.entAt(index+1) < 0) {
		return nil, fmt.Errorf("engine: snapshot: this log does not hold the entries after %d (they end at %d): ask for a newer snapshot", index, last)
	}
	r.pins = append(r.pins, index)
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if k := slices.Index(r.pins, index); k >= 0 {
			r.pins = slices.Delete(r.pins, k, k+1)
		}
	}, nil
}

// countsAt takes out of counts (each topic's live buckets and upto, read
// before the export's fence) the publishes of the entries after index
// whose headers lie before the topic's upto (invariant 5). The caller
// pinned them (pinAfter).
func (r *replStore) countsAt(index uint64, topics []*topic, counts []countVal) error {
	var maxUpto uint64
	at := make(map[uint64]int, len(topics))
	for i, t := range topics {
		at[t.id] = i
		maxUpto = max(maxUpto, counts[i].upto)
	}
	var spans [][2]uint64
	r.mu.Lock()
	if k := r.entAt(index + 1); k >= 0 {
		for _, e := range r.ents[k:] {
			if e.kind == EntryRecords && e.first < maxUpto {
				spans = append(spans, [2]uint64{e.first, e.recEnd})
			}
		}
	}
	r.mu.Unlock()
	le := binary.LittleEndian
	for _, sp := range spans {
		err := r.readRange(sp[0], sp[1], func(pos uint64, _ uint32, typ uint8, payload []byte) {
			if typ != recPublish || len(payload) < publishHeadFixed {
				return
			}
			if i, ok := at[le.Uint64(payload)]; ok && pos < counts[i].upto {
				takeOut(counts[i].buckets, int64(le.Uint64(payload[16:])))
			}
		})
		if err != nil {
			return fmt.Errorf("engine: snapshot: read the entries after %d: %w", index, err)
		}
	}
	return nil
}
