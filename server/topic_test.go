package server

// Real-listener tests of the 11 topic operations (topic spec §2) and every
// error they emit (§5), bad input changing nothing.

import (
	"encoding/xml"
	"fmt"
	"strings"
	"testing"
	"time"
)

type xTopic struct {
	TopicURL               string
	TopicName              string
	CreateTime             int64
	LastModifyTime         int64
	MaximumMessageSize     int
	MessageRetentionPeriod int
	MessageCount           int
	LoggingEnabled         string
}

type xTopics struct {
	XMLName    xml.Name `xml:"Topics"`
	Topics     []xTopic `xml:"Topic"`
	NextMarker *string
}

type xSubscription struct {
	SubscriptionURL     string
	SubscriptionName    string
	Subscriber          string
	TopicOwner          string
	TopicName           string
	Endpoint            string
	NotifyStrategy      string
	NotifyContentFormat string
	FilterTag           *string
	CreateTime          int64
	LastModifyTime      int64
}

type xSubscriptions struct {
	XMLName       xml.Name        `xml:"Subscriptions"`
	Subscriptions []xSubscription `xml:"Subscription"`
	NextMarker    *string
}

const topicNS = `xmlns="http://mns.aliyuncs.com/doc/v1/"`

func subBody(endpoint, extra string) string {
	return `<?xml version="1.0" encoding="UTF-8"?><Subscription ` + topicNS + `><Endpoint>` + endpoint + `</Endpoint>` + extra + `</Subscription>`
}

func pubBody(body, extra string) string {
	return `<?xml version="1.0" encoding="UTF-8"?><Message ` + topicNS + `><MessageBody>` + body + `</MessageBody>` + extra + `</Message>`
}

// The SDKs aim queue endpoints at a local server with junk region and
// account (spec §0.6).
func qep(name string) string { return "acs:mns:cn-hangzhou:127:queues/" + name }

