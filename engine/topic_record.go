package engine

// Topic and subscription records, their index values (same bytes), and how
// the durable backend folds, checkpoints and recovers them (as queue
// records: queue_record.go, fold.go, checkpoint.go, recovery.go).
//
// Record types 32..36 (record.go lists them). Part of the on-disk format;
// never change (add fields at the end, guarded by length). All integers are
// little endian. testdata/golden pins every one (format_test.go).
//
//	type 32 topic        topic value: id u64 | create ms i64 | modify ms i64 |
//	                     max bytes u32 | logging u8 | name length u16 | name
//	                     (create or change: the latest wins)
//	type 33 topicDelete  topic id u64 | count u32 | count × subscription id u64
//	                     (the topic's subscriptions go with it)
//	type 34 subscription subscription value: id u64 | topic id u64 |
//	                     create ms i64 | modify ms i64 | strategy u8 |
//	                     format u8 | tag length u8 | tag | endpoint length u16 |
//	                     endpoint | name length u16 | name
//	                     [| dead-letter queue length u16 | dead-letter queue]
//	                     (the bracketed part only when one is set)
//	type 35 unsubscribe  subscription id u64
//	type 36 publish      publish.go: the header of an atomic fan-out group
//
// Index keys: 't' + topic id -> topic value, 'u' + subscription id ->
// subscription value (index/doc.go); metadata "topic-id-hwm" and
// "sub-id-hwm" keep the ids from being reused (topic.go invariant 2).
//
// Invariant: a subscription whose topic is missing at start-up is an
// orphan (only possible if the index was damaged): it is skipped with a
// warning, never served.

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
)

const (
	metaTopicID = "topic-id-hwm"
	metaSubID   = "sub-id-hwm"
)

const topicValFixed = 8 + 8 + 8 + 4 + 1 + 2

type topicVal struct {
	id                 uint64
	createMs, modifyMs int64
	cfg                TopicConfig
	name               string
}

func (v *topicVal) encode() []byte {
	b := make([]byte, topicValFixed+len(v.name))
	le := binary.LittleEndian
	le.PutUint64(b[0:], v.id)
	le.PutUint64(b[8:], uint64(v.createMs))
	le.PutUint64(b[16:], uint64(v.modifyMs))
	le.PutUint32(b[24:], uint32(v.cfg.MaxMessageBytes))
	if v.cfg.LoggingEnabled {
		b[28] = 1
	}
	le.PutUint16(b[29:], uint16(len(v.name)))
	copy(b[topicValFixed:], v.name)
	return b
}

func decodeTopicVal(b []byte) (topicVal, error) {
	var v topicVal
	if len(b) < topicValFixed {
		return v, fmt.Errorf("%w: topic value of %d bytes", errBadRecord, len(b))
	}
	le := binary.LittleEndian
	v.id = le.Uint64(b[0:])
	v.createMs = int64(le.Uint64(b[8:]))
	v.modifyMs = int64(le.Uint64(b[16:]))
	v.cfg.MaxMessageBytes = int(le.Uint32(b[24:]))
	v.cfg.LoggingEnabled = b[28] == 1
	n := int(le.Uint16(b[29:]))
	if len(b) < topicValFixed+n || b[28] > 1 {
		return v, fmt.Errorf("%w: topic value (name %d bytes, logging %d)", errBadRecord, n, b[28])
	}
	v.name = string(b[topicValFixed : topicValFixed+n])
	return v, nil
}

// encodeSub encodes a subscription value.
func encodeSub(s *subscription) []byte {
	le := binary.LittleEndian
	b := make([]byte, 0, 8+8+8+8+3+len(s.cfg.FilterTag)+2+len(s.cfg.Endpoint)+2+len(s.name))
	b = le.AppendUint64(b, s.id)
	b = le.AppendUint64(b, s.topicID)
	b = le.AppendUint64(b, uint64(s.createMs))
	b = le.AppendUint64(b, uint64(s.modifyMs))
	b = append(b, uint8(s.cfg.Strategy), uint8(s.cfg.Format), uint8(len(s.cfg.FilterTag)))
	b = append(b, s.cfg.FilterTag...)
	b = le.AppendUint16(b, uint16(len(s.cfg.Endpoint)))
	b = append(b, s.cfg.Endpoint...)
	b = le.AppendUint16(b, uint16(len(s.name)))
	b = append(b, s.name...)
	if s.cfg.DeadLetterQueue != "" {
		b = le.AppendUint16(b, uint16(len(s.cfg.DeadLetterQueue)))
		b = append(b, s.cfg.DeadLetterQueue...)
	}
	return b
}

