package engine

// Topics on a replicated broker (replica.go): a cluster places each topic
// on a shard, as it places queues, and the shard's log carries the topic's
// records as it carries its queues'.
//
// The leader changes its topics as a single broker does (topic.go): every
// change is one record, proposed and committed before it is answered, and
// a publish is one entry (its header and members, publish.go), so that a
// follower applies all of a publish or none of it. Followers apply the
// records here; a snapshot carries the topics and subscriptions
// (ExportState), and the checkpoint folds them as on a single broker.
//
// Pushes (push.go) are a leader's work: receiving from a push queue, and
// deleting or retrying what was pushed, are changes only a leader makes.
// A replica pushes nothing until it leads (pusher.following); then it
// restores its push queues (reconcilePush: a leader that failed between a
// subscription's record and its push queue's leaves one side of the pair)
// and starts a worker set per pushed subscription. When it stops leading,
// its workers stop. What they had taken from a push queue and not settled
// stays invisible there for the push lease (PushOptions.Lease), then the
// next leader pushes it again: at least once, as after a crash.
//
// Invariants:
//  1. A follower's topics change only by applied records (here) and by
//     ImportState; never by its own operations (enter refuses them).
//  2. Topic and subscription ids stay above every id applied
//     (nextTopicID, nextSubID), so a follower that comes to lead never
//     hands out an id its shard used.
//  3. A topic's message sequence numbers carry the term of the leader that
//     publishes (leadTopics, as for queues: replica.go invariant 5), so
//     two terms never give one MessageId twice.
//  4. Only a leading replica runs push workers (pusher.following; start
//     refuses while it is set).

import (
	"encoding/binary"
	"fmt"
)

// applyTopicRecord installs a committed topic record into a follower's
// topics (apply.go).
func (b *Broker) applyTopicRecord(typ uint8, pos uint64, payload []byte) error {
	bad := func(err error) error { return fmt.Errorf("record type %d at %d: %w", typ, pos, err) }
	ts := &b.topics
	if typ == recPublish {
		// The members are send records, applied as such; the header
		// counts the publish in the topic's MessageCount.
		if len(payload) < publishHeadFixed {
			return bad(fmt.Errorf("%w: publish header of %d bytes", errBadRecord, len(payload)))
		}
		le := binary.LittleEndian
		ts.mu.RLock()
		t := ts.byID[le.Uint64(payload)]
		ts.mu.RUnlock()
		if t != nil {
			t.count.addAt(int64(le.Uint64(payload[16:])), pos) // topic_count.go invariant 4
		}
		return nil
	}
	if typ == recTopicCount { // a snapshot's (topic_count.go)
		id, v, err := decodeCountVal(payload)
		if err != nil {
			return bad(err)
		}
		ts.mu.RLock()
		t := ts.byID[id]
		ts.mu.RUnlock()
		if t != nil {
			t.count.replace(v.buckets, pos+1)
		}
		return nil
	}
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	switch typ {
	case recTopic:
		v, err := decodeTopicVal(payload)
		if err != nil {
			return bad(err)
		}
		ts.nextTopicID = max(ts.nextTopicID, v.id+1)
		m := topicMeta{cfg: v.cfg, createMs: v.createMs, modifyMs: v.modifyMs}
		ts.mu.Lock()
		if t := ts.byID[v.id]; t != nil {
			t.meta.Store(&m)
		} else if live := ts.byName[v.name]; live != nil && live.id > v.id {
			// A replayed create of an older incarnation of the
			// name over a snapshot that holds a later one: stale.
		} else {
			t := newTopic(v.id, v.name, m)
			t.seq.Store(b.store.seqBase())
			ts.addTopicLocked(t)
		}
		ts.mu.Unlock()
	case recTopicDelete:
		id, subs, err := decodeTopicDelete(payload)
		if err != nil {
			return bad(err)
		}
		ts.nextTopicID = max(ts.nextTopicID, id+1)
		ts.mu.Lock()
		if t := ts.byID[id]; t != nil {
			delete(ts.byName, t.name)
			delete(ts.byID, id)
			ts.names.remove(t.name)
		}
		ts.mu.Unlock()
		for _, s := range subs {
			ts.nextSubID = max(ts.nextSubID, s+1)
			b.pusher.remove(s) // none on a follower; the push queues go by their own records
		}
	case recSubscription:
		s, err := decodeSub(payload)
		if err != nil {
			return bad(err)
		}
		ts.nextSubID = max(ts.nextSubID, s.id+1)
		ts.mu.Lock()
		t := ts.byID[s.topicID]
		if t != nil {
			s.topic = t.name
			s.relay = s.kind == endpointQueue && b.relayed(s.queue)
			t.putSubLocked(s)
		}
		ts.mu.Unlock()
		if t != nil {
			b.pusher.update(s)
		}
	case recUnsubscribe:
		if len(payload) < 8 {
			return bad(fmt.Errorf("%w: unsubscribe of %d bytes", errBadRecord, len(payload)))
		}
		id := binary.LittleEndian.Uint64(payload)
		ts.nextSubID = max(ts.nextSubID, id+1)
		ts.mu.Lock()
		if len(payload) >= 16 {
			if t := ts.byID[binary.LittleEndian.Uint64(payload[8:])]; t != nil {
				t.dropSubLocked(id)
			}
		} else { // a record without its topic's id (encodeUnsubscribe)
			for _, t := range ts.byID {
				t.dropSubLocked(id)
			}
		}
		ts.mu.Unlock()
		b.pusher.remove(id)
	}
	return nil
}

