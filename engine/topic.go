package engine

// Topics and subscriptions (DESIGN.md "Topics"; spec mns-topic-api.md): a
// topic is a named fan-out point, a subscription sends each message
// published to it, filtered by tag, to an endpoint. This file owns the
// in-memory state and the administrative API; topic_record.go their log
// records and index values; publish.go the fan-out.
//
// State machine of a subscription (its endpoint kind decides delivery):
//
//	from        event                         to          side effects
//	-           Subscribe (new name)          subscribed  recSubscription logged, durable
//	subscribed  Subscribe (same attributes)   subscribed  none
//	subscribed  SetSubscriptionAttributes     subscribed  recSubscription logged, durable
//	subscribed  Unsubscribe / DeleteTopic     -           recUnsubscribe / recTopicDelete logged, durable
//
// Invariants:
//  1. Every change of a topic or subscription is in the log, durable, before
//     the in-memory state shows it (adminRecord), in every sync mode, like a
//     queue's (durable.go invariant 4).
//  2. Topic and subscription ids are broker-unique and never reused (their
//     high-water marks are checkpointed), so a record names one object.
//  3. A subscription value never changes once published in topic.subs: a
//     change installs a new value. Publish therefore reads a consistent set
//     of subscriptions under one RLock and works on it without locks.
//  4. Queue endpoints are delivered to in the publish itself, HTTP
//     endpoints through their push queues (push_queue.go, push.go), which
//     exist exactly while their subscriptions do (push_queue.go invariant
//     2). An HTTP endpoint must be allowed by Options.Push.Allow when it is
//     subscribed, and its address again at every connection. Mail, SMS and
//     mobile push endpoints are stored and never delivered (spec §3.1: out
//     of scope).
//
// Owner: Broker.adminMu serialises every change (and its log write), as for
// queues; topicSet.mu guards the maps and each topic's subscription list.
// Lock order (docs/locking.md): adminMu -> topicSet.mu, and nothing is
// taken under topicSet.mu (Publish copies what it needs and releases it
// before looking up queues or taking stripe locks); countWindow.mu is a
// leaf: taken alone, or under the append's lock (topic_count.go
// invariant 4).

