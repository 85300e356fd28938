package engine

// Model-based randomized test of topics: a plain reference model (maps)
// and the engine are driven by the same seeded random sequence of topic
// and subscription admin (create, set, delete, subscribe with a filter tag
// and a format, set the tag, unsubscribe), publishes, queue creates and
// deletes under the subscriptions, drains of the subscribed queues,
// listings, clock jumps (the topic's MessageCount window included), and
// in durable mode restarts, crashes and power losses (modelRun.restart).
//
// What must hold after every step (topic.go, publish.go):
//  1. Every error and every "created" answer is the model's.
//  2. A publish is delivered once to the queue of every subscription
//     whose FilterTag is empty or equals its tag and whose queue exists at
//     the publish, in the subscription's format, and to no other queue:
//     a drain receives exactly the model's deliveries (a multiset), and
//     PublishResult's Delivered and Skipped count them.
//  3. Listings, attributes and MessageCount (the publishes of the last
//     TopicRetention, in five-minute buckets) are the model's, and all of
//     it survives a restart, a crash and a power loss after a Sync.

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

type tmSub struct {
	queue    string
	cfg      SubscriptionConfig
	createMs int64
	modifyMs int64
}

type tmTopic struct {
	cfg      TopicConfig
	createMs int64
	modifyMs int64
	subs     map[string]*tmSub
	pubs     []int64 // publish times, for MessageCount
}

// tmDelivery is one copy of a publish that a queue must hold.
type tmDelivery struct {
	topic, sub, id, body, tag string
	format                    NotifyContentFormat
}

type tmQueue struct {
	maxBody int
	held    []tmDelivery
}

type topicModelRun struct {
	*modelRun
	topics map[string]*tmTopic
	queues map[string]*tmQueue
	pubSeq int
	start  int64
}

var (
	tmTopicNames = []string{"ta", "tb", "tc"}
	tmSubNames   = []string{"s1", "s2", "s3", "s4"}
	tmQueueNames = []string{"qa", "qb", "qc"}
	tmTags       = []string{"", "red", "blue"}
	tmFormats    = []NotifyContentFormat{FormatXML, FormatJSON, FormatSimplified}
)

func (r *topicModelRun) pick(s []string) string { return s[r.rnd.IntN(len(s))] }

// count is the model's MessageCount of t now (topic_count.go's buckets).
func (r *topicModelRun) count(t *tmTopic) int64 {
	k := r.m.now / countBucketMs
	var n int64
	for _, ms := range t.pubs {
		if b := ms / countBucketMs; b > k-countBuckets && b <= k {
			n++
		}
	}
	return n
}

// expect fails unless err is want (errors.Is; nil: no error).
func (r *topicModelRun) expect(op string, err, want error) {
	r.t.Helper()
	if want == nil && err != nil || want != nil && !errors.Is(err, want) {
		r.fail("%s: %v, want %v", op, err, want)
	}
}

func (r *topicModelRun) step() {
	switch k := r.rnd.IntN(100); {
	case k < 8:
		r.createTopic()
	case k < 10:
		r.deleteTopic()
	case k < 13:
		r.setTopic()
	case k < 25:
		r.subscribe()
	case k < 29:
		r.unsubscribe()
	case k < 33:
		r.setSub()
	case k < 60:
		r.publish()
	case k < 66:
		r.createQueue()
	case k < 68:
		r.deleteQueue()
	case k < 80:
		r.drain(r.pick(tmQueueNames))
	case k < 84:
		r.list()
	case k < 89:
		r.attrs()
	case k < 98:
		r.tick()
	default:
		if r.dir != "" {
			r.attrs()
			r.restart()
			r.attrs()
		}
	}
}

func (r *topicModelRun) tick() {
	var d int64
	switch k := r.rnd.IntN(20); {
	case k < 12:
		d = 1 + r.rnd.Int64N(2000)
	case k < 19:
		d = r.rnd.Int64N(int64(10 * time.Minute / time.Millisecond))
	default:
		d = int64(time.Hour/time.Millisecond) * (1 + r.rnd.Int64N(6))
	}
	// The queues keep their messages 7 days: the whole run stays within 5.
	if r.m.now+d-r.start > int64(5*24*time.Hour/time.Millisecond) {
		return
	}
	r.logf("advance %d", d)
	r.clk.Advance(time.Duration(d) * time.Millisecond)
	r.m.now += d
}

