package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func qEndpoint(name string) string { return "acs:mns:cn-hangzhou:127:queues/" + name }

// receiveAll takes every visible message of q.
func receiveAll(t testing.TB, q *Queue) []Message {
	t.Helper()
	var out []Message
	for {
		msgs, err := q.Receive(context.Background(), ReceiveOptions{Max: MaxBatch, HasWait: true}, nil)
		if errors.Is(err, ErrMessageNotExist) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, msgs...)
	}
}

func TestTopicAdmin(t *testing.T) {
	b, clk := openTest(t, Options{})
	mustQueue(t, b, "q1", DefaultQueueConfig())

	if _, err := b.CreateTopic("-bad", DefaultTopicConfig()); !errors.Is(err, ErrInvalidTopicName) {
		t.Fatalf("bad name: %v", err)
	}
	if _, err := b.CreateTopic(strings.Repeat("a", 257), DefaultTopicConfig()); !errors.Is(err, ErrTopicNameLength) {
		t.Fatalf("long name: %v", err)
	}
	if _, err := b.CreateTopic("t", TopicConfig{MaxMessageBytes: 100}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("small size: %v", err)
	}
	created, err := b.CreateTopic("t", DefaultTopicConfig())
	if err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	if created, err := b.CreateTopic("t", DefaultTopicConfig()); err != nil || created {
		t.Fatalf("same again: %v %v", created, err)
	}
	if _, err := b.CreateTopic("t", TopicConfig{MaxMessageBytes: 2048}); !errors.Is(err, ErrTopicAlreadyExist) {
		t.Fatalf("other attributes: %v", err)
	}
	clk.Advance(3 * time.Second)
	size, on := 10240, true
	if err := b.SetTopicAttributes("t", TopicPatch{MaxMessageBytes: &size}); err != nil {
		t.Fatal(err)
	}
	if err := b.SetTopicAttributes("t", TopicPatch{LoggingEnabled: &on}); err != nil {
		t.Fatal(err)
	}
	bad := 70000
	if err := b.SetTopicAttributes("t", TopicPatch{MaxMessageBytes: &bad}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("bad set: %v", err)
	}
	info, err := b.GetTopicAttributes("t")
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.MaxMessageBytes != 10240 || !info.Config.LoggingEnabled || !info.LastModifyTime.After(info.CreateTime) || info.Retention != TopicRetention {
		t.Fatalf("info %+v", info)
	}
	if err := b.SetTopicAttributes("nope", TopicPatch{}); !errors.Is(err, ErrTopicNotExist) {
		t.Fatalf("set missing: %v", err)
	}

	// Subscriptions.
	cfg := SubscriptionConfig{Endpoint: qEndpoint("q1")}
	if _, err := b.Subscribe("nope", "s", cfg); !errors.Is(err, ErrTopicNotExist) {
		t.Fatalf("subscribe missing topic: %v", err)
	}
	for _, c := range []struct {
		cfg  SubscriptionConfig
		want error
	}{
		{SubscriptionConfig{Endpoint: "http://10.0.0.1:9/ep"}, ErrEndpointInvalid}, // outside the push allow list
		{SubscriptionConfig{Endpoint: "http://u:p@127.0.0.1:9/ep"}, ErrEndpointInvalid},
		{SubscriptionConfig{Endpoint: "http://internal.example/ep"}, ErrEndpointInvalid},
		{SubscriptionConfig{Endpoint: "ftp://x"}, ErrEndpointInvalid},
		{SubscriptionConfig{Endpoint: "http://127.0.0.1:99999/port"}, ErrEndpointInvalid}, // every push failed (embedding audit 2)
		{SubscriptionConfig{Endpoint: "http://127.0.0.1:0/port"}, ErrEndpointInvalid},
		{SubscriptionConfig{Endpoint: qEndpoint("missing")}, ErrEndpointInvalid},
		{SubscriptionConfig{Endpoint: "acs:mns:r:a:topics/x"}, ErrEndpointInvalid},
		{SubscriptionConfig{Endpoint: qEndpoint("q1"), FilterTag: strings.Repeat("x", 17)}, ErrInvalidArgument},
		{SubscriptionConfig{Endpoint: qEndpoint("q1"), Format: 9}, ErrInvalidArgument},
	} {
		if _, err := b.Subscribe("t", "s", c.cfg); !errors.Is(err, c.want) {
			t.Fatalf("subscribe %+v: %v, want %v", c.cfg, err, c.want)
		}
	}
	if _, err := b.Subscribe("t", "bad_name", cfg); !errors.Is(err, ErrInvalidSubscriptionName) {
		t.Fatalf("bad sub name: %v", err)
	}
	if created, err := b.Subscribe("t", "s", cfg); err != nil || !created {
		t.Fatalf("subscribe: %v %v", created, err)
	}
	same := cfg
	same.Strategy, same.Format = BackoffRetry, FormatXML // the defaults
	if created, err := b.Subscribe("t", "s", same); err != nil || created {
		t.Fatalf("subscribe again: %v %v", created, err)
	}
	// The same queue under another region and account is the same
	// endpoint (spec §0.6: SDKs fill them from the host they were given).
	elsewhere := same
	elsewhere.Endpoint = "acs:mns:0:127:queues/q1" // PHP's; qEndpoint is Go's
	if created, err := b.Subscribe("t", "s", elsewhere); err != nil || created {
		t.Fatalf("subscribe again, the queue under another region and account: %v %v", created, err)
	}
	if si, err := b.GetSubscriptionAttributes("t", "s"); err != nil || si.Config.Endpoint != cfg.Endpoint {
		t.Fatalf("the endpoint became %q (%v), want the first one's", si.Config.Endpoint, err)
	}
	other := cfg
	other.Format = FormatSimplified
	if _, err := b.Subscribe("t", "s", other); !errors.Is(err, ErrSubscriptionAlreadyExist) {
		t.Fatalf("subscribe other: %v", err)
	}
	otherQueue := cfg
	otherQueue.Endpoint = qEndpoint("q2")
	if _, err := b.Subscribe("t", "s", otherQueue); !errors.Is(err, ErrSubscriptionAlreadyExist) {
		t.Fatalf("subscribe again to another queue: %v", err)
	}
	if _, err := b.Subscribe("t", "mail", SubscriptionConfig{Endpoint: "mail:directmail:a@example.com"}); err != nil {
		t.Fatalf("mail endpoint: %v", err)
	}
	exp := ExponentialDecayRetry
	if err := b.SetSubscriptionAttributes("t", "s", SubscriptionPatch{Strategy: &exp}); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("y", 17)
	if err := b.SetSubscriptionAttributes("t", "s", SubscriptionPatch{FilterTag: &long}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("long tag: %v", err)
	}
	si, err := b.GetSubscriptionAttributes("t", "s")
	if err != nil || si.Config.Strategy != ExponentialDecayRetry || si.Config.Format != FormatXML || si.Config.Endpoint != cfg.Endpoint || si.Topic != "t" {
		t.Fatalf("get sub: %+v %v", si, err)
	}
	if _, err := b.GetSubscriptionAttributes("t", "none"); !errors.Is(err, ErrSubscriptionNotExist) {
		t.Fatalf("get missing sub: %v", err)
	}
	names, next, err := b.ListSubscriptions("t", "", "", 1)
	if err != nil || fmt.Sprint(names) != "[mail]" || next != "s" {
		t.Fatalf("list subs: %v %q %v", names, next, err)
	}
	if err := b.Unsubscribe("t", "s"); err != nil {
		t.Fatal(err)
	}
	if err := b.Unsubscribe("t", "s"); !errors.Is(err, ErrSubscriptionNotExist) {
		t.Fatalf("unsubscribe again: %v", err)
	}
	if err := b.Unsubscribe("nope", "s"); !errors.Is(err, ErrTopicNotExist) {
		t.Fatalf("unsubscribe missing topic: %v", err)
	}

	// Lists page like ListQueues.
	for _, n := range []string{"a1", "a2", "b1"} {
		if _, err := b.CreateTopic(n, DefaultTopicConfig()); err != nil {
			t.Fatal(err)
		}
	}
	names, next, err = b.ListTopics("a", "", 1)
	if err != nil || fmt.Sprint(names) != "[a1]" || next != "a2" {
		t.Fatalf("page 1: %v %q %v", names, next, err)
	}
	names, next, err = b.ListTopics("a", next, 1)
	if err != nil || fmt.Sprint(names) != "[a2]" || next != "" {
		t.Fatalf("page 2: %v %q %v", names, next, err)
	}
	if _, _, err := b.ListTopics("", "", 1001); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("limit: %v", err)
	}
	if err := b.DeleteTopic("t"); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteTopic("t"); !errors.Is(err, ErrTopicNotExist) {
		t.Fatalf("delete again: %v", err)
	}
	if _, err := b.GetTopicAttributes("t"); !errors.Is(err, ErrTopicNotExist) {
		t.Fatalf("get deleted: %v", err)
	}
	if _, err := b.Publish("t", PublishInput{Body: []byte("x")}); !errors.Is(err, ErrTopicNotExist) {
		t.Fatalf("publish deleted: %v", err)
	}
}