import (
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Topic limits (spec §4).
const (
	MaxTopicNameLen        = 256            // topic and subscription names: 1..256 bytes
	MaxFilterTagLen        = 16             // FilterTag and MessageTag: at most 16 characters
	MaxSubscriptionsPerTop = 100            // subscriptions of one topic
	TopicRetention         = 24 * time.Hour // MessageRetentionPeriod of a topic: fixed
	maxEndpointLen         = 1024           // bytes of a subscription endpoint
)

// NotifyStrategy is a subscription's retry strategy (spec §3.3).
type NotifyStrategy uint8

// Notify strategies. Part of the on-disk format (subscription values);
// never change the numbers.
const (
	BackoffRetry          NotifyStrategy = 1
	ExponentialDecayRetry NotifyStrategy = 2
)

func (s NotifyStrategy) String() string {
	switch s {
	case BackoffRetry:
		return "BACKOFF_RETRY"
	case ExponentialDecayRetry:
		return "EXPONENTIAL_DECAY_RETRY"
	}
	return "UNKNOWN"
}

// ParseNotifyStrategy parses a strategy name in any case.
func ParseNotifyStrategy(s string) (NotifyStrategy, error) {
	switch strings.ToUpper(s) {
	case "BACKOFF_RETRY":
		return BackoffRetry, nil
	case "EXPONENTIAL_DECAY_RETRY":
		return ExponentialDecayRetry, nil
	}
	return 0, argErr("NotifyStrategy", "must be BACKOFF_RETRY or EXPONENTIAL_DECAY_RETRY")
}

// NotifyContentFormat is what a subscription's endpoint receives (spec §3.4).
type NotifyContentFormat uint8

// Content formats. Part of the on-disk format; never change the numbers.
const (
	FormatXML        NotifyContentFormat = 1
	FormatJSON       NotifyContentFormat = 2
	FormatSimplified NotifyContentFormat = 3
)

func (f NotifyContentFormat) String() string {
	switch f {
	case FormatXML:
		return "XML"
	case FormatJSON:
		return "JSON"
	case FormatSimplified:
		return "SIMPLIFIED"
	}
	return "UNKNOWN"
}

// ParseNotifyContentFormat parses a format name in any case. STREAM (Java's
// Function Compute format) is not implemented.
func ParseNotifyContentFormat(s string) (NotifyContentFormat, error) {
	switch strings.ToUpper(s) {
	case "XML":
		return FormatXML, nil
	case "JSON":
		return FormatJSON, nil
	case "SIMPLIFIED":
		return FormatSimplified, nil
	}
	return 0, argErr("NotifyContentFormat", "must be XML, JSON or SIMPLIFIED")
}

// TopicConfig holds a topic's settable attributes.
type TopicConfig struct {
	MaxMessageBytes int  // MaximumMessageSize, MinMessageBytes..MaxMessageBytes
	LoggingEnabled  bool // stored and returned; no effect
}

// DefaultTopicConfig returns the attributes of a topic created without any.
func DefaultTopicConfig() TopicConfig { return TopicConfig{MaxMessageBytes: MaxMessageBytes} }

// Validate checks the attributes' ranges.
func (c TopicConfig) Validate() error {
	if c.MaxMessageBytes < MinMessageBytes || c.MaxMessageBytes > MaxMessageBytes {
		return rangeErr("MaximumMessageSize", MinMessageBytes, MaxMessageBytes, "bytes")
	}
	return nil
}

// TopicPatch names the attributes SetTopicAttributes changes (nil: keep).
type TopicPatch struct {
	MaxMessageBytes *int
	LoggingEnabled  *bool
}

// Apply returns c with the patch's attributes set.
func (p TopicPatch) Apply(c TopicConfig) TopicConfig {
	if p.MaxMessageBytes != nil {
		c.MaxMessageBytes = *p.MaxMessageBytes
	}
	if p.LoggingEnabled != nil {
		c.LoggingEnabled = *p.LoggingEnabled
	}
	return c
}

// TopicInfo is what GetTopicAttributes returns.
type TopicInfo struct {
	Name           string
	CreateTime     time.Time
	LastModifyTime time.Time
	Config         TopicConfig
	Retention      time.Duration // always TopicRetention
	// MessageCount counts the messages published within the last
	// Retention, in five-minute steps. It is durable: it survives restarts,
	// crashes and snapshots (topic_count.go), except across an upgrade from
	// a build before durable counts (2026-12-05), which starts it at 0.
	MessageCount int64
}

// SubscriptionConfig holds a subscription's attributes. Zero Strategy and
// Format mean the defaults (BACKOFF_RETRY, XML).
type SubscriptionConfig struct {
	Endpoint  string // acs:mns:{region}:{account}:queues/{name}, or an out-of-scope kind (spec §3.1)
	FilterTag string // "" receives every message; else only messages with this MessageTag
	Strategy  NotifyStrategy
	Format    NotifyContentFormat
	// DeadLetterQueue, when set, names the queue that receives the
	// notifications an HTTP endpoint did not take within its retries
	// (spec §3.8); "" discards them. It must exist and differ from the
	// subscription's own queue.
	DeadLetterQueue string
}

func (c SubscriptionConfig) withDefaults() SubscriptionConfig {
	if c.Strategy == 0 {
		c.Strategy = BackoffRetry
	}
	if c.Format == 0 {
		c.Format = FormatXML
	}
	return c
}

// SubscriptionPatch names what SetSubscriptionAttributes changes (nil: keep).
type SubscriptionPatch struct {
	Strategy        *NotifyStrategy
	FilterTag       *string
	DeadLetterQueue *string // "" turns dead-lettering off
}

// SubscriptionInfo is what GetSubscriptionAttributes returns.
type SubscriptionInfo struct {
	Topic          string
	Name           string
	Config         SubscriptionConfig
	CreateTime     time.Time
	LastModifyTime time.Time
}

// topicSet is the broker's topics (Broker.topics).
type topicSet struct {
	mu     sync.RWMutex
	byName map[string]*topic // guarded by mu
	byID   map[uint64]*topic // guarded by mu
	names  nameIndex         // guarded by mu: the topic names, sorted
	// closing counts, by subscription id, the Unsubscribes and DeleteTopics
	// waiting for a relayed subscription's deliveries (topic_relay.go
	// invariant 4); publishes skip it. Guarded by mu.
	closing map[uint64]int

	nextTopicID uint64 // guarded by Broker.adminMu
	nextSubID   uint64 // guarded by Broker.adminMu
}

func (ts *topicSet) init() {
	ts.byName = map[string]*topic{}
	ts.byID = map[uint64]*topic{}
	ts.closing = map[uint64]int{}
	ts.nextTopicID, ts.nextSubID = 1, 1
}

// topic is one topic. Its immutable identity is set at creation; meta is
// replaced by SetTopicAttributes.
type topic struct {
	id   uint64
	name string
	meta atomic.Pointer[topicMeta]
	seq  atomic.Uint64 // last topic message sequence number (MessageIds)

	subs     map[string]*subscription // guarded by topicSet.mu; values immutable (invariant 3)
	subNames nameIndex                // guarded by topicSet.mu: the subscription names, sorted

	count countWindow // publishes within the retention (MessageCount)
}

type topicMeta struct {
	cfg      TopicConfig
	createMs int64
	modifyMs int64
}

// subscription is one subscription's value; never changed once installed.
type subscription struct {
	id, topicID        uint64
	name               string
	cfg                SubscriptionConfig
	createMs, modifyMs int64
	kind               endpointKind
	queue              string // the queue of a queue endpoint
	topic              string // the topic's name (for pushes)
	// relay: a queue endpoint whose queue another broker holds
	// (Options.DeadLetterRouter; a queue on another shard of a cluster).
	// Its deliveries go through a push queue, as an HTTP endpoint's do,
	// and the pusher carries them there (topic_relay.go). Not stored: the
	// router's answer for a name never changes.
	relay bool
}

// pushed reports whether s's deliveries go through a push queue: an HTTP
// endpoint, or a queue another broker holds.
func (s *subscription) pushed() bool { return s.kind == endpointHTTP || s.relay }

func newTopic(id uint64, name string, m topicMeta) *topic {
	t := &topic{id: id, name: name, subs: map[string]*subscription{}}
	t.meta.Store(&m)
	return t
}

// addTopicLocked registers t (topicSet.mu held, or start-up).
func (ts *topicSet) addTopicLocked(t *topic) {
	ts.byName[t.name] = t
	ts.byID[t.id] = t
	ts.names.insert(t.name)
}

// putSubLocked installs s in t (topicSet.mu held, or start-up).
func (t *topic) putSubLocked(s *subscription) {
	if _, ok := t.subs[s.name]; !ok {
		t.subNames.insert(s.name)
	}
	t.subs[s.name] = s
}

// topicByName returns the named topic or ErrTopicNotExist.
func (b *Broker) topicByName(name string) (*topic, error) {
	b.topics.mu.RLock()
	t := b.topics.byName[name]
	b.topics.mu.RUnlock()
	if t == nil {
		if b.closed.Load() {
			return nil, ErrClosed
		}
		return nil, ErrTopicNotExist
	}
	return t, nil
}

// CreateTopic creates a topic. If a topic of that name exists with the same
// attributes it returns created=false and no error; with other attributes
// ErrTopicAlreadyExist. The topic is durable when CreateTopic returns.
func (b *Broker) CreateTopic(name string, cfg TopicConfig) (created bool, err error) {
	if err := b.usable(); err != nil {
		return false, err
	}
	if err := validateTopicName(name, ErrTopicNameLength, ErrInvalidTopicName); err != nil {
		return false, err
	}
	if err := cfg.Validate(); err != nil {
		return false, err
	}
	if err := b.store.acceptNew(); err != nil {
		return false, err
	}
	if err := b.store.enter(); err != nil {
		return false, err
	}
	defer b.store.leave()
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	if t, _ := b.topicByName(name); t != nil {
		if t.meta.Load().cfg == cfg {
			return false, nil
		}
		return false, ErrTopicAlreadyExist
	}
	now := b.nowMs()
	v := topicVal{id: b.topics.nextTopicID, createMs: now, modifyMs: now, cfg: cfg, name: name}
	if err := b.logQueueRecord(recTopic, v.encode()); err != nil {
		return false, err
	}
	b.topics.nextTopicID++
	t := newTopic(v.id, name, topicMeta{cfg: cfg, createMs: now, modifyMs: now})
	t.seq.Store(b.store.seqBase())
	b.topics.mu.Lock()
	b.topics.addTopicLocked(t)
	b.topics.mu.Unlock()
	return true, nil
}

// SetTopicAttributes changes the attributes named by p.
func (b *Broker) SetTopicAttributes(name string, p TopicPatch) error {
	if err := b.usable(); err != nil {
		return err
	}
	if err := b.store.enter(); err != nil {
		return err
	}
	defer b.store.leave()
	if err := b.lockAdmin(); err != nil {
		return err
	}
	defer b.adminMu.Unlock()
	t, err := b.topicByName(name)
	if err != nil {
		return err
	}
	old := t.meta.Load()
	cfg := p.Apply(old.cfg)
	if err := cfg.Validate(); err != nil {
		return err
	}
	m := topicMeta{cfg: cfg, createMs: old.createMs, modifyMs: b.nowMs()}
	v := topicVal{id: t.id, createMs: m.createMs, modifyMs: m.modifyMs, cfg: cfg, name: t.name}
	if err := b.logQueueRecord(recTopic, v.encode()); err != nil {
		return err
	}
	t.meta.Store(&m)
	return nil
}

// GetTopicAttributes returns the named topic's attributes.
func (b *Broker) GetTopicAttributes(name string) (TopicInfo, error) {
	if err := b.readable(); err != nil {
		return TopicInfo{}, err
	}
	t, err := b.topicByName(name)
	if err != nil {
		return TopicInfo{}, err
	}
	m := t.meta.Load()
	return TopicInfo{Name: t.name, CreateTime: time.UnixMilli(m.createMs), LastModifyTime: time.UnixMilli(m.modifyMs),
		Config: m.cfg, Retention: TopicRetention, MessageCount: t.count.total(b.nowMs())}, nil
}

// DeleteTopic deletes a topic and its subscriptions (ErrTopicNotExist if
// there is none; the wire answers that with 204 all the same). Messages
// already delivered to queues stay there; notifications waiting for an
// HTTP endpoint are discarded (PushStats.Discarded), as by Unsubscribe,
// which it also follows for relayed deliveries.
func (b *Broker) DeleteTopic(name string) error {
	if err := b.usable(); err != nil {
		return err
	}
	if t, err := b.topicByName(name); err == nil {
		b.topics.mu.RLock()
		subs := make([]*subscription, 0, len(t.subs))
		for _, s := range t.subs {
			subs = append(subs, s)
		}
		b.topics.mu.RUnlock()
		reopen := b.drainRelays(subs)
		defer reopen()
	}
	if err := b.store.enter(); err != nil {
		return err
	}
	defer b.store.leave()
	if err := b.lockAdmin(); err != nil {
		return err
	}
	defer b.adminMu.Unlock()
	t, err := b.topicByName(name)
	if err != nil {
		return err
	}
	b.topics.mu.RLock()
	ids := make([]uint64, 0, len(t.subs))
	subs := make([]*subscription, 0, len(t.subs))
	for n := range t.subNames.all() {
		ids = append(ids, t.subs[n].id)
		subs = append(subs, t.subs[n])
	}
	b.topics.mu.RUnlock()
	if err := b.logQueueRecord(recTopicDelete, encodeTopicDelete(t.id, ids)); err != nil {
		return err
	}
	b.topics.mu.Lock()
	delete(b.topics.byName, t.name)
	delete(b.topics.byID, t.id)
	b.topics.names.remove(t.name)
	b.topics.mu.Unlock()
	for _, s := range subs {
		if err := b.dropPushLocked(s); err != nil {
			return err
		}
	}
	return nil
}

// ListTopics returns up to limit (1..1000, 0 means 1000) topic names in
// byte order that start with prefix and are >= marker, and the marker of
// the next page ("" when there is none), as ListQueues.
func (b *Broker) ListTopics(prefix, marker string, limit int) (names []string, next string, err error) {
	if err := b.readable(); err != nil {
		return nil, "", err
	}
	b.topics.mu.RLock()
	defer b.topics.mu.RUnlock()
	return b.topics.names.page(prefix, marker, limit, "topics")
}

// checkSubscription validates cfg (with defaults) for topic t: the
// endpoint's form and, for a queue endpoint, its queue (spec §2.6).
func (b *Broker) checkSubscription(t *topic, cfg SubscriptionConfig) (endpointKind, string, error) {
	if err := checkTag("FilterTag", cfg.FilterTag); err != nil {
		return 0, "", err
	}
	if cfg.Strategy != BackoffRetry && cfg.Strategy != ExponentialDecayRetry {
		return 0, "", argErr("NotifyStrategy", "must be BACKOFF_RETRY or EXPONENTIAL_DECAY_RETRY")
	}
	if cfg.Format < FormatXML || cfg.Format > FormatSimplified {
		return 0, "", argErr("NotifyContentFormat", "must be XML, JSON or SIMPLIFIED")
	}
	kind, qname, err := parseEndpoint(cfg.Endpoint)
	if err != nil {
		return 0, "", err
	}
	if kind == endpointHTTP {
		// Not in parsePushURL: subscriptions stored by earlier versions are
		// parsed there at every start. A port out of range was taken, and
		// every push failed until its retries ended (embedding audit 2).
		if u, err := url.Parse(cfg.Endpoint); err == nil && u.Port() != "" {
			if p, err := strconv.Atoi(u.Port()); err != nil || p < 1 || p > 65535 {
				return 0, "", &EndpointError{Endpoint: cfg.Endpoint, Msg: "its port must be 1 to 65535"}
			}
		}
	}
	if kind == endpointQueue {
		if b.relayed(qname) {
			// Its MaximumMessageSize is not known here, and not checked:
			// its deliveries are stored whatever their size
			// (Queue.AcceptMoved), as a local queue's are.
			if !b.opts.DeadLetterRouter.Exists(qname) {
				return 0, "", &EndpointError{Endpoint: cfg.Endpoint, Msg: "its queue " + qname + " does not exist"}
			}
		} else {
			q, err := b.Queue(qname)
			if err != nil {
				return 0, "", &EndpointError{Endpoint: cfg.Endpoint, Msg: "its queue " + qname + " does not exist"}
			}
			if q.meta().maxBody < t.meta.Load().cfg.MaxMessageBytes {
				return 0, "", &EndpointError{Endpoint: cfg.Endpoint, Msg: "its queue's MaximumMessageSize is smaller than the topic's"}
			}
		}
	}
	if kind == endpointHTTP {
		if err := b.pusher.allowed(cfg.Endpoint); err != nil {
			return 0, "", &EndpointError{Endpoint: cfg.Endpoint, Msg: err.Error()}
		}
	}
	if err := b.checkSubDeadLetter(cfg.DeadLetterQueue, qname); err != nil {
		return 0, "", err
	}
	return kind, qname, nil
}

// Subscribe subscribes name to a topic. If the subscription exists with the
// same attributes it returns created=false and no error; with other
// attributes ErrSubscriptionAlreadyExist. It is durable when Subscribe
// returns; messages published afterwards are delivered to it.
func (b *Broker) Subscribe(topicName, name string, cfg SubscriptionConfig) (created bool, err error) {
	if err := b.usable(); err != nil {
		return false, err
	}
	if err := validateTopicName(name, ErrSubscriptionNameLength, ErrInvalidSubscriptionName); err != nil {
		return false, err
	}
	cfg = cfg.withDefaults()
	if kind, qname, err := parseEndpoint(cfg.Endpoint); err == nil && kind == endpointQueue {
		b.catchUp(qname)
	}
	b.catchUp(cfg.DeadLetterQueue)
	if err := b.store.enter(); err != nil {
		return false, err
	}
	defer b.store.leave()
	if err := b.lockAdmin(); err != nil {
		return false, err
	}
	defer b.adminMu.Unlock()
	t, err := b.topicByName(topicName)
	if err != nil {
		return false, err
	}
	b.topics.mu.RLock()
	old, n := t.subs[name], len(t.subs)
	b.topics.mu.RUnlock()
	if old != nil {
		if sameSubscription(old.cfg, cfg) {
			return false, nil
		}
		return false, ErrSubscriptionAlreadyExist
	}
	kind, qname, err := b.checkSubscription(t, cfg)
	if err != nil {
		return false, err
	}
	if n >= MaxSubscriptionsPerTop {
		return false, argErr("Topic", "has at most %d subscriptions", MaxSubscriptionsPerTop)
	}
	now := b.nowMs()
	s := &subscription{id: b.topics.nextSubID, topicID: t.id, name: name, cfg: cfg, createMs: now, modifyMs: now, kind: kind, queue: qname, topic: t.name}
	s.relay = kind == endpointQueue && b.relayed(qname)
	b.topics.nextSubID++ // burnt if a write below fails: ids are never reused
	var pq *Queue
	if s.pushed() {
		// The push queue first: a crash before the subscription's record
		// leaves an orphan, which the next start deletes (push_queue.go
		// invariant 2).
		if pq, err = b.createPushQueueLocked(s.id); err != nil {
			return false, err
		}
	}
	if err := b.logQueueRecord(recSubscription, encodeSub(s)); err != nil {
		return false, err
	}
	b.topics.mu.Lock()
	t.putSubLocked(s)
	b.topics.mu.Unlock()
	if pq != nil {
		b.pusher.start(s, pq)
	}
	return true, nil
}

// subByName returns topic t's subscription name, or ErrSubscriptionNotExist.
func (b *Broker) subByName(t *topic, name string) (*subscription, error) {
	b.topics.mu.RLock()
	s := t.subs[name]
	b.topics.mu.RUnlock()
	if s == nil {
		return nil, ErrSubscriptionNotExist
	}
	return s, nil
}

// SetSubscriptionAttributes changes the NotifyStrategy, FilterTag and
// dead-letter queue named by p (the endpoint and the content format never
// change).
func (b *Broker) SetSubscriptionAttributes(topicName, name string, p SubscriptionPatch) error {
	if err := b.usable(); err != nil {
		return err
	}
	if p.DeadLetterQueue != nil {
		b.catchUp(*p.DeadLetterQueue)
	}
	if err := b.store.enter(); err != nil {
		return err
	}
	defer b.store.leave()
	if err := b.lockAdmin(); err != nil {
		return err
	}
	defer b.adminMu.Unlock()
	t, err := b.topicByName(topicName)
	if err != nil {
		return err
	}
	old, err := b.subByName(t, name)
	if err != nil {
		return err
	}
	s := *old
	if p.Strategy != nil {
		if *p.Strategy != BackoffRetry && *p.Strategy != ExponentialDecayRetry {
			return argErr("NotifyStrategy", "must be BACKOFF_RETRY or EXPONENTIAL_DECAY_RETRY")
		}
		s.cfg.Strategy = *p.Strategy
	}
	if p.FilterTag != nil {
		if err := checkTag("FilterTag", *p.FilterTag); err != nil {
			return err
		}
		s.cfg.FilterTag = *p.FilterTag
	}
	if p.DeadLetterQueue != nil && *p.DeadLetterQueue != s.cfg.DeadLetterQueue {
		if err := b.checkSubDeadLetter(*p.DeadLetterQueue, s.queue); err != nil {
			return err
		}
		s.cfg.DeadLetterQueue = *p.DeadLetterQueue
	}
	s.modifyMs = b.nowMs()
	if err := b.logQueueRecord(recSubscription, encodeSub(&s)); err != nil {
		return err
	}
	b.topics.mu.Lock()
	t.putSubLocked(&s)
	b.topics.mu.Unlock()
	b.pusher.update(&s)
	return nil
}

// GetSubscriptionAttributes returns a subscription's attributes.
func (b *Broker) GetSubscriptionAttributes(topicName, name string) (SubscriptionInfo, error) {
	if err := b.readable(); err != nil {
		return SubscriptionInfo{}, err
	}
	t, err := b.topicByName(topicName)
	if err != nil {
		return SubscriptionInfo{}, err
	}
	s, err := b.subByName(t, name)
	if err != nil {
		return SubscriptionInfo{}, err
	}
	return SubscriptionInfo{Topic: t.name, Name: s.name, Config: s.cfg,
		CreateTime: time.UnixMilli(s.createMs), LastModifyTime: time.UnixMilli(s.modifyMs)}, nil
}

// Unsubscribe deletes a subscription: ErrTopicNotExist for a missing topic,
// ErrSubscriptionNotExist for a missing subscription (the wire answers
// that with 204 all the same). The notifications of an HTTP subscription
// still waiting for its endpoint (retries to come) are discarded, counted
// in PushStats.Discarded and logged, even with a dead-letter queue: to
// change an endpoint without losing them, subscribe the new one first and
// unsubscribe the old one once its PushStats backlog is 0. A queue
// subscription relayed to another broker is first closed to publishes,
// and its deliveries waiting for their hop are waited for, at most
// PushOptions.RelayDrain (topic_relay.go invariant 4).
func (b *Broker) Unsubscribe(topicName, name string) error {
	if err := b.usable(); err != nil {
		return err
	}
	if t, err := b.topicByName(topicName); err == nil {
		if s, err := b.subByName(t, name); err == nil {
			reopen := b.drainRelays([]*subscription{s})
			defer reopen() // a subscription that stays is published to again
		}
	}
	if err := b.store.enter(); err != nil {
		return err
	}
	defer b.store.leave()
	if err := b.lockAdmin(); err != nil {
		return err
	}
	defer b.adminMu.Unlock()
	t, err := b.topicByName(topicName)
	if err != nil {
		return err
	}
	s, err := b.subByName(t, name)
	if err != nil {
		return err
	}
	if err := b.logQueueRecord(recUnsubscribe, encodeUnsubscribe(s.id, t.id)); err != nil {
		return err
	}
	b.topics.mu.Lock()
	delete(t.subs, name)
	t.subNames.remove(name)
	b.topics.mu.Unlock()
	return b.dropPushLocked(s)
}

// ListSubscriptions pages through a topic's subscription names as
// ListTopics does.
func (b *Broker) ListSubscriptions(topicName, prefix, marker string, limit int) (names []string, next string, err error) {
	if err := b.readable(); err != nil {
		return nil, "", err
	}
	t, err := b.topicByName(topicName)
	if err != nil {
		return nil, "", err
	}
	b.topics.mu.RLock()
	defer b.topics.mu.RUnlock()
	return t.subNames.page(prefix, marker, limit, "subscriptions")
}

// QueueEndpointName returns the queue a queue endpoint
// (acs:mns:{region}:{account}:queues/{queue}) names, and whether ep is a
// valid one.
func QueueEndpointName(ep string) (string, bool) {
	kind, name, err := parseEndpoint(ep)
	return name, err == nil && kind == endpointQueue
}