func (r *topicModelRun) createTopic() {
	name := r.pick(tmTopicNames)
	cfg := TopicConfig{MaxMessageBytes: []int{1024, MaxMessageBytes}[r.rnd.IntN(2)], LoggingEnabled: r.rnd.IntN(4) == 0}
	r.logf("CreateTopic %s %+v", name, cfg)
	created, err := r.b.CreateTopic(name, cfg)
	switch t := r.topics[name]; {
	case t == nil:
		r.expect("CreateTopic", err, nil)
		if !created {
			r.fail("CreateTopic %s: not created", name)
		}
		r.topics[name] = &tmTopic{cfg: cfg, createMs: r.m.now, modifyMs: r.m.now, subs: map[string]*tmSub{}}
	case t.cfg == cfg:
		r.expect("CreateTopic again", err, nil)
		if created {
			r.fail("CreateTopic %s: created again", name)
		}
	default:
		r.expect("CreateTopic with other attributes", err, ErrTopicAlreadyExist)
	}
}

func (r *topicModelRun) deleteTopic() {
	name := r.pick(tmTopicNames)
	r.logf("DeleteTopic %s", name)
	err := r.b.DeleteTopic(name)
	if r.topics[name] == nil {
		r.expect("DeleteTopic", err, ErrTopicNotExist)
		return
	}
	r.expect("DeleteTopic", err, nil)
	delete(r.topics, name)
}

func (r *topicModelRun) setTopic() {
	name := r.pick(tmTopicNames)
	var p TopicPatch
	if r.rnd.IntN(2) == 0 {
		n := []int{1024, 4096, MaxMessageBytes, MaxMessageBytes + 1}[r.rnd.IntN(4)]
		p.MaxMessageBytes = &n
	} else {
		on := r.rnd.IntN(2) == 0
		p.LoggingEnabled = &on
	}
	r.logf("SetTopicAttributes %s max %v logging %v", name, p.MaxMessageBytes, p.LoggingEnabled)
	err := r.b.SetTopicAttributes(name, p)
	t := r.topics[name]
	switch {
	case t == nil:
		r.expect("SetTopicAttributes", err, ErrTopicNotExist)
	case p.MaxMessageBytes != nil && *p.MaxMessageBytes > MaxMessageBytes:
		r.expect("SetTopicAttributes out of range", err, ErrInvalidArgument)
	default:
		r.expect("SetTopicAttributes", err, nil)
		t.cfg = p.Apply(t.cfg)
		t.modifyMs = r.m.now
	}
}

func (r *topicModelRun) subscribe() {
	topic, name, queue := r.pick(tmTopicNames), r.pick(tmSubNames), r.pick(tmQueueNames)
	cfg := SubscriptionConfig{Endpoint: qEndpoint(queue), FilterTag: r.pick(tmTags), Format: tmFormats[r.rnd.IntN(len(tmFormats))]}
	r.logf("Subscribe %s/%s -> %s tag %q format %v", topic, name, queue, cfg.FilterTag, cfg.Format)
	created, err := r.b.Subscribe(topic, name, cfg)
	cfg = cfg.withDefaults()
	t := r.topics[topic]
	if t == nil {
		r.expect("Subscribe", err, ErrTopicNotExist)
		return
	}
	if old := t.subs[name]; old != nil {
		if old.cfg == cfg {
			r.expect("Subscribe again", err, nil)
			if created {
				r.fail("Subscribe %s/%s: created again", topic, name)
			}
		} else {
			r.expect("Subscribe with other attributes", err, ErrSubscriptionAlreadyExist)
		}
		return
	}
	q := r.queues[queue]
	if q == nil || q.maxBody < t.cfg.MaxMessageBytes {
		var ee *EndpointError
		if !errors.As(err, &ee) {
			r.fail("Subscribe to %s (queue %v, topic max %d): %v, want an EndpointError", queue, q, t.cfg.MaxMessageBytes, err)
		}
		return
	}
	r.expect("Subscribe", err, nil)
	if !created {
		r.fail("Subscribe %s/%s: not created", topic, name)
	}
	t.subs[name] = &tmSub{queue: queue, cfg: cfg, createMs: r.m.now, modifyMs: r.m.now}
}

