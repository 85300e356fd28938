package engine

// Publishing to a topic: one message fans out to every queue subscription
// whose FilterTag matches, as one atomic step in the log.
//
// Format of a publish in the log (part of the on-disk format; never change):
//
//	type 36 publish  topic id u64 | topic message seq u64 | publish ms i64 |
//	                 count u32 | count × (queue id u64, message seq u64)
//
// followed, in the same storage.append call (so contiguously: invariants 3
// and 12 of wal, the latter for a group larger than the log's write
// buffer, up to 100 deliveries of 64 KiB), by exactly count ordinary send
// records (type 4, or type 20 when the publish carries properties;
// unchanged), the members, one per delivery, in the order the header
// lists them. A delivery to an HTTP
// subscription is a send into its push queue (push_queue.go). The header
// and its members form a publish group.
//
// Invariants:
//  1. A publish group is committed iff its header and all count members
//     are in the log back to back. Recovery and every checkpoint fold a
//     member send only as part of a committed group: a group cut short (a
//     torn tail after a crash or power loss, or a write that failed half
//     way) is aborted, and its members are dropped together (fold.go
//     "publish groups"). So after any crash a publish is in every matching
//     queue or in none, acknowledged or not.
//  2. A checkpoint never folds part of a group: when the window it reads
//     ends inside a group, it stops at the group's header (the next
//     checkpoint reads the group whole), so the index never holds a member
//     of an uncommitted group.
//  3. Publish acknowledges only after the last member is durable under the
//     log's sync mode (storage.waitDurable, as Send), so an acknowledged
//     publish is committed.
//  4. Recovery seals a torn group at the tail by appending an empty header
//     (count 0) after it, so later records never look like its members and
//     checkpoints move past it.
//  5. Each member is a new queue message (new MessageId, MD5 of its own
//     body) at the default priority with the queue's DelaySeconds; its body
//     is the subscription's NotifyContentFormat rendering (spec §3.4, §3.7).
//  6. A publish that delivers nowhere (no subscription, or none whose
//     FilterTag matches) is a group of count 0 with its topic's id: it
//     changes no queue, and counts in MessageCount on every replica and
//     across restarts (topic_count.go) like any other.
//
// Queue.Send is not involved: its hot path is unchanged. Publish reserves
// slots the way Send does (pending, invisible), one stripe lock at a time,
// never two at once, and makes them visible after the append is durable.

import (
	"crypto/md5"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/smqd/smqd/wal"
)

// topicIDBit marks a topic message's id: the top bit of its first eight
// bytes, which a queue id (a small counter) never sets, so a topic
// MessageId is never a queue message's.
const topicIDBit = 1 << 63

// recPublish's fixed part.
const publishHeadFixed = 8 + 8 + 8 + 4

// MaxPublishBytes bounds a publish's deliveries, their bodies as rendered
// for each subscription plus their properties, all in one log write (and
// in a cluster one Raft entry): 100 subscriptions of a 64 KiB message are
// about 6.5 MiB. Without it an XML or JSON rendering of a body of
// characters those formats escape (five or six times the body) made one
// publish to 100 subscriptions a 37.5 MiB entry and about 320 MiB of
// allocations on a cluster leader (review W, 2026-12-07).
const MaxPublishBytes = 8 << 20

// PublishInput is one message published to a topic.
type PublishInput struct {
	// Body: 1..the topic's MaximumMessageSize bytes; copied. Delivered in
	// the XML or JSON format it is written as text: bytes that are not
	// UTF-8, or control characters other than tab, LF and CR, make an XML
	// notification no parser takes and a JSON one whose Message does not
	// match its MessageMD5 (the wire API cannot carry such bodies; an
	// embedder publishing binary data should encode it, base64 say, or
	// subscribe with FormatSimplified, which carries the bytes as they are).
	Body []byte
	Tag  string // MessageTag: "" (untagged) or at most 16 characters
	// Owner is the account id written as TopicOwner and Subscriber in XML
	// and JSON notifications, and in the x-mns-topic-owner and
	// x-mns-subscriber headers of a SIMPLIFIED push: at most 255 bytes of
	// UTF-8 with no control characters (else an *ArgumentError).
	Owner string
	// Properties are the message's user and system properties (props.go):
	// copied to every queue delivery (spec §3.7) and to the dead-letter
	// queue of an HTTP subscription, not into pushes.
	Properties []Property
}