// decodeSub decodes a subscription value; the endpoint is parsed again.
func decodeSub(b []byte) (*subscription, error) {
	le := binary.LittleEndian
	bad := func(what string) error { return fmt.Errorf("%w: subscription value: %s", errBadRecord, what) }
	if len(b) < 35 {
		return nil, bad("short")
	}
	s := &subscription{id: le.Uint64(b[0:]), topicID: le.Uint64(b[8:]),
		createMs: int64(le.Uint64(b[16:])), modifyMs: int64(le.Uint64(b[24:]))}
	s.cfg.Strategy, s.cfg.Format = NotifyStrategy(b[32]), NotifyContentFormat(b[33])
	if s.cfg.Strategy != BackoffRetry && s.cfg.Strategy != ExponentialDecayRetry || s.cfg.Format < FormatXML || s.cfg.Format > FormatSimplified {
		return nil, bad("strategy or format")
	}
	rest := b[35:]
	n := int(b[34])
	if len(rest) < n+2 {
		return nil, bad("tag")
	}
	s.cfg.FilterTag, rest = string(rest[:n]), rest[n:]
	n, rest = int(le.Uint16(rest)), rest[2:]
	if len(rest) < n+2 {
		return nil, bad("endpoint")
	}
	s.cfg.Endpoint, rest = string(rest[:n]), rest[n:]
	n, rest = int(le.Uint16(rest)), rest[2:]
	if len(rest) < n {
		return nil, bad("name")
	}
	s.name, rest = string(rest[:n]), rest[n:]
	if len(rest) > 0 {
		if len(rest) < 2 || len(rest) != 2+int(le.Uint16(rest)) {
			return nil, bad("dead-letter queue")
		}
		s.cfg.DeadLetterQueue = string(rest[2:])
	}
	kind, qname, err := parseEndpoint(s.cfg.Endpoint)
	if err != nil {
		return nil, bad(err.Error())
	}
	s.kind, s.queue = kind, qname
	return s, nil
}

func encodeID(id uint64) []byte { return binary.LittleEndian.AppendUint64(nil, id) }

// encodeUnsubscribe is an unsubscribe record: the subscription's id, then
// its topic's, so that a follower finds it without a scan. Records before
// the topic id was added have the subscription's id alone.
func encodeUnsubscribe(sub, topic uint64) []byte {
	return binary.LittleEndian.AppendUint64(encodeID(sub), topic)
}

func encodeTopicDelete(id uint64, subs []uint64) []byte {
	le := binary.LittleEndian
	b := le.AppendUint64(make([]byte, 0, 12+8*len(subs)), id)
	b = le.AppendUint32(b, uint32(len(subs)))
	for _, s := range subs {
		b = le.AppendUint64(b, s)
	}
	return b
}

func decodeTopicDelete(b []byte) (id uint64, subs []uint64, err error) {
	le := binary.LittleEndian
	if len(b) < 12 {
		return 0, nil, fmt.Errorf("%w: topic delete of %d bytes", errBadRecord, len(b))
	}
	n := int(le.Uint32(b[8:]))
	if len(b) < 12+8*n {
		return 0, nil, fmt.Errorf("%w: topic delete of %d subscriptions in %d bytes", errBadRecord, n, len(b))
	}
	for i := range n {
		subs = append(subs, le.Uint64(b[12+8*i:]))
	}
	return le.Uint64(b), subs, nil
}

// foldObj is the net effect of a window on one topic or subscription.
type foldObj struct {
	val     []byte // latest value; nil if only deleted
	deleted bool
}