func (r *topicModelRun) unsubscribe() {
	topic, name := r.pick(tmTopicNames), r.pick(tmSubNames)
	r.logf("Unsubscribe %s/%s", topic, name)
	err := r.b.Unsubscribe(topic, name)
	switch t := r.topics[topic]; {
	case t == nil:
		r.expect("Unsubscribe", err, ErrTopicNotExist)
	case t.subs[name] == nil:
		r.expect("Unsubscribe", err, ErrSubscriptionNotExist)
	default:
		r.expect("Unsubscribe", err, nil)
		delete(t.subs, name)
	}
}

func (r *topicModelRun) setSub() {
	topic, name, tag := r.pick(tmTopicNames), r.pick(tmSubNames), r.pick(tmTags)
	r.logf("SetSubscriptionAttributes %s/%s tag %q", topic, name, tag)
	err := r.b.SetSubscriptionAttributes(topic, name, SubscriptionPatch{FilterTag: &tag})
	switch t := r.topics[topic]; {
	case t == nil:
		r.expect("SetSubscriptionAttributes", err, ErrTopicNotExist)
	case t.subs[name] == nil:
		r.expect("SetSubscriptionAttributes", err, ErrSubscriptionNotExist)
	default:
		r.expect("SetSubscriptionAttributes", err, nil)
		t.subs[name].cfg.FilterTag = tag
		t.subs[name].modifyMs = r.m.now
	}
}

func (r *topicModelRun) publish() {
	topic, tag := r.pick(tmTopicNames), r.pick(tmTags)
	r.pubSeq++
	body := fmt.Sprintf("m%d-", r.pubSeq)
	body += strings.Repeat("x", r.rnd.IntN(40))
	t := r.topics[topic]
	if t != nil && r.rnd.IntN(20) == 0 {
		body += strings.Repeat("y", t.cfg.MaxMessageBytes+1-len(body)) // one byte too many
	}
	r.logf("Publish %s tag %q %d bytes", topic, tag, len(body))
	res, err := r.b.Publish(topic, PublishInput{Body: []byte(body), Tag: tag, Owner: "1234567890"})
	switch {
	case t == nil:
		r.expect("Publish", err, ErrTopicNotExist)
		return
	case len(body) > t.cfg.MaxMessageBytes:
		r.expect("Publish too large", err, ErrInvalidArgument)
		return
	}
	r.expect("Publish", err, nil)
	t.pubs = append(t.pubs, r.m.now)
	var delivered, skipped int
	for name, s := range t.subs {
		if s.cfg.FilterTag != "" && s.cfg.FilterTag != tag {
			continue
		}
		q := r.queues[s.queue]
		if q == nil {
			skipped++
			continue
		}
		delivered++
		q.held = append(q.held, tmDelivery{topic: topic, sub: name, id: res.ID.String(), body: body, tag: tag, format: s.cfg.Format})
	}
	if res.Delivered != delivered || res.Skipped != skipped || res.Pushes != 0 {
		r.fail("Publish %s tag %q: %+v, want %d delivered and %d skipped", topic, tag, res, delivered, skipped)
	}
}

func (r *topicModelRun) createQueue() {
	name := r.pick(tmQueueNames)
	if r.queues[name] != nil {
		return
	}
	cfg := DefaultQueueConfig()
	cfg.Retention = 7 * 24 * time.Hour
	cfg.MaxMessageBytes = []int{1024, MaxMessageBytes}[r.rnd.IntN(2)]
	r.logf("CreateQueue %s max %d", name, cfg.MaxMessageBytes)
	if _, err := r.b.CreateQueue(name, cfg); err != nil {
		r.fail("CreateQueue %s: %v", name, err)
	}
	r.queues[name] = &tmQueue{maxBody: cfg.MaxMessageBytes}
}

