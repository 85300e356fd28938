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
// counts; publishes folded after it add to them.
//
// Invariants:
//  1. A publish is counted once in the index: a fold adds the publishes of
//     a topic at or past its stored upto, and stores upto past the last.
//  2. Only a committed publish group counts (publish.go invariant 1): one
//     cut short by a crash was never acknowledged.
//  3. Recovery shows the index's counts plus the log tail's publishes at
//     or past upto, as the next checkpoint will store them.
//
// What is not exact: ExportState reads the live counts, which may hold
// publishes after the snapshot's index; the importer replays those from
// the log and counts them again. A snapshot is rare and the publishes in
// flight during one are few.

import (
	"encoding/binary"
	"fmt"
)

// recTopicCount is a topic's counts in a snapshot stream (snapshot.go).
// Part of the on-disk format; never change.
const recTopicCount uint8 = 37

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
	k := nowMs / countBucketMs
	var out []countBucket
	w.mu.Lock()
	if w.buckets != nil {
		for _, b := range w.buckets {
			if b.n > 0 && b.at > k-countBuckets && b.at <= k {
				out = append(out, b)
			}
		}
	}
	w.mu.Unlock()
	return out
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

// reset empties w.
func (w *countWindow) reset() {
	w.mu.Lock()
	w.buckets = nil
	w.mu.Unlock()
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