// TestPublishFormats checks the three notification bodies byte for byte
// (spec §3.4) and the FilterTag rule (§3.2: Java's CloudPullTopicDemo, 3
// tagged queues and 1 untagged, 3 tagged publishes -> 1, 1, 1, 3).
func TestPublishFormats(t *testing.T) {
	b, _ := openTest(t, Options{})
	if _, err := b.CreateTopic("orders", DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		f    NotifyContentFormat
	}{{"qx", FormatXML}, {"qj", FormatJSON}, {"qs", FormatSimplified}} {
		mustQueue(t, b, c.name, DefaultQueueConfig())
		if _, err := b.Subscribe("orders", c.name+"-sub", SubscriptionConfig{Endpoint: qEndpoint(c.name), Format: c.f}); err != nil {
			t.Fatal(err)
		}
	}
	body := "hello <\"topic\"> & \r\n\x01 é"
	res, err := b.Publish("orders", PublishInput{Body: []byte(body), Tag: "important", Owner: "1234567890"})
	if err != nil || res.Delivered != 3 {
		t.Fatalf("publish: %+v %v", res, err)
	}
	id, md := res.ID.String(), string(MD5Hex(nil, res.MD5))
	ms := t0.UnixMilli()
	want := map[string]string{
		"qx": `<?xml version="1.0" encoding="utf-8"?><Notification xmlns="http://mns.aliyuncs.com/doc/v1/">` +
			`<TopicOwner>1234567890</TopicOwner><TopicName>orders</TopicName><Subscriber>1234567890</Subscriber>` +
			`<SubscriptionName>qx-sub</SubscriptionName><MessageId>` + id + `</MessageId>` +
			`<Message>hello &lt;"topic"&gt; &amp; &#13;` + "\n\x01 é" + `</Message><MessageMD5>` + md + `</MessageMD5>` +
			`<MessageTag>important</MessageTag><PublishTime>` + fmt.Sprint(ms) + `</PublishTime></Notification>`,
		"qj": `{"TopicOwner":"1234567890","TopicName":"orders","Subscriber":"1234567890","SubscriptionName":"qj-sub",` +
			`"MessageId":"` + id + `","Message":"hello <\"topic\"> & \r\n\u0001 é","MessageMD5":"` + md + `",` +
			`"MessageTag":"important","PublishTime":` + fmt.Sprint(ms) + `}`,
		"qs": body,
	}
	for name, w := range want {
		q, _ := b.Queue(name)
		msgs := receiveAll(t, q)
		if len(msgs) != 1 {
			t.Fatalf("%s: %d messages", name, len(msgs))
		}
		if got := string(msgs[0].Body); got != w {
			t.Errorf("%s body\n got %q\nwant %q", name, got, w)
		}
		if msgs[0].ID == res.ID || msgs[0].Priority != DefaultPriority {
			t.Errorf("%s: id %s priority %d", name, msgs[0].ID, msgs[0].Priority)
		}
	}
	// Untagged: no MessageTag element or key.
	if _, err := b.Publish("orders", PublishInput{Body: []byte("x"), Owner: "o"}); err != nil {
		t.Fatal(err)
	}
	qx, _ := b.Queue("qx")
	if m := receiveAll(t, qx); len(m) != 1 || strings.Contains(string(m[0].Body), "MessageTag") {
		t.Fatalf("untagged XML: %v", m)
	}
	qj, _ := b.Queue("qj")
	if m := receiveAll(t, qj); len(m) != 1 || strings.Contains(string(m[0].Body), "MessageTag") {
		t.Fatalf("untagged JSON: %v", m)
	}
	if _, err := b.Publish("orders", PublishInput{Body: []byte(strings.Repeat("x", 65537))}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("oversized: %v", err)
	}
	if _, err := b.Publish("orders", PublishInput{Body: nil}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("empty: %v", err)
	}
	if _, err := b.Publish("orders", PublishInput{Body: []byte("x"), Tag: strings.Repeat("t", 17)}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("long tag: %v", err)
	}
	// Owner goes into a SIMPLIFIED push's headers and every push's
	// envelope: a control character made each push of the message fail
	// until its retries ended (embedding audit 2, 2026-12-06).
	for _, owner := range []string{"acct\r\nX-Injected: 1", "a\x00", "a\x7f", "\xff", strings.Repeat("o", 256)} {
		if _, err := b.Publish("orders", PublishInput{Body: []byte("x"), Owner: owner}); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("the owner %q: %v, want InvalidArgument", owner, err)
		}
	}
	if _, err := b.Publish("orders", PublishInput{Body: []byte("x"), Owner: strings.Repeat("o", 255)}); err != nil {
		t.Fatalf("an owner of 255 bytes: %v", err)
	}
	if info, _ := b.GetTopicAttributes("orders"); info.MessageCount != 3 {
		t.Fatalf("MessageCount %d", info.MessageCount)
	}
}