func TestTopicCreateGetSetDelete(t *testing.T) {
	env := startEnv(t, envConfig{fakeClock: true})
	c := env.client()
	// 201 -> 204 -> 409, Location on both successes (spec §0.2, §0.3).
	r := c.put("/topics/orders", "")
	wantStatus(t, r, 201)
	loc := "http://" + env.addr + "/topics/orders"
	if r.header.Get("Location") != loc || len(r.body) != 0 {
		t.Fatalf("create: Location %q body %q", r.header.Get("Location"), r.body)
	}
	r = c.put("/topics/orders", `<Topic `+topicNS+`><MaximumMessageSize>65536</MaximumMessageSize><LoggingEnabled>false</LoggingEnabled></Topic>`)
	wantStatus(t, r, 204)
	if r.header.Get("Location") != loc {
		t.Fatalf("204 without Location: %v", r.header)
	}
	wantError(t, c.put("/topics/orders", `<Topic><MaximumMessageSize>2048</MaximumMessageSize></Topic>`), 409, "TopicAlreadyExist")
	wantStatus(t, c.put("/topics/alimns", `<Topic/>`), 201)

	// GetTopicAttributes: the 7 elements in order (spec §2.3, §0.4).
	r = c.get("/topics/orders")
	wantStatus(t, r, 200)
	checkOrder(t, string(r.body), []string{"TopicName", "CreateTime", "LastModifyTime", "MaximumMessageSize",
		"MessageRetentionPeriod", "MessageCount", "LoggingEnabled"})
	if !strings.HasPrefix(string(r.body), `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+`<Topic xmlns="http://mns.aliyuncs.com/doc/v1">`) {
		t.Fatalf("root: %s", r.body)
	}
	var tp xTopic
	decode(t, r, &tp)
	now := env.now().Unix()
	want := xTopic{TopicName: "orders", CreateTime: now, LastModifyTime: now, MaximumMessageSize: 65536,
		MessageRetentionPeriod: 86400, LoggingEnabled: "False"}
	if tp != want {
		t.Fatalf("got %+v\nwant %+v", tp, want)
	}

	// PHP's TopicTest: Set LoggingEnabled false/true/absent -> false, true, true;
	// MaximumMessageSize 10240 -> shown. LastModifyTime moves.
	env.clock.Advance(5 * time.Second)
	for _, c2 := range []struct{ body, want string }{
		{`<Topic><LoggingEnabled>False</LoggingEnabled></Topic>`, "False"},
		{`<Topic><LoggingEnabled>True</LoggingEnabled></Topic>`, "True"},
		{`<Topic><MaximumMessageSize>10240</MaximumMessageSize></Topic>`, "True"},
	} {
		wantStatus(t, c.put("/topics/orders?metaoverride=true", c2.body), 204)
		decode(t, c.get("/topics/orders"), &tp)
		if tp.LoggingEnabled != c2.want {
			t.Fatalf("after %s: LoggingEnabled %s", c2.body, tp.LoggingEnabled)
		}
	}
	if tp.MaximumMessageSize != 10240 || tp.LastModifyTime != now+5 || tp.CreateTime != now {
		t.Fatalf("after sets: %+v", tp)
	}
	// Bad input changes nothing.
	wantError(t, c.put("/topics/orders?metaoverride=true", `<Topic><MaximumMessageSize>100</MaximumMessageSize></Topic>`), 400, "InvalidArgument")
	wantError(t, c.put("/topics/orders?metaoverride=true", `<Topic><LoggingEnabled>maybe</LoggingEnabled></Topic>`), 400, "InvalidArgument")
	wantError(t, c.put("/topics/orders?metaoverride=true", `<Queue/>`), 400, "InvalidArgument")
	wantError(t, c.put("/topics/orders?metaoverride=true", `<Topic><a></Topic>`), 400, "MalformedXML")
	wantError(t, c.put("/topics/new1", `<Topic><MaximumMessageSize>70000</MaximumMessageSize></Topic>`), 400, "InvalidArgument")
	wantError(t, c.get("/topics/new1"), 404, "TopicNotExist")
	decode(t, c.get("/topics/orders"), &tp)
	if tp.MaximumMessageSize != 10240 {
		t.Fatalf("a refused Set changed the topic: %+v", tp)
	}
	wantError(t, c.put("/topics/missing?metaoverride=true", `<Topic/>`), 404, "TopicNotExist")

	// Names (spec §4.3).
	wantError(t, c.put("/topics/-x", ""), 400, "TopicNameInvalid")
	wantError(t, c.put("/topics/a_b", ""), 400, "TopicNameInvalid")
	wantError(t, c.put("/topics/"+strings.Repeat("a", 257), ""), 400, "TopicNameLengthError")
	wantError(t, c.get("/topics/a%zz"), 400, "TopicNameInvalid")

	// DeleteTopic: 204, also when absent; then TopicNotExist everywhere (PHP).
	wantStatus(t, c.del("/topics/orders", ""), 204)
	wantStatus(t, c.del("/topics/orders", ""), 204)
	wantError(t, c.get("/topics/orders"), 404, "TopicNotExist")
	wantError(t, c.put("/topics/orders?metaoverride=true", `<Topic/>`), 404, "TopicNotExist")
	wantError(t, c.post("/topics/orders/messages", pubBody("x", "")), 404, "TopicNotExist")
	wantError(t, c.get("/topics/orders/subscriptions"), 404, "TopicNotExist")
	wantError(t, c.put("/topics/orders/subscriptions/s", subBody(qep("q"), "")), 404, "TopicNotExist")
	wantError(t, c.del("/topics/orders/subscriptions/s", ""), 404, "TopicNotExist")
	wantError(t, c.get("/topics/orders/subscriptions/s"), 404, "TopicNotExist")
}

func TestListTopic(t *testing.T) {
	env := startEnv(t, envConfig{fakeClock: true})
	c := env.client()
	r := c.get("/topics")
	wantStatus(t, r, 200)
	if !strings.Contains(string(r.body), `<Topics xmlns="http://mns.aliyuncs.com/doc/v1"/>`) {
		t.Fatalf("empty list: %s", r.body)
	}
	for _, n := range []string{"t-a1", "t-a2", "t-b1"} {
		wantStatus(t, c.put("/topics/"+n, ""), 201)
	}
	// PHP testListTopics: one per page with a prefix -> two pages, the
	// second finished (no NextMarker).
	r = c.do(req{method: "GET", target: "/topics", headers: map[string]string{"x-mns-prefix": "t-a", "x-mns-ret-number": "1"}})
	wantStatus(t, r, 200)
	var l xTopics
	decode(t, r, &l)
	if len(l.Topics) != 1 || l.Topics[0].TopicURL != "http://"+env.addr+"/topics/t-a1" || l.NextMarker == nil || *l.NextMarker != "t-a2" {
		t.Fatalf("page 1: %s", r.body)
	}
	if l.Topics[0].TopicName != "" {
		t.Fatalf("attributes without with-meta: %s", r.body)
	}
	r = c.do(req{method: "GET", target: "/topics", headers: map[string]string{"x-mns-prefix": "t-a", "x-mns-ret-number": "1", "x-mns-marker": *l.NextMarker}})
	l = xTopics{}
	decode(t, r, &l)
	if len(l.Topics) != 1 || !strings.HasSuffix(l.Topics[0].TopicURL, "/topics/t-a2") || l.NextMarker != nil {
		t.Fatalf("page 2: %s", r.body)
	}
	// With meta: TopicURL and the seven attributes (spec §2.5).
	r = c.do(req{method: "GET", target: "/topics", headers: map[string]string{"x-mns-with-meta": "true"}})
	l = xTopics{}
	decode(t, r, &l)
	if len(l.Topics) != 3 || l.Topics[2].TopicName != "t-b1" || l.Topics[2].MaximumMessageSize != 65536 || l.Topics[2].LoggingEnabled != "False" {
		t.Fatalf("with meta: %s", r.body)
	}
	checkOrder(t, string(r.body), []string{"TopicURL", "TopicName", "CreateTime", "LastModifyTime", "MaximumMessageSize",
		"MessageRetentionPeriod", "MessageCount", "LoggingEnabled"})
	wantError(t, c.do(req{method: "GET", target: "/topics", headers: map[string]string{"x-mns-ret-number": "0"}}), 400, "InvalidArgument")
	wantError(t, c.do(req{method: "POST", target: "/topics", body: "<Topic/>"}), 400, "InvalidRequestURL")
}

func TestSubscriptions(t *testing.T) {
	env := startEnv(t, envConfig{fakeClock: true})
	c := env.client()
	c.mustCreate("q1")
	wantStatus(t, c.put("/queues/small", `<Queue><MaximumMessageSize>2048</MaximumMessageSize></Queue>`), 201)
	wantStatus(t, c.put("/topics/t", ""), 201)

	// Subscribe: 201 -> 204 (defaults spelled out) -> 409 (only the format differs).
	r := c.put("/topics/t/subscriptions/s1", subBody(qep("q1"), ""))
	wantStatus(t, r, 201)
	loc := "http://" + env.addr + "/topics/t/subscriptions/s1"
	if r.header.Get("Location") != loc {
		t.Fatalf("Location %q", r.header.Get("Location"))
	}
	r = c.put("/topics/t/subscriptions/s1", subBody(qep("q1"), `<NotifyStrategy>backoff_retry</NotifyStrategy><NotifyContentFormat>XML</NotifyContentFormat><FilterTag/>`))
	wantStatus(t, r, 204)
	if r.header.Get("Location") != loc {
		t.Fatalf("204 without Location")
	}
	wantError(t, c.put("/topics/t/subscriptions/s1", subBody(qep("q1"), `<NotifyContentFormat>SIMPLIFIED</NotifyContentFormat>`)), 409, "SubscriptionAlreadyExist")

	// Every refusal, and none of them creates anything.
	for _, bad := range []struct{ body, code string }{
		{subBody("http://10.9.8.7:9/ep", ""), "EndpointInvalid"},  // outside --push-allow
		{subBody("https://example.com/", ""), "EndpointInvalid"},  // a host name not allowed by name
		{subBody("http://u:p@127.0.0.1/", ""), "EndpointInvalid"}, // credentials in the URL
		{subBody(qep("q1"), `<DeadLetterTargetQueue>nosuch</DeadLetterTargetQueue>`), "InvalidArgument"},
		{subBody(qep("q1"), `<DeadLetterTargetQueue>q1</DeadLetterTargetQueue>`), "InvalidArgument"}, // its own queue
		{subBody("ftp://x", ""), "EndpointInvalid"},
		{subBody("acs:mns:r:a:queues/nosuch", ""), "EndpointInvalid"},
		{subBody("acs:mns:r:a:queues/small", ""), "EndpointInvalid"},
		{subBody("acs:mns:r:a:queues/-bad", ""), "EndpointInvalid"},
		{subBody(qep("q1"), `<FilterTag>`+strings.Repeat("x", 17)+`</FilterTag>`), "InvalidArgument"},
		{subBody(qep("q1"), `<FilterTag>a&#10;b</FilterTag>`), "InvalidArgument"}, // no HTTP header could carry it
		{subBody(qep("q1"), `<NotifyStrategy>SOMETIMES</NotifyStrategy>`), "InvalidArgument"},
		{subBody(qep("q1"), `<NotifyContentFormat>STREAM</NotifyContentFormat>`), "InvalidArgument"},
		{`<Subscription><FilterTag>a</FilterTag></Subscription>`, "InvalidArgument"},
		{``, "InvalidArgument"},
		{`<Queue/>`, "InvalidArgument"},
		{`<Subscription><Endpoint>x</Subscription>`, "MalformedXML"},
	} {
		wantError(t, c.put("/topics/t/subscriptions/s2", bad.body), 400, bad.code)
	}
	wantError(t, c.get("/topics/t/subscriptions/s2"), 404, "SubscriptionNotExist")
	wantError(t, c.put("/topics/t/subscriptions/-s", subBody(qep("q1"), "")), 400, "SubscriptionNameInvalid")
	wantError(t, c.put("/topics/t/subscriptions/"+strings.Repeat("s", 257), subBody(qep("q1"), "")), 400, "SubscriptionNameLengthError")
	wantError(t, c.put("/topics/nosuch/subscriptions/s", subBody(qep("q1"), "")), 404, "TopicNotExist")
	// Out-of-scope kinds are accepted and stored (spec §3.1; PHP subscribes them).
	wantStatus(t, c.put("/topics/t/subscriptions/mail", subBody("mail:directmail:a@example.com", "")), 201)
	wantStatus(t, c.put("/topics/t/subscriptions/s3", subBody(qep("q1"), `<FilterTag>tagA</FilterTag><NotifyContentFormat>json</NotifyContentFormat>`)), 201)

	// GetSubscriptionAttributes: Python's eight plus Subscriber, in order.
	r = c.get("/topics/t/subscriptions/s3")
	wantStatus(t, r, 200)
	checkOrder(t, string(r.body), []string{"SubscriptionName", "Subscriber", "TopicOwner", "TopicName", "Endpoint",
		"NotifyStrategy", "NotifyContentFormat", "FilterTag", "CreateTime", "LastModifyTime"})
	var s xSubscription
	decode(t, r, &s)
	now := env.now().Unix()
	if s.SubscriptionName != "s3" || s.TopicName != "t" || s.Subscriber != "127" || s.TopicOwner != "127" || s.Endpoint != qep("q1") ||
		s.NotifyStrategy != "BACKOFF_RETRY" || s.NotifyContentFormat != "JSON" || s.FilterTag == nil || *s.FilterTag != "tagA" ||
		s.CreateTime != now || s.LastModifyTime != now {
		t.Fatalf("subscription: %+v", s)
	}
	r = c.get("/topics/t/subscriptions/s1")
	if strings.Contains(string(r.body), "FilterTag") {
		t.Fatalf("FilterTag of an untagged subscription: %s", r.body)
	}
	// A FilterTag is kept byte for byte, blanks included (it is compared
	// so with each MessageTag, spec §2.6).
	wantStatus(t, c.put("/topics/t/subscriptions/blank", subBody(qep("q1"), `<FilterTag> a</FilterTag>`)), 201)
	if decode(t, c.get("/topics/t/subscriptions/blank"), &s); s.FilterTag == nil || *s.FilterTag != " a" {
		t.Fatalf("the FilterTag \" a\" came back as %v", s.FilterTag)
	}
	wantStatus(t, c.del("/topics/t/subscriptions/blank", ""), 204)

	// SetSubscriptionAttributes: strategy (and Java's FilterTag); the
	// endpoint and format are ignored; an empty body changes nothing.
	env.clock.Advance(2 * time.Second)
	wantStatus(t, c.put("/topics/t/subscriptions/s1?metaoverride=true",
		`<?xml version="1.0" encoding="utf-8"?><Subscription `+topicNS+`><NotifyStrategy>EXPONENTIAL_DECAY_RETRY</NotifyStrategy><NotifyContentFormat>JSON</NotifyContentFormat><Endpoint>x</Endpoint></Subscription>`), 204)
	wantStatus(t, c.put("/topics/t/subscriptions/s1?metaoverride=true", ""), 204)
	// A format no Subscribe takes is ignored by a Set as any other (spec
	// §2.7: Java echoes its whole SubscriptionMeta).
	wantStatus(t, c.put("/topics/t/subscriptions/s1?metaoverride=true", `<Subscription><NotifyContentFormat>STREAM</NotifyContentFormat></Subscription>`), 204)
	decode(t, c.get("/topics/t/subscriptions/s1"), &s)
	if s.NotifyStrategy != "EXPONENTIAL_DECAY_RETRY" || s.NotifyContentFormat != "XML" || s.Endpoint != qep("q1") || s.LastModifyTime != now+2 {
		t.Fatalf("after set: %+v", s)
	}
	wantError(t, c.put("/topics/t/subscriptions/s1?metaoverride=true", `<Subscription><NotifyStrategy>X</NotifyStrategy></Subscription>`), 400, "InvalidArgument")
	wantError(t, c.put("/topics/t/subscriptions/s1?metaoverride=true", `<Subscription><FilterTag>`+strings.Repeat("y", 17)+`</FilterTag></Subscription>`), 400, "InvalidArgument")
	wantError(t, c.put("/topics/t/subscriptions/none?metaoverride=true", `<Subscription/>`), 404, "SubscriptionNotExist")
	s = xSubscription{}
	decode(t, c.get("/topics/t/subscriptions/s1"), &s)
	if s.NotifyStrategy != "EXPONENTIAL_DECAY_RETRY" || s.FilterTag != nil {
		t.Fatalf("a refused Set changed the subscription: %+v", s)
	}

	// ListSubscriptionByTopic: paging, with and without meta.
	r = c.do(req{method: "GET", target: "/topics/t/subscriptions", headers: map[string]string{"x-mns-prefix": "s", "x-mns-ret-number": "1"}})
	wantStatus(t, r, 200)
	var l xSubscriptions
	decode(t, r, &l)
	if len(l.Subscriptions) != 1 || l.Subscriptions[0].SubscriptionURL != loc || l.NextMarker == nil || *l.NextMarker != "s3" {
		t.Fatalf("page 1: %s", r.body)
	}
	r = c.do(req{method: "GET", target: "/topics/t/subscriptions", headers: map[string]string{"x-mns-prefix": "s", "x-mns-marker": "s3"}})
	l = xSubscriptions{}
	decode(t, r, &l)
	if len(l.Subscriptions) != 1 || l.NextMarker != nil {
		t.Fatalf("page 2: %s", r.body)
	}
	r = c.do(req{method: "GET", target: "/topics/t/subscriptions", headers: map[string]string{"x-mns-with-meta": "true"}})
	l = xSubscriptions{}
	decode(t, r, &l)
	if len(l.Subscriptions) != 3 || l.Subscriptions[0].SubscriptionName != "mail" || l.Subscriptions[2].NotifyContentFormat != "JSON" {
		t.Fatalf("with meta: %s", r.body)
	}

	// Unsubscribe: 204, also when absent; then SubscriptionNotExist.
	wantStatus(t, c.del("/topics/t/subscriptions/s1", ""), 204)
	wantStatus(t, c.del("/topics/t/subscriptions/s1", ""), 204)
	wantError(t, c.get("/topics/t/subscriptions/s1"), 404, "SubscriptionNotExist")
	wantError(t, c.put("/topics/t/subscriptions/s1?metaoverride=true", `<Subscription/>`), 404, "SubscriptionNotExist")
	r = c.get("/topics/t/subscriptions")
	l = xSubscriptions{}
	decode(t, r, &l)
	if len(l.Subscriptions) != 2 {
		t.Fatalf("after unsubscribe: %s", r.body)
	}
	wantError(t, c.do(req{method: "POST", target: "/topics/t/subscriptions/s3", body: "<x/>"}), 400, "InvalidRequestURL")
	wantError(t, c.do(req{method: "GET", target: "/topics/t/subscriptions/s3/x"}), 400, "InvalidRequestURL")
}