// PublishResult is the outcome of a Publish.
type PublishResult struct {
	ID        MessageID // the topic message's id
	MD5       [16]byte  // MD5 of the published body
	Delivered int       // queue messages stored, one per matching queue subscription
	Pushes    int       // notifications stored for matching HTTP subscriptions and queues of other brokers (push_queue.go)
	Skipped   int       // matching subscriptions whose queue (or push queue) does not exist
}

// pubTarget is one delivery of a publish.
type pubTarget struct {
	q     *Queue
	push  bool // q is an HTTP subscription's push queue
	st    *stripe
	idx   uint32
	delay int64
	body  []byte
	head  [bodyHeadLen]byte
	rec   logRec
	seq   uint64
}

// Publish publishes a message to a topic: it is stored in every queue of a
// subscription whose FilterTag is empty or equals in.Tag, all or none
// (invariant 1), and Publish returns once that is durable (invariant 3).
// An HTTP subscription gets it in its push queue, in the same group, and
// the pusher takes it from there (push.go). Subscriptions of other
// endpoint kinds receive nothing (topic.go invariant 4). A subscription
// whose queue was deleted is skipped.
func (b *Broker) Publish(topicName string, in PublishInput) (PublishResult, error) {
	var res PublishResult
	if err := b.usable(); err != nil {
		return res, err
	}
	t, err := b.topicByName(topicName)
	if err != nil {
		return res, err
	}
	tm := t.meta.Load()
	if len(in.Body) == 0 {
		return res, argErr("MessageBody", "must not be empty")
	}
	if len(in.Body) > tm.cfg.MaxMessageBytes {
		return res, argErr("MessageBody", "is %d bytes, more than the topic's MaximumMessageSize of %d bytes", len(in.Body), tm.cfg.MaxMessageBytes)
	}
	if err := checkTag("MessageTag", in.Tag); err != nil {
		return res, err
	}
	if err := checkOwner(in.Owner); err != nil {
		return res, err
	}
	var props []byte
	if len(in.Properties) > 0 {
		if _, err := checkProps(in.Properties); err != nil {
			return res, err
		}
		props = appendProps(nil, in.Properties)
	}
	if err := b.store.acceptNew(); err != nil {
		return res, err
	}
	var subs []*subscription
	b.topics.mu.RLock()
	for n := range t.subNames.all() {
		s := t.subs[n]
		if (s.kind == endpointQueue || s.kind == endpointHTTP) && (s.cfg.FilterTag == "" || s.cfg.FilterTag == in.Tag) && b.topics.closing[s.id] == 0 {
			subs = append(subs, s)
		}
	}
	b.topics.mu.RUnlock()

	res.MD5 = md5.Sum(in.Body)
	seq := t.seq.Add(1)
	res.ID = b.messageID(topicIDBit|t.id, seq)
	now := b.nowMs()
	n := notification{owner: in.Owner, topic: t.name, id: res.ID, md5: res.MD5, body: in.Body, tag: in.Tag, ms: now}
	targets := make([]pubTarget, 0, len(subs))
	for _, s := range subs {
		if s.pushed() {
			if q := b.internalQueue(pushQueueName(s.id)); q != nil {
				targets = append(targets, pubTarget{q: q, push: true, body: appendPushEnvelope(nil, &n, n.render(s))})
			} else {
				// Only after a start-up that could not restore it (a full
				// disk, push_queue.go reconcilePush), which it logged.
				res.Skipped++
				b.log.Warn("publish skips a pushed subscription without a push queue", "topic", t.name, "subscription", s.name)
			}
			continue
		}
		q, err := b.Queue(s.queue)
		if err != nil {
			res.Skipped++
			b.log.Debug("publish skips a subscription whose queue is gone", "topic", t.name, "subscription", s.name, "queue", s.queue)
			continue
		}
		targets = append(targets, pubTarget{q: q, body: n.render(s)})
	}
	total := 0
	for i := range targets {
		// Each copy must stay movable as a dead letter, as a sent message
		// must (Queue.Send): an XML or JSON rendering of a body of '&' is
		// five or six times the body, and a copy whose move outgrew one
		// log record failed the broker at every receive (review H,
		// 2026-12-06).
		if need := maxMoveHead + len(targets[i].body) + len(props); need > b.maxRecord {
			return res, argErr("MessageBody", "as delivered to a subscription (%d bytes in its format) may need a log record of %d bytes as a dead letter, more than this broker's log takes in one (%d: Options.WAL.SegmentBytes and BufferBytes)", len(targets[i].body), need, b.maxRecord)
		}
		total += len(targets[i].body) + len(props)
	}
	if total > MaxPublishBytes {
		return res, argErr("MessageBody", "as delivered to %d subscriptions is %d bytes in all (in their formats), more than one publish writes (%d)", len(targets), total, MaxPublishBytes)
	}

	// Phase 1: reserve a pending slot per delivery, one stripe at a time.
	store := b.store
	kept := targets[:0]
	for i := range targets {
		tg := &targets[i]
		ok, err := b.reserve(tg, now)
		if err != nil {
			b.releaseTargets(kept)
			return res, err
		}
		if ok {
			kept = append(kept, *tg)
		} else {
			res.Skipped++ // the queue was deleted meanwhile
		}
	}
	targets = kept
	// A publish that delivers nowhere (no subscription, none whose tag
	// matches) is still logged, as a header with no member, so that its
	// count is durable and replicated. It counts once appended
	// (topic_count.go invariant 4).
	// Encode the members' records (each head lives in its target, which
	// stays put from here on) and the header that lists them.
	recs := make([]logRec, 0, len(targets)+1)
	keys := make([]msgKey, 0, len(targets))
	kept = targets[:0]
	for i := range targets {
		tv := targets[i] // copied first: kept[j], j <= i, may overwrite targets[i]
		st := tv.st
		st.mu.Lock()
		if st.dead {
			// The queue was deleted since phase 1: its slab, and the
			// pending slot in it, went with it.
			st.mu.Unlock()
			res.Skipped++
			continue
		}
		kept = append(kept, tv)
		tg := &kept[len(kept)-1] // where its head stays from here on
		s := st.slab.at(tg.idx)
		sum := md5.Sum(tg.body)
		store.bodyRecord(&tg.rec, &tg.head, tg.q.id, st.idx, tg.idx, s, &sum, props, tg.body, false)
		st.mu.Unlock()
		keys = append(keys, msgKey{tg.q.id, tg.seq})
	}
	targets = kept
	recs = append(recs, logRec{typ: recPublish, head: encodePublishHead(t.id, seq, now, keys), count: &t.count})
	for i := range targets {
		recs = append(recs, targets[i].rec)
	}

	// Phase 2: one append for the whole group; wait for the sync mode.
	err = store.waitRoom()
	if err == nil {
		err = store.append(recs)
		if err == nil {
			if err = store.waitDurable(recs[len(recs)-1].pos); err != nil {
				for i := 1; i < len(recs); i++ {
					store.addLive(recs[i].pos, -int64(recs[i].size))
				}
			}
		}
	}
	if err != nil {
		b.releaseTargets(targets)
		if errors.Is(err, wal.ErrRecordTooLarge) {
			// Nothing was written: a delivery's record is larger than the
			// log's write buffer (a group larger than it is taken, wal
			// invariant 12). The caller's error, not the storage's.
			return res, argErr("MessageBody", "as delivered to %d queues needs a log record larger than the log's write buffer (Options.WAL.BufferBytes): %v", len(targets), err)
		}
		b.storageFailed(err)
		return res, err
	}

	// Phase 3: make the messages Delayed or Active.
	for i := range targets {
		tg := &targets[i]
		r := &recs[i+1]
		st := tg.st
		now := b.nowMs()
		st.mu.Lock()
		if st.dead {
			st.mu.Unlock()
			store.addLive(r.pos, -int64(r.size))
			continue
		}
		s := st.slab.at(tg.idx)
		s.bodyPos, s.recSize = r.pos, r.size
		woken := st.advanceLocked(now) // as Send: never ahead of a message visible before now
		if tg.delay > 0 {
			s.setState(stDelayed)
			st.nDelayed++
			woken += st.armLocked(tg.idx, now)
		} else {
			woken += st.activateLocked(tg.idx)
		}
		st.scheduleLocked(now)
		st.flushLocked()
		st.mu.Unlock()
		tg.q.sent.Add(1)
		if tg.push {
			res.Pushes++
		} else {
			res.Delivered++
		}
		if woken > 0 {
			tg.q.waiters.wake(woken)
		}
	}
	return res, nil
}