func TestPublishFilterTags(t *testing.T) {
	b, _ := openTest(t, Options{})
	if _, err := b.CreateTopic("t", DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	tags := []string{"TagA", "TagB", "TagC", ""}
	for i, tag := range tags {
		name := fmt.Sprintf("q%d", i)
		mustQueue(t, b, name, DefaultQueueConfig())
		if _, err := b.Subscribe("t", name, SubscriptionConfig{Endpoint: qEndpoint(name), FilterTag: tag, Format: FormatSimplified}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tag := range tags[:3] {
		res, err := b.Publish("t", PublishInput{Body: []byte(tag), Tag: tag})
		if err != nil || res.Delivered != 2 {
			t.Fatalf("publish %s: %+v %v", tag, res, err)
		}
	}
	for i, want := range []int{1, 1, 1, 3} {
		q, _ := b.Queue(fmt.Sprintf("q%d", i))
		if got := len(receiveAll(t, q)); got != want {
			t.Errorf("q%d: %d messages, want %d", i, got, want)
		}
	}
	// A tag with a control character cannot be an HTTP header (a SIMPLIFIED
	// push's x-mns-message-tag): refused at the publish and at Subscribe,
	// and nothing is delivered.
	for _, tag := range []string{"a\nb", "a\rb", "\x00", "a\x7f"} {
		if _, err := b.Publish("t", PublishInput{Body: []byte("x"), Tag: tag}); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("publish with the tag %q: %v, want InvalidArgument", tag, err)
		}
		if _, err := b.Subscribe("t", "ctl", SubscriptionConfig{Endpoint: qEndpoint("q3"), FilterTag: tag}); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("subscribe with the filter tag %q: %v, want InvalidArgument", tag, err)
		}
	}
	for i := range tags {
		q, _ := b.Queue(fmt.Sprintf("q%d", i))
		if got := len(receiveAll(t, q)); got != 0 {
			t.Errorf("q%d got %d messages of refused publishes", i, got)
		}
	}
	// Blanks are part of a tag: a FilterTag matches byte for byte.
	mustQueue(t, b, "blank", DefaultQueueConfig())
	if _, err := b.Subscribe("t", "blank", SubscriptionConfig{Endpoint: qEndpoint("blank"), FilterTag: " a"}); err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{"a", " a"} {
		if _, err := b.Publish("t", PublishInput{Body: []byte(tag), Tag: tag}); err != nil {
			t.Fatal(err)
		}
	}
	if q, _ := b.Queue("blank"); len(receiveAll(t, q)) != 1 {
		t.Error(`the FilterTag " a" did not take exactly the message tagged " a"`)
	}
	// A subscription whose queue is gone is skipped; the others still get it.
	if err := b.DeleteQueue("q0"); err != nil {
		t.Fatal(err)
	}
	res, err := b.Publish("t", PublishInput{Body: []byte("x"), Tag: "TagA"})
	if err != nil || res.Delivered != 1 || res.Skipped != 1 {
		t.Fatalf("publish with a gone queue: %+v %v", res, err)
	}
}

// TestPublishQueueDelay: a delivery takes its queue's DelaySeconds.
func TestPublishQueueDelay(t *testing.T) {
	b, clk := openTest(t, Options{})
	cfg := DefaultQueueConfig()
	cfg.Delay = 5 * time.Second
	q := mustQueue(t, b, "dq", cfg)
	if _, err := b.CreateTopic("t", DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Subscribe("t", "s", SubscriptionConfig{Endpoint: qEndpoint("dq")}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Publish("t", PublishInput{Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if n := len(receiveAll(t, q)); n != 0 {
		t.Fatalf("visible before the queue's delay: %d", n)
	}
	clk.Advance(5 * time.Second)
	if n := len(receiveAll(t, q)); n != 1 {
		t.Fatalf("after the delay: %d", n)
	}
	checkInvariants(t, q)
}