// TestPublishToQueues: a queue subscription receives the published message
// in each NotifyContentFormat, byte for byte (spec §3.4, §3.7), filter tags
// apply (§3.2), and bad publishes change nothing.
func TestPublishToQueues(t *testing.T) {
	env := startEnv(t, envConfig{fakeClock: true})
	c := env.client()
	wantStatus(t, c.put("/topics/orders", ""), 201)
	for _, f := range []string{"XML", "JSON", "SIMPLIFIED"} {
		q := "q-" + strings.ToLower(f)
		c.mustCreate(q)
		wantStatus(t, c.put("/topics/orders/subscriptions/to-"+q, subBody(qep(q), `<NotifyContentFormat>`+f+`</NotifyContentFormat>`)), 201)
	}
	c.mustCreate("q-tagged")
	wantStatus(t, c.put("/topics/orders/subscriptions/tagged", subBody(qep("q-tagged"), `<FilterTag>other</FilterTag><NotifyContentFormat>SIMPLIFIED</NotifyContentFormat>`)), 201)

	// The Go SDK example's body: <"…"> needs escaping on the way in.
	text := `hello <"topic"> & more`
	r := c.post("/topics/orders/messages", pubBody(`hello &lt;"topic"&gt; &amp; more`, `<MessageTag>important</MessageTag><MessageAttributes><DirectMail>{"a":1}</DirectMail></MessageAttributes>`))
	wantStatus(t, r, 201)
	checkOrder(t, string(r.body), []string{"MessageId", "MessageBodyMD5"})
	var m xMessage
	decode(t, r, &m)
	if len(m.MessageId) != 32 || strings.ToUpper(m.MessageId) != m.MessageId || m.MessageBodyMD5 != md5Upper(text) {
		t.Fatalf("publish answer: %s", r.body)
	}
	ms := env.now().UnixMilli()
	want := map[string]string{
		"q-xml": `<?xml version="1.0" encoding="utf-8"?><Notification xmlns="http://mns.aliyuncs.com/doc/v1/"><TopicOwner>127</TopicOwner>` +
			`<TopicName>orders</TopicName><Subscriber>127</Subscriber><SubscriptionName>to-q-xml</SubscriptionName>` +
			`<MessageId>` + m.MessageId + `</MessageId><Message>hello &lt;"topic"&gt; &amp; more</Message><MessageMD5>` + m.MessageBodyMD5 +
			`</MessageMD5><MessageTag>important</MessageTag><PublishTime>` + fmt.Sprint(ms) + `</PublishTime></Notification>`,
		"q-json": `{"TopicOwner":"127","TopicName":"orders","Subscriber":"127","SubscriptionName":"to-q-json","MessageId":"` + m.MessageId +
			`","Message":"hello <\"topic\"> & more","MessageMD5":"` + m.MessageBodyMD5 + `","MessageTag":"important","PublishTime":` + fmt.Sprint(ms) + `}`,
		"q-simplified": text,
	}
	for q, body := range want {
		got := c.mustReceive(q)
		if got.MessageBody != body {
			t.Errorf("%s body\n got %q\nwant %q", q, got.MessageBody, body)
		}
		if got.MessageId == m.MessageId || got.MessageBodyMD5 != md5Upper(body) || got.Priority != 8 {
			t.Errorf("%s: a delivery is a new message with its own id and MD5: %+v", q, got)
		}
	}
	wantError(t, c.get("/queues/q-tagged/messages"), 404, "MessageNotExist")
	wantStatus(t, c.post("/topics/orders/messages", pubBody("for other", `<MessageTag>other</MessageTag>`)), 201)
	if got := c.mustReceive("q-tagged"); got.MessageBody != "for other" {
		t.Fatalf("tagged: %+v", got)
	}
	for _, q := range []string{"q-xml", "q-json", "q-simplified"} { // no FilterTag: every message
		if got := c.mustReceive(q); !strings.Contains(got.MessageBody, "for other") {
			t.Fatalf("%s: %+v", q, got)
		}
	}
	// Bad publishes: the spec's errors, nothing delivered.
	for _, bad := range []struct{ body, code string }{
		{pubBody("", ""), "InvalidArgument"},
		{`<Message><MessageTag>x</MessageTag></Message>`, "InvalidArgument"},
		{pubBody("x", `<MessageTag>`+strings.Repeat("t", 17)+`</MessageTag>`), "InvalidArgument"},
		{pubBody(strings.Repeat("x", 65537), ""), "InvalidArgument"},
		{`<Messages/>`, "InvalidArgument"},
		{`<Message><MessageBody>a<b</MessageBody></Message>`, "MalformedXML"},
		{``, "MalformedXML"},
	} {
		wantError(t, c.post("/topics/orders/messages", bad.body), 400, bad.code)
	}
	for _, q := range []string{"q-xml", "q-json", "q-simplified", "q-tagged"} {
		wantError(t, c.get("/queues/"+q+"/messages"), 404, "MessageNotExist")
	}
	// No subscriptions: still 201; MessageCount counts publishes.
	wantStatus(t, c.put("/topics/empty", ""), 201)
	wantStatus(t, c.post("/topics/empty/messages", pubBody("x", "")), 201)
	var tp xTopic
	decode(t, c.get("/topics/orders"), &tp)
	if tp.MessageCount != 2 {
		t.Fatalf("MessageCount %d", tp.MessageCount)
	}
}