// reserve takes a pending slot for tg in the next stripe of its queue (as
// Send's phase 1). ok is false if the queue was deleted.
func (b *Broker) reserve(tg *pubTarget, now int64) (ok bool, err error) {
	q := tg.q
	m := q.meta()
	st := &q.stripes[int(q.sendRR.Add(1))%len(q.stripes)]
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.dead {
		return false, nil
	}
	now = max(now, st.wheel.now) // as in Send
	idx, ok := st.slab.alloc()
	if !ok {
		return false, argErr("Messages", "stripe of queue %s is full", q.name)
	}
	s := st.slab.at(idx)
	s.seq = q.seq.Add(1)
	s.setMeta(now, DefaultPriority, stPending)
	s.visOff = uint32(m.delayMs)
	s.expOff = uint32(m.retainMs)
	s.tnext, s.tprev = nilSlot, nilSlot
	s.next, s.prev = nilSlot, nilSlot
	tg.st, tg.idx, tg.delay, tg.seq = st, idx, m.delayMs, s.seq
	return true, nil
}

// releaseTargets frees the pending slots of a publish that failed.
func (b *Broker) releaseTargets(targets []pubTarget) {
	for i := range targets {
		st := targets[i].st
		st.mu.Lock()
		if !st.dead {
			st.slab.release(targets[i].idx)
		}
		st.mu.Unlock()
	}
}