func (r *topicModelRun) deleteQueue() {
	name := r.pick(tmQueueNames)
	r.logf("DeleteQueue %s", name)
	err := r.b.DeleteQueue(name)
	if r.queues[name] == nil {
		r.expect("DeleteQueue", err, ErrQueueNotExist)
		return
	}
	r.expect("DeleteQueue", err, nil)
	delete(r.queues, name)
}

// tmNotification is what an XML or JSON rendering must say.
type tmNotification struct {
	TopicName        string
	SubscriptionName string
	MessageID        string `xml:"MessageId" json:"MessageId"`
	Message          string
	MessageTag       string
}

// drain receives everything queue holds, checks it against the model's
// deliveries (invariant 2) and deletes it.
func (r *topicModelRun) drain(queue string) {
	mq := r.queues[queue]
	r.logf("drain %s (%d held)", queue, len(mqHeld(mq)))
	q, err := r.b.Queue(queue)
	if mq == nil {
		r.expect("Queue", err, ErrQueueNotExist)
		return
	}
	r.expect("Queue", err, nil)
	var got []tmDelivery
	for range 1000 {
		msgs, err := q.Receive(context.Background(), ReceiveOptions{Max: MaxBatch, HasWait: true}, nil)
		if errors.Is(err, ErrMessageNotExist) {
			break
		}
		r.expect("Receive", err, nil)
		handles := make([]ReceiptHandle, 0, len(msgs))
		for _, m := range msgs {
			got = append(got, r.decode(queue, m.Body))
			handles = append(handles, m.Handle)
		}
		errs := make([]error, len(handles))
		if failed, err := q.Delete(handles, errs); err != nil || failed > 0 {
			r.fail("Delete: %v %v", err, errs)
		}
	}
	// A SIMPLIFIED delivery carries the body alone: only its body can be
	// compared (bodies are unique to their publish).
	want := slices.Clone(mq.held)
	for i := range want {
		if want[i].format == FormatSimplified {
			want[i] = tmDelivery{body: want[i].body, format: FormatSimplified}
		}
	}
	cmp := func(a, b tmDelivery) int {
		return strings.Compare(fmt.Sprint(a.format, a.id, a.sub, a.body), fmt.Sprint(b.format, b.id, b.sub, b.body))
	}
	slices.SortFunc(want, cmp)
	slices.SortFunc(got, cmp)
	if !slices.Equal(got, want) {
		r.fail("drain %s:\n got %v\nwant %v", queue, got, want)
	}
	mq.held = nil
}

func mqHeld(q *tmQueue) []tmDelivery {
	if q == nil {
		return nil
	}
	return q.held
}

// decode reads a delivery's rendering: XML and JSON must parse and name
// their topic, subscription and message; SIMPLIFIED is the body.
func (r *topicModelRun) decode(queue string, body []byte) tmDelivery {
	var n tmNotification
	var format NotifyContentFormat
	switch {
	case strings.HasPrefix(string(body), "<?xml"):
		format = FormatXML
		if err := xml.Unmarshal(body, &n); err != nil {
			r.fail("%s: an XML notification that does not parse: %v: %q", queue, err, body)
		}
	case strings.HasPrefix(string(body), "{"):
		format = FormatJSON
		if err := json.Unmarshal(body, &n); err != nil {
			r.fail("%s: a JSON notification that does not parse: %v: %q", queue, err, body)
		}
	default:
		return tmDelivery{body: string(body), format: FormatSimplified}
	}
	return tmDelivery{topic: n.TopicName, sub: n.SubscriptionName, id: n.MessageID, body: n.Message, tag: n.MessageTag, format: format}
}