// leadTopics makes a replica that starts to lead in term hand out topic
// message sequence numbers of its term (invariant 3) and push (invariant
// 4). SetLeader calls it.
func (b *Broker) leadTopics(term uint64) {
	base := term << bootShift
	b.topics.mu.RLock()
	for _, t := range b.topics.byID {
		for {
			cur := t.seq.Load()
			if cur >= base || t.seq.CompareAndSwap(cur, base) {
				break
			}
		}
	}
	b.topics.mu.RUnlock()
	p := &b.pusher
	p.mu.Lock()
	if p.ctx == nil || p.ctx.Err() != nil {
		p.mu.Unlock()
		return // not started, or closed
	}
	p.following = false
	p.gen++
	gen := p.gen
	p.mu.Unlock()
	// Restoring the push queues writes records, which wait for their
	// commit: never on the consensus layer's goroutine, which calls this.
	go func() {
		if p.ctx.Err() != nil {
			return // closed meanwhile
		}
		subs, err := b.reconcilePush()
		if err != nil && p.ctx.Err() == nil {
			b.log.Error("push queues could not all be restored; the subscriptions without one are not pushed until this replica leads again", "err", err)
		}
		b.adminMu.Lock()
		defer b.adminMu.Unlock()
		p.mu.Lock()
		current := p.gen == gen
		p.mu.Unlock()
		if !current {
			return // it stopped leading meanwhile
		}
		for _, s := range subs {
			if q := b.internalQueue(pushQueueName(s.id)); q != nil {
				p.start(s, q) // refused if it stopped leading since the check
			}
		}
	}()
}

// follow stops every push worker and starts none until the replica leads
// again (invariant 4).
func (p *pusher) follow() {
	p.mu.Lock()
	p.following = true
	p.gen++
	subs := p.subs
	p.subs = map[uint64]*pushSub{}
	p.mu.Unlock()
	for _, ps := range subs {
		ps.cancel()
	}
}

// dropSubLocked removes subscription id from t, if t has it. The caller
// holds topics.mu.
func (t *topic) dropSubLocked(id uint64) {
	for name, s := range t.subs {
		if s.id == id {
			delete(t.subs, name)
			t.subNames.remove(name)
			return
		}
	}
}