func encodePublishHead(topicID, seq uint64, ms int64, keys []msgKey) []byte {
	le := binary.LittleEndian
	b := make([]byte, 0, publishHeadFixed+16*len(keys))
	b = le.AppendUint64(b, topicID)
	b = le.AppendUint64(b, seq)
	b = le.AppendUint64(b, uint64(ms))
	b = le.AppendUint32(b, uint32(len(keys)))
	for _, k := range keys {
		b = le.AppendUint64(b, k.qid)
		b = le.AppendUint64(b, k.seq)
	}
	return b
}

// decodePublishHead returns the member keys a publish header lists.
func decodePublishHead(b []byte, dst []msgKey) ([]msgKey, error) {
	le := binary.LittleEndian
	if len(b) < publishHeadFixed {
		return dst, fmt.Errorf("%w: publish header of %d bytes", errBadRecord, len(b))
	}
	n := int(le.Uint32(b[24:]))
	if len(b) != publishHeadFixed+16*n {
		return dst, fmt.Errorf("%w: publish header of %d members in %d bytes", errBadRecord, n, len(b))
	}
	for i := range n {
		o := publishHeadFixed + 16*i
		dst = append(dst, msgKey{le.Uint64(b[o:]), le.Uint64(b[o+8:])})
	}
	return dst, nil
}

// pubGroup tracks the publish group a fold is inside (invariant 1).
type pubGroup struct {
	open  bool
	pos   uint64 // the header's position
	topic uint64 // the header's topic and time (topic_count.go)
	ms    int64
	keys  []msgKey // the members, in order
	seen  int      // members folded so far
	ents  []uint32 // their fold entries
}

// member reports whether a record is the group's next member.
func (g *pubGroup) member(typ uint8, payload []byte) bool {
	if !isSendRec(typ) || len(payload) < 16 || g.seen >= len(g.keys) {
		return false
	}
	le := binary.LittleEndian
	k := g.keys[g.seen]
	return le.Uint64(payload[0:8]) == k.qid && le.Uint64(payload[8:16]) == k.seq
}

// abortGroup drops the members folded so far of the open group.
func (f *fold) abortGroup() {
	for _, i := range f.grp.ents {
		m := f.ent(int(i))
		if !m.dead {
			m.dead = true
			delete(f.at, m.k)
		}
	}
	f.aborted++
	f.grp.open = false
	f.grp.ents = f.grp.ents[:0]
}