func TestRouteTopics(t *testing.T) {
	for _, c := range []struct {
		method, path string
		want         op
		name, sub    string
	}{
		{"GET", "/topics", opListTopic, "", ""},
		{"PUT", "/topics/t", opCreateTopic, "t", ""},
		{"GET", "/topics/t", opGetTopicAttributes, "t", ""},
		{"DELETE", "/topics/t", opDeleteTopic, "t", ""},
		{"POST", "/topics/t/messages", opPublishMessage, "t", ""},
		{"GET", "/topics/t/subscriptions", opListSubscriptionByTopic, "t", ""},
		{"PUT", "/topics/t/subscriptions/s", opSubscribe, "t", "s"},
		{"GET", "/topics/t/subscriptions/s", opGetSubscriptionAttributes, "t", "s"},
		{"DELETE", "/topics/t/subscriptions/s", opUnsubscribe, "t", "s"},
		{"POST", "/topics/t", opUnknown, "", ""},
		{"GET", "/topics/t/messages", opUnknown, "", ""},
		{"PUT", "/topics/t/subscriptions", opUnknown, "", ""},
		{"GET", "/topics/t/subscriptions/", opListSubscriptionByTopic, "t", ""},
		{"GET", "/topics/t/subscriptions/s/x", opUnknown, "", ""},
		{"GET", "/topics/", opListTopic, "", ""},
	} {
		r := route([]byte(c.method), []byte(c.path))
		if r.op != c.want || (c.want != opUnknown && (string(r.queue) != c.name || string(r.sub) != c.sub)) {
			t.Errorf("%s %s: %v %q %q", c.method, c.path, r.op, r.queue, r.sub)
		}
	}
}
