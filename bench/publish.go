package bench

// The publish workload: producers publish to one topic (PublishMessage),
// which has one queue subscription per queue of the run (NotifyContentFormat
// SIMPLIFIED, so a delivery's body is the published body and its send stamp
// survives); consumers receive and delete from those queues as in a cycle.
// A publish to N subscriptions is N deliveries: Result.Sent counts
// publishes, Result.Deleted deliveries, and the CPU figures are given per
// delivery (the *PerMsg fields) and per publish (the *PerPublish fields).
//
// Only targets with topics can run it: smqd over HTTP (MNSTarget) and the
// engine in process (InprocTarget).

import (
	"context"
	"errors"
	"fmt"

	"github.com/smqd/smqd/engine"
)

// TopicTarget is a Target that has topics.
type TopicTarget interface {
	Target
	// PrepareTopic creates the topic (deleting it first when fresh) with one
	// queue subscription, format SIMPLIFIED and no FilterTag, for each
	// queue given to the last Prepare. Clients made afterwards publish to
	// it.
	PrepareTopic(ctx context.Context, topic string, fresh bool) error
}

// Publisher is a Client of a TopicTarget: it publishes one message to the
// target's topic.
type Publisher interface {
	Publish(ctx context.Context, m *Outgoing) error
}

// ErrNoTopics is returned when the publish workload is asked of a target
// without topics.
var ErrNoTopics = errors.New("bench: the publish workload needs a target with topics (smqd with --client fast, or inproc)")

// subName is the name of the subscription of queue q.
func subName(q string) string { return "sub-" + q }

// queueEndpoint is a QueueEndpoint for queue q (topic spec §3.1); the
// server matches on the queue name alone.
func queueEndpoint(q string) string { return "acs:mns:cn-hangzhou:1:queues/" + q }

// PrepareTopic creates the topic and its queue subscriptions.
func (t *MNSTarget) PrepareTopic(ctx context.Context, topic string, fresh bool) error {
	t.admMu.Lock()
	defer t.admMu.Unlock()
	c := t.adm
	path := "/topics/" + topic
	if fresh {
		st, body, err := c.do("DELETE", path, nil, 0)
		if err != nil {
			return fmt.Errorf("delete topic %s: %w", topic, err)
		}
		if st != 204 && st != 404 {
			return fmt.Errorf("delete topic %s: status %d %s", topic, st, ErrorCode(body))
		}
	}
	st, body, err := c.do("PUT", path, []byte(xmlDecl+`<Topic`+xmlNS+`></Topic>`), 0)
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	if st != 201 && st != 204 {
		return fmt.Errorf("create topic %s: status %d %s", topic, st, ErrorCode(body))
	}
	for _, q := range t.names {
		sub := []byte(xmlDecl + `<Subscription` + xmlNS + `><Endpoint>` + queueEndpoint(q) +
			`</Endpoint><NotifyContentFormat>SIMPLIFIED</NotifyContentFormat></Subscription>`)
		st, body, err := c.do("PUT", path+"/subscriptions/"+subName(q), sub, 0)
		if err != nil {
			return fmt.Errorf("subscribe %s to %s: %w", q, topic, err)
		}
		if st != 201 && st != 204 {
			return fmt.Errorf("subscribe %s to %s: status %d %s", q, topic, st, ErrorCode(body))
		}
	}
	t.topic = topic
	return nil
}

// Publish sends one PublishMessage (topic spec §2.11) to the target's topic.
func (c *mnsClient) Publish(ctx context.Context, m *Outgoing) error {
	b := append(c.body[:0], xmlDecl+"<Message"+xmlNS+"><MessageBody>"...)
	b = append(b, m.Body...) // [0-9a-z]: nothing to escape
	b = append(b, "</MessageBody></Message>"...)
	c.body = b
	c.uri = append(c.uri[:0], "/topics/"...)
	c.uri = append(c.uri, c.t.topic...)
	c.uri = append(c.uri, "/messages"...)
	st, rb, err := c.doURI("POST", b, 0)
	if err != nil {
		return err
	}
	if st != 201 {
		return fmt.Errorf(errStatus, st, ErrorCode(rb))
	}
	return nil
}

// PrepareTopic creates the topic and its queue subscriptions.
func (t *InprocTarget) PrepareTopic(ctx context.Context, topic string, fresh bool) error {
	if fresh {
		if err := t.b.DeleteTopic(topic); err != nil && !errors.Is(err, engine.ErrTopicNotExist) {
			return fmt.Errorf("delete topic %s: %w", topic, err)
		}
	}
	if _, err := t.b.CreateTopic(topic, engine.DefaultTopicConfig()); err != nil && !(errors.Is(err, engine.ErrTopicAlreadyExist) && !fresh) {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	for _, q := range t.queues {
		cfg := engine.SubscriptionConfig{Endpoint: queueEndpoint(q.Name()), Format: engine.FormatSimplified}
		if _, err := t.b.Subscribe(topic, subName(q.Name()), cfg); err != nil {
			return fmt.Errorf("subscribe %s to %s: %w", q.Name(), topic, err)
		}
	}
	t.topic = topic
	return nil
}

// Publish publishes one message to the target's topic.
func (c *inprocClient) Publish(ctx context.Context, m *Outgoing) error {
	res, err := c.t.b.Publish(c.t.topic, engine.PublishInput{Body: m.Body})
	if err != nil {
		return err
	}
	if res.Delivered != len(c.t.queues) {
		return fmt.Errorf("bench: a publish reached %d of %d subscriptions", res.Delivered, len(c.t.queues))
	}
	return nil
}

// prepareTopic makes the run's topic (Config.Topic) with a subscription per
// queue, and checks that the producers can publish.
func (r *runner) prepareTopic(ctx context.Context) error {
	tt, ok := r.t.(TopicTarget)
	if !ok {
		return ErrNoTopics
	}
	if err := tt.PrepareTopic(ctx, r.cfg.Topic, !r.cfg.KeepQueues); err != nil {
		return fmt.Errorf("prepare topic on %s: %w", r.t.Name(), err)
	}
	for _, w := range r.producers {
		if _, ok := w.c.(Publisher); !ok {
			return ErrNoTopics
		}
	}
	return nil
}

// perPublish fills the per-publish CPU figures of a publish run from the
// totals setCPU left.
func perPublish(res *Result) {
	if res.Sent <= 0 {
		return
	}
	res.ServerCPUUsPerPublish = round2(res.ServerCPUS * 1e6 / float64(res.Sent))
	res.ClientCPUUsPerPublish = round2(res.ClientCPUS * 1e6 / float64(res.Sent))
}