// openGroup begins the group of a publish header at pos.
func (f *fold) openGroup(pos uint64, payload []byte) error {
	keys, err := decodePublishHead(payload, f.grp.keys[:0])
	if err != nil {
		return err
	}
	le := binary.LittleEndian
	f.grp.keys, f.grp.pos, f.grp.seen, f.grp.ents = keys, pos, 0, f.grp.ents[:0]
	f.grp.topic, f.grp.ms = le.Uint64(payload), int64(le.Uint64(payload[16:]))
	f.grp.open = len(keys) > 0
	if !f.grp.open {
		f.ft.published(f.grp.topic, pos, f.grp.ms) // no member: committed
	}
	return nil
}

// noEnt is the entry of a member that folded to nothing.
const noEnt = ^uint32(0)

// memberFolded notes that the group's next member was folded as entry i
// (noEnt: as nothing).
func (f *fold) memberFolded(i uint32) {
	if i != noEnt {
		f.grp.ents = append(f.grp.ents, i)
	}
	f.grp.seen++
	if f.grp.seen == len(f.grp.keys) {
		f.grp.open = false // committed
		f.ft.published(f.grp.topic, f.grp.pos, f.grp.ms)
		f.grp.ents = f.grp.ents[:0]
	}
}

// notification is what a publish renders for each subscription (spec §3.4).
type notification struct {
	owner, topic string
	id           MessageID
	md5          [16]byte
	body         []byte
	tag          string
	ms           int64
}

// render returns the body a subscription's queue receives.
func (n *notification) render(s *subscription) []byte {
	switch s.cfg.Format {
	case FormatSimplified:
		return append([]byte(nil), n.body...)
	case FormatJSON:
		return n.json(s.name)
	}
	return n.xml(s.name)
}

// xml renders the XML notification: compact, the declaration right before
// the root, elements in the spec's order, MessageTag only when tagged.
func (n *notification) xml(sub string) []byte {
	b := make([]byte, 0, len(n.body)+512)
	b = append(b, `<?xml version="1.0" encoding="utf-8"?><Notification xmlns="http://mns.aliyuncs.com/doc/v1/">`...)
	elem := func(name string, text []byte) {
		b = append(b, '<')
		b = append(b, name...)
		b = append(b, '>')
		b = appendXMLText(b, text)
		b = append(b, '<', '/')
		b = append(b, name...)
		b = append(b, '>')
	}
	elem("TopicOwner", []byte(n.owner))
	elem("TopicName", []byte(n.topic))
	elem("Subscriber", []byte(n.owner))
	elem("SubscriptionName", []byte(sub))
	elem("MessageId", n.id.AppendText(nil))
	elem("Message", n.body)
	elem("MessageMD5", MD5Hex(nil, n.md5))
	if n.tag != "" {
		elem("MessageTag", []byte(n.tag))
	}
	elem("PublishTime", strconv.AppendInt(nil, n.ms, 10))
	return append(b, "</Notification>"...)
}

// json renders the JSON notification: compact, keys in the spec's order,
// MessageTag only when tagged, PublishTime a number, <>& not escaped.
func (n *notification) json(sub string) []byte {
	b := make([]byte, 0, len(n.body)+512)
	field := func(first bool, name string, text []byte) {
		if !first {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, '"', ':')
		b = appendJSONString(b, text)
	}
	b = append(b, '{')
	field(true, "TopicOwner", []byte(n.owner))
	field(false, "TopicName", []byte(n.topic))
	field(false, "Subscriber", []byte(n.owner))
	field(false, "SubscriptionName", []byte(sub))
	field(false, "MessageId", n.id.AppendText(nil))
	field(false, "Message", n.body)
	field(false, "MessageMD5", MD5Hex(nil, n.md5))
	if n.tag != "" {
		field(false, "MessageTag", []byte(n.tag))
	}
	b = append(b, `,"PublishTime":`...)
	b = strconv.AppendInt(b, n.ms, 10)
	return append(b, '}')
}

// appendXMLText appends s with & < > and CR escaped (as the server's
// responses: a raw CR would reach the reader as LF).
func appendXMLText(b, s []byte) []byte {
	for _, c := range s {
		switch c {
		case '&':
			b = append(b, "&amp;"...)
		case '<':
			b = append(b, "&lt;"...)
		case '>':
			b = append(b, "&gt;"...)
		case '\r':
			b = append(b, "&#13;"...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// appendJSONString appends s as a JSON string: quote, backslash and control
// characters escaped, invalid UTF-8 replaced by U+FFFD, nothing else.
func appendJSONString(b, s []byte) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