// foldTopics is the topic part of a fold (fold.go).
type foldTopics struct {
	topics, subs     map[uint64]*foldObj
	maxTopic, maxSub uint64
	counts           map[uint64]*foldCount // publishes per topic (topic_count.go)
}

func (ft *foldTopics) reset() {
	if ft.topics == nil {
		ft.topics, ft.subs = map[uint64]*foldObj{}, map[uint64]*foldObj{}
	}
	clear(ft.topics)
	clear(ft.subs)
	clear(ft.counts)
	ft.maxTopic, ft.maxSub = 0, 0
}

func foldPut(m map[uint64]*foldObj, id uint64, val []byte) {
	o := m[id]
	if o == nil {
		o = &foldObj{}
		m[id] = o
	}
	o.val, o.deleted = append(o.val[:0], val...), false
}

func foldDel(m map[uint64]*foldObj, id uint64) {
	o := m[id]
	if o == nil {
		o = &foldObj{}
		m[id] = o
	}
	o.val, o.deleted = nil, true
}

// apply folds one topic record (types 32..35).
func (ft *foldTopics) apply(typ uint8, payload []byte) error {
	if ft.topics == nil {
		// Not reset, which clears the counts too: a window's publishes
		// folded before its first topic or subscription record were
		// dropped from MessageCount at the next start (topic model,
		// 2026-12-06).
		ft.topics, ft.subs = map[uint64]*foldObj{}, map[uint64]*foldObj{}
	}
	switch typ {
	case recTopic:
		v, err := decodeTopicVal(payload)
		if err != nil {
			return err
		}
		foldPut(ft.topics, v.id, payload)
		ft.maxTopic = max(ft.maxTopic, v.id)
	case recTopicDelete:
		id, subs, err := decodeTopicDelete(payload)
		if err != nil {
			return err
		}
		foldDel(ft.topics, id)
		ft.maxTopic = max(ft.maxTopic, id) // an id used is never used again
		for _, s := range subs {
			foldDel(ft.subs, s)
			ft.maxSub = max(ft.maxSub, s)
		}
	case recSubscription:
		s, err := decodeSub(payload)
		if err != nil {
			return err
		}
		foldPut(ft.subs, s.id, payload)
		ft.maxSub = max(ft.maxSub, s.id)
	case recUnsubscribe:
		if len(payload) < 8 {
			return fmt.Errorf("%w: unsubscribe of %d bytes", errBadRecord, len(payload))
		}
		id := binary.LittleEndian.Uint64(payload)
		foldDel(ft.subs, id)
		ft.maxSub = max(ft.maxSub, id)
	}
	return nil
}

// batcher is what a checkpoint writes topics into (index.Batch).
type batcher interface {
	PutTopic(id uint64, val []byte)
	DeleteTopic(id uint64)
	PutSubscription(id uint64, val []byte)
	DeleteSubscription(id uint64)
	PutMeta(name string, val []byte)
	PutTopicCount(id uint64, val []byte)
	DeleteTopicCount(id uint64)
}

// write adds the window's topic changes to a checkpoint batch.
func (ft *foldTopics) write(batch batcher) {
	for id, o := range ft.topics {
		if o.deleted {
			batch.DeleteTopic(id)
			batch.DeleteTopicCount(id)
		} else {
			batch.PutTopic(id, o.val)
		}
	}
	for id, o := range ft.subs {
		if o.deleted {
			batch.DeleteSubscription(id)
		} else {
			batch.PutSubscription(id, o.val)
		}
	}
	if ft.maxTopic > 0 {
		batch.PutMeta(metaTopicID, encodeID(ft.maxTopic))
	}
	if ft.maxSub > 0 {
		batch.PutMeta(metaSubID, encodeID(ft.maxSub))
	}
}