// list compares ListTopics and every topic's ListSubscriptions, paged
// at random, with the model.
func (r *topicModelRun) list() {
	limit := 1 + r.rnd.IntN(4)
	r.logf("list (pages of %d)", limit)
	page := func(what string, f func(marker string) ([]string, string, error), want []string) {
		var all []string
		marker := ""
		for range 100 {
			names, next, err := f(marker)
			if err != nil {
				r.fail("%s: %v", what, err)
			}
			all = append(all, names...)
			if next == "" {
				break
			}
			marker = next
		}
		slices.Sort(want)
		if !slices.Equal(all, want) && len(all)+len(want) > 0 {
			r.fail("%s: %v, want %v", what, all, want)
		}
	}
	var topics []string
	for name := range r.topics {
		topics = append(topics, name)
	}
	page("ListTopics", func(m string) ([]string, string, error) { return r.b.ListTopics("", m, limit) }, topics)
	for _, name := range tmTopicNames {
		t := r.topics[name]
		if t == nil {
			if _, _, err := r.b.ListSubscriptions(name, "", "", limit); !errors.Is(err, ErrTopicNotExist) {
				r.fail("ListSubscriptions %s: %v, want ErrTopicNotExist", name, err)
			}
			continue
		}
		var subs []string
		for s := range t.subs {
			subs = append(subs, s)
		}
		page("ListSubscriptions "+name, func(m string) ([]string, string, error) { return r.b.ListSubscriptions(name, "", m, limit) }, subs)
	}
}

// attrs compares every topic's and subscription's attributes, and the
// topics' MessageCount, with the model.
func (r *topicModelRun) attrs() {
	r.logf("attributes")
	for _, name := range tmTopicNames {
		info, err := r.b.GetTopicAttributes(name)
		t := r.topics[name]
		if t == nil {
			r.expect("GetTopicAttributes", err, ErrTopicNotExist)
			continue
		}
		r.expect("GetTopicAttributes", err, nil)
		if info.Config != t.cfg || info.CreateTime.UnixMilli() != t.createMs || info.LastModifyTime.UnixMilli() != t.modifyMs || info.MessageCount != r.count(t) {
			r.fail("GetTopicAttributes %s: %+v, want %+v created %d modified %d count %d", name, info, t.cfg, t.createMs, t.modifyMs, r.count(t))
		}
		for _, sn := range tmSubNames {
			si, err := r.b.GetSubscriptionAttributes(name, sn)
			s := t.subs[sn]
			if s == nil {
				r.expect("GetSubscriptionAttributes", err, ErrSubscriptionNotExist)
				continue
			}
			r.expect("GetSubscriptionAttributes", err, nil)
			if si.Config != s.cfg || si.CreateTime.UnixMilli() != s.createMs || si.LastModifyTime.UnixMilli() != s.modifyMs {
				r.fail("GetSubscriptionAttributes %s/%s: %+v, want %+v created %d modified %d", name, sn, si, s.cfg, s.createMs, s.modifyMs)
			}
		}
	}
}

func runTopicModel(t *testing.T, seed uint64, stripes, ops int, dir string) {
	r := &topicModelRun{modelRun: newModelRun(t, seed, stripes, dir), topics: map[string]*tmTopic{}, queues: map[string]*tmQueue{}}
	r.start = r.m.now
	for range ops {
		r.step()
	}
	r.attrs()
	for _, q := range tmQueueNames {
		r.drain(q)
	}
}

// TestTopicModel runs the topic model in memory and durably (with
// restarts, crashes and power losses), on one stripe and on four.
func TestTopicModel(t *testing.T) {
	seeds, ops := modelRuns(t, modelSize{[]uint64{1, 2, 3}, 4_000}, modelSize{[]uint64{1, 2}, 2_000},
		modelSize{[]uint64{11, 12, 13, 14, 15, 16}, 40_000})
	for _, seed := range seeds {
		for _, stripes := range []int{1, 4} {
			for _, durable := range []bool{false, true} {
				t.Run(fmt.Sprintf("seed=%d/stripes=%d/durable=%v", seed, stripes, durable), func(t *testing.T) {
					t.Parallel()
					dir := ""
					if durable {
						dir = t.TempDir()
					}
					runTopicModel(t, seed, stripes, ops, dir)
				})
			}
		}
	}
}