// loadTopics rebuilds the broker's topics from the index and the folded
// log tail ft (recovery, before anything is served).
func (d *durableStore) loadTopics(b *Broker, ft *foldTopics) error {
	tvals := map[uint64][]byte{}
	svals := map[uint64][]byte{}
	if err := d.idx.Topics(func(id uint64, val []byte) error {
		tvals[id] = slices.Clone(val)
		return nil
	}); err != nil {
		return fmt.Errorf("engine: load topics: %w", err)
	}
	if err := d.idx.Subscriptions(func(id uint64, val []byte) error {
		svals[id] = slices.Clone(val)
		return nil
	}); err != nil {
		return fmt.Errorf("engine: load subscriptions: %w", err)
	}
	merge := func(dst map[uint64][]byte, src map[uint64]*foldObj) {
		for id, o := range src {
			if o.deleted {
				delete(dst, id)
			} else {
				dst[id] = o.val
			}
		}
	}
	merge(tvals, ft.topics)
	merge(svals, ft.subs)
	ts := &b.topics
	ts.nextTopicID = max(ts.nextTopicID, ft.maxTopic+1)
	ts.nextSubID = max(ts.nextSubID, ft.maxSub+1)
	for _, hw := range []struct {
		name string
		next *uint64
	}{{metaTopicID, &ts.nextTopicID}, {metaSubID, &ts.nextSubID}} {
		v, err := d.idx.Meta(hw.name)
		if err != nil {
			return fmt.Errorf("engine: read index metadata: %w", err)
		}
		if len(v) == 8 {
			*hw.next = max(*hw.next, binary.LittleEndian.Uint64(v)+1)
		}
	}
	// One topic per name, the highest id: a replica's log may hold a
	// replayed create of an older incarnation over a snapshot that held a
	// later one (topic_replica.go skips it at run time).
	byName := map[string]uint64{}
	for id, val := range tvals {
		v, err := decodeTopicVal(val)
		if err != nil {
			return fmt.Errorf("engine: topic %d: %w", id, err)
		}
		if o, ok := byName[v.name]; ok && o > id {
			continue
		}
		byName[v.name] = id
	}
	for id, val := range tvals {
		v, err := decodeTopicVal(val)
		if err != nil {
			return fmt.Errorf("engine: topic %d: %w", id, err)
		}
		if byName[v.name] != id {
			ts.nextTopicID = max(ts.nextTopicID, id+1)
			continue
		}
		t := newTopic(v.id, v.name, topicMeta{cfg: v.cfg, createMs: v.createMs, modifyMs: v.modifyMs})
		t.seq.Store(d.seqBase())
		ts.addTopicLocked(t)
		ts.nextTopicID = max(ts.nextTopicID, id+1)
	}
	for id, val := range svals {
		s, err := decodeSub(val)
		if err != nil {
			return fmt.Errorf("engine: subscription %d: %w", id, err)
		}
		ts.nextSubID = max(ts.nextSubID, id+1)
		t := ts.byID[s.topicID]
		if t == nil {
			b.log.Warn("skipping a subscription of no known topic", "subscription", s.name, "topic_id", s.topicID)
			continue
		}
		s.topic = t.name
		s.relay = s.kind == endpointQueue && b.relayed(s.queue)
		t.putSubLocked(s)
	}
	return nil
}

// loadCounts gives every topic loaded (loadTopics) its counts: the
// index's, and the tail's publishes past them (topic_count.go invariant
// 3). At start-up, after loadTopics; it takes topicSet.mu alone, then
// each countWindow.mu alone (lock order: topic.go).
func (d *durableStore) loadCounts(b *Broker, ft *foldTopics) error {
	b.topics.mu.RLock()
	topics := maps.Clone(b.topics.byID)
	b.topics.mu.RUnlock()
	stored := map[uint64][]byte{}
	if err := d.idx.TopicCounts(func(id uint64, val []byte) error {
		if topics[id] != nil {
			stored[id] = slices.Clone(val)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("engine: load topic counts: %w", err)
	}
	now := b.nowMs()
	for id, t := range topics {
		fc := ft.counts[id]
		if fc == nil {
			if stored[id] == nil {
				continue
			}
			fc = &foldCount{}
		}
		v, err := fc.merged(stored[id], now)
		if err != nil {
			return fmt.Errorf("engine: the counts of topic %d: %w", id, err)
		}
		t.count.replace(v.buckets, v.upto)
	}
	return nil
}
