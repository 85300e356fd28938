package server

// FuzzRequests drives whole requests (method, path, query, headers and
// body) through the server's real handler, signed as an SDK signs them
// (or, where the input's flags say, unsigned, with a Content-MD5 that is
// not the body's, without x-mns-version or with a stale Date), against
// queues and topics in a known state, and checks what every answer must
// hold whatever the input:
//
//  1. no answer is a 500, and every answer carries the common headers;
//  2. every refusal is an MNS error document: root Error (or Errors, the
//     per-entry answer of a batch) in the MNS namespace, a Code, a Message,
//     the RequestId of the header and a HostId;
//  3. a request refused as a whole (root Error) changes nothing: every
//     queue's and topic's attributes and counts, the topic's subscriptions,
//     the visible messages of "q" and the live receipt handle are as they
//     were.
//
// Before each input: queue "q" holds three messages, two visible and one
// received; topic "t" has one subscription, "s", delivering to "q". The
// token HANDLE in the query or body stands for the received message's
// receipt handle, so that the fuzzer reaches the delete and visibility
// paths with a live handle too. "q" always has visible messages, so no
// receive long-polls. Push delivery is off: an HTTP subscription the
// fuzzer makes pushes nowhere.

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
)

// Flags of a fuzzed request.
const (
	fzSign       = 1  // sign it as the SDKs do
	fzWithHandle = 2  // put the live receipt handle where the input says HANDLE
	fzTopics     = 4  // a path under /topics, not /queues
	fzBadMD5     = 8  // a Content-MD5 that is not the body's (signed as sent)
	fzNoVersion  = 16 // no x-mns-version header
	fzOldDate    = 32 // a Date 20 minutes old (signed as sent)
)

// requestSeeds are FuzzRequests' seed inputs; TestClusterRefusedRequests
// sends them through a node that does not lead their queue.
var requestSeeds = []struct {
	method      byte
	path, query string
	body        string
	flags       byte
}{
	{0, "/q", "", "", fzSign}, // GetQueueAttributes
	{1, "/q", "", `<Queue><VisibilityTimeout>60</VisibilityTimeout></Queue>`, fzSign}, // create: 409, a different queue
	{1, "/q", "metaoverride=true", `<Queue><DelaySeconds>2</DelaySeconds></Queue>`, fzSign},
	{1, "/q", "metaoverride=true", `<Queue><DelaySeconds>999999</DelaySeconds></Queue>`, fzSign},
	{1, "/q", "metaoverride=true", `<Queue><LoggingEnabled>true</LoggingEnabled><DeadLetterTargetQueue>nosuch</DeadLetterTargetQueue><MaxReceiveCount>3</MaxReceiveCount></Queue>`, fzSign},
	{1, "/other", "", `<Queue/>`, fzSign},
	{1, "/bad name", "", `<Queue/>`, fzSign},
	{3, "/q", "", "", fzSign},
	{0, "", "", "", fzSign}, // ListQueue
	{2, "/q/messages", "", sendBody("aGVsbG8=", "<Priority>3</Priority>"), fzSign},
	{2, "/q/messages", "", sendBody("x", "<Priority>17</Priority>"), fzSign},
	{2, "/q/messages", "", `<Messages><Message><MessageBody>a</MessageBody></Message><Message><MessageBody></MessageBody></Message></Messages>`, fzSign},
	{0, "/q/messages", "numOfMessages=2", "", fzSign},
	{0, "/q/messages", "numOfMessages=99", "", fzSign},
	{0, "/q/messages", "peekonly=true&numOfMessages=16", "", fzSign},
	{3, "/q/messages", "ReceiptHandle=HANDLE", "", fzSign | fzWithHandle},
	{3, "/q/messages", "ReceiptHandle=1-bad", "", fzSign},
	{3, "/q/messages", "", `<ReceiptHandles><ReceiptHandle>HANDLE</ReceiptHandle><ReceiptHandle>1-bad</ReceiptHandle></ReceiptHandles>`, fzSign | fzWithHandle},
	{1, "/q/messages", "ReceiptHandle=HANDLE&VisibilityTimeout=10", "", fzSign | fzWithHandle},
	{1, "/q/messages", "ReceiptHandle=HANDLE&VisibilityTimeout=-1", "", fzSign | fzWithHandle},
	{0, "/q", "", "", 0}, // unsigned
	{2, "/q/messages", "", "<Message><MessageBody>&bogus;</MessageBody></Message>", fzSign},
	{2, "/q/messages", "", sendBody("x", ""), fzSign | fzBadMD5},
	{3, "/q/messages", "ReceiptHandle=HANDLE", "", fzSign | fzWithHandle | fzNoVersion},
	{3, "/q", "", "", fzSign | fzOldDate},
	// Topics.
	{0, "", "", "", fzSign | fzTopics}, // ListTopic
	{0, "/t", "", "", fzSign | fzTopics},
	{1, "/t", "metaoverride=true", `<Topic><MaximumMessageSize>1024</MaximumMessageSize></Topic>`, fzSign | fzTopics},
	{1, "/t", "metaoverride=true", `<Topic><LoggingEnabled>true</LoggingEnabled><MaximumMessageSize>0</MaximumMessageSize></Topic>`, fzSign | fzTopics},
	{1, "/t2", "", `<Topic/>`, fzSign | fzTopics},
	{3, "/t", "", "", fzSign | fzTopics},
	{0, "/t/subscriptions", "", "", fzSign | fzTopics},
	{0, "/t/subscriptions/s", "", "", fzSign | fzTopics},
	{1, "/t/subscriptions/s2", "", subBody(qep("q"), "<FilterTag>tagA</FilterTag>"), fzSign | fzTopics},
	{1, "/t/subscriptions/s2", "", subBody(qep("nosuch"), ""), fzSign | fzTopics},
	{1, "/t/subscriptions/s2", "", subBody("http://10.1.2.3/hook", ""), fzSign | fzTopics},
	{1, "/t/subscriptions/s", "metaoverride=true", `<Subscription><NotifyStrategy>EXPONENTIAL_DECAY_RETRY</NotifyStrategy></Subscription>`, fzSign | fzTopics},
	{1, "/t/subscriptions/s", "metaoverride=true", `<Subscription><NotifyStrategy>NEVER</NotifyStrategy></Subscription>`, fzSign | fzTopics},
	{3, "/t/subscriptions/s", "", "", fzSign | fzTopics},
	{2, "/t/messages", "", pubBody("aGVsbG8=", "<MessageTag>tagA</MessageTag>"), fzSign | fzTopics},
	{2, "/t/messages", "", pubBody("", ""), fzSign | fzTopics},
	{2, "/t/messages", "", pubBody("x", "<MessageTag>"+strings.Repeat("a", 17)+"</MessageTag>"), fzSign | fzTopics},
}

// fuzzMethods are the methods a fuzzed request may have. No HEAD: the
// test's client reads a body of the answer's Content-Length, which a HEAD
// answer does not carry (and no queue or topic path takes HEAD).
var fuzzMethods = []string{"GET", "PUT", "POST", "DELETE", "PATCH", "OPTIONS"}

func FuzzRequests(f *testing.F) {
	for _, s := range requestSeeds {
		f.Add(s.method, s.path, s.query, []byte(s.body), s.flags)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil)) // f.Log may not be called while fuzzing
	env := startEnv(f, envConfig{fakeClock: true,
		engineOpts: func(o *engine.Options) {
			o.Logger = quiet
			o.Push.Disabled = true
		},
		serverOpts: func(o *Options) { o.Logger = quiet }})
	c := env.client()

	f.Fuzz(func(t *testing.T, m byte, path, query string, body []byte, flags byte) {
		env.t = t // failures and logs go to this input
		handle := resetFuzzState(t, c, true)
		checkRequest(t, c, c, fuzzMethods[int(m)%len(fuzzMethods)], path, query, body, flags, handle, true)
	})
}

// checkRequest sends one fuzzed request through c and checks the answer
// (FuzzRequests' properties 1-3); state reads the state before and after
// (through the node that leads it, in a cluster), topics says whether the
// state has topics.
func checkRequest(t *testing.T, c, state *client, method, path, query string, body []byte, flags byte, handle string, topics bool) {
	t.Helper()
	target := "/queues"
	if flags&fzTopics != 0 {
		target = "/topics"
	}
	target += requestLineSafe(path)
	if q := requestLineSafe(query); q != "" {
		target += "?" + q
	}
	if flags&fzWithHandle != 0 {
		target = strings.ReplaceAll(target, "HANDLE", handle)
		body = bytes.ReplaceAll(body, []byte("HANDLE"), []byte(handle))
	}
	rq := req{method: method, target: target, body: string(body), noSign: flags&fzSign == 0, headers: map[string]string{}}
	if flags&fzBadMD5 != 0 {
		rq.headers["Content-MD5"] = hexMD5b64(string(body) + "x")
	}
	if flags&fzNoVersion != 0 {
		rq.headers["x-mns-version"] = "\x00" // deleted (client.format)
	}
	if flags&fzOldDate != 0 {
		d := c.env.now().Add(-20 * time.Minute)
		rq.date = &d
	}
	before := fuzzState(t, state, topics)
	r, err := c.doErr(rq)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	if r.status == 500 {
		t.Fatalf("%s %s: %s", method, target, r)
	}
	checkCommonHeaders(t, r)
	if r.status < 400 {
		return
	}
	if whole := checkErrorDocument(t, r); !whole {
		return // per-entry errors of a batch: the other entries ran
	}
	if after := fuzzState(t, state, topics); after != before {
		t.Fatalf("%s %s was refused (%s) but changed the state:\nbefore %s\nafter  %s", method, target, r, before, after)
	}
	// Nor used up the received message's handle.
	r = state.put("/queues/q/messages?ReceiptHandle="+handle+"&VisibilityTimeout=30", "")
	if r.status != 200 {
		t.Fatalf("%s %s was refused but used up the receipt handle: %s", method, target, r)
	}
}

// requestLineSafe keeps the bytes a request target may carry as they are
// (percent escapes included) and drops the rest (spaces, controls, non-ASCII),
// which would make the request line itself malformed: that layer is
// fasthttp's, not the API's.
func requestLineSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r <= ' ' || r >= 0x7f || r == '#' {
			return -1
		}
		return r
	}, s)
}

// withMeta is the list header that asks for every item's attributes.
var withMeta = map[string]string{"x-mns-with-meta": "true"}

// resetFuzzState leaves exactly queue "q" (default attributes, two visible
// messages and one received) and, with topics, topic "t" (one
// subscription, "s", to "q"); it returns the received message's receipt
// handle.
func resetFuzzState(t *testing.T, c *client, topics bool) string {
	t.Helper()
	if topics {
		var ts xTopics
		decode(t, c.do(req{method: "GET", target: "/topics", headers: withMeta}), &ts)
		for _, x := range ts.Topics {
			if r := c.del("/topics/"+x.TopicName, ""); r.status != 204 {
				t.Fatalf("delete topic %s: %s", x.TopicName, r)
			}
		}
	}
	var qs xQueues
	decode(t, c.do(req{method: "GET", target: "/queues", headers: withMeta}), &qs)
	for _, x := range qs.Queues {
		if r := c.del("/queues/"+x.QueueName, ""); r.status != 204 {
			t.Fatalf("delete queue %s: %s", x.QueueName, r)
		}
	}
	c.mustCreate("q")
	r := c.post("/queues/q/messages", `<Messages><Message><MessageBody>a</MessageBody><Priority>1</Priority></Message>`+
		`<Message><MessageBody>b</MessageBody></Message><Message><MessageBody>c</MessageBody></Message></Messages>`)
	if r.status != 201 {
		t.Fatalf("send: %s", r)
	}
	if topics {
		if r := c.put("/topics/t", ""); r.status != 201 {
			t.Fatalf("create topic: %s", r)
		}
		if r := c.put("/topics/t/subscriptions/s", subBody(qep("q"), "")); r.status != 201 {
			t.Fatalf("subscribe: %s", r)
		}
	}
	return c.mustReceive("q").ReceiptHandle
}

// fuzzState is what a refused request must not change, in one comparable
// string: the queue and topic lists with their attributes and counts, q's
// visible messages as a peek shows them (ids, bodies, priorities, dequeue
// counts, times) and t's subscriptions with their attributes. Success
// documents carry no request id, so their bytes compare as they are; an
// error (q or t gone) counts by its status.
func fuzzState(t *testing.T, c *client, topics bool) string {
	t.Helper()
	var sb strings.Builder
	reads := []req{
		{method: "GET", target: "/queues", headers: withMeta},
		{method: "GET", target: "/queues/q/messages?peekonly=true&numOfMessages=16"},
	}
	if topics {
		reads = append(reads,
			req{method: "GET", target: "/topics", headers: withMeta},
			req{method: "GET", target: "/topics/t/subscriptions", headers: withMeta})
	}
	for _, g := range reads {
		r := c.do(g)
		switch r.status {
		case 200:
			sb.Write(r.body)
		case 404:
			sb.WriteString("404")
		default:
			t.Fatalf("%s %s: %s", g.method, g.target, r)
		}
		sb.WriteByte('\n')
	}
	return sb.String()
}

// checkErrorDocument checks the shape of an error answer; whole is false
// for the per-entry Errors document of a batch.
func checkErrorDocument(t *testing.T, r *response) (whole bool) {
	t.Helper()
	switch {
	case bytes.Contains(r.body, []byte(`<Errors xmlns="http://mns.aliyuncs.com/doc/v1">`)):
		var es xErrors
		decode(t, r, &es)
		if len(es.Errors) == 0 {
			t.Fatalf("an Errors document without an entry: %s", r)
		}
		for _, e := range es.Errors {
			if e.ErrorCode == "" || e.ErrorMessage == "" {
				t.Fatalf("an entry without its code or message: %s", r)
			}
		}
		return false
	case bytes.Contains(r.body, []byte(`<Error xmlns="http://mns.aliyuncs.com/doc/v1">`)):
		errorDocument(t, r)
		return true
	}
	t.Fatalf("a refusal that is not an MNS error document: %s", r)
	return false
}

// TestClusterRefusedRequests sends FuzzRequests' seeds through a node that
// does not lead their queue's shard, so that each is forwarded: a refusal
// comes back as the leader's MNS error document and changes nothing there
// either. The state is read through the leader, whose lists read its own
// writes. Topics are refused in cluster mode; their seeds are left out.
func TestClusterRefusedRequests(t *testing.T) {
	c := startCluster(t, 3, 1)
	c.ready()
	c.settled() // the lead picked below stays: no balancer hand-over moves it
	outer := t
	for i, s := range requestSeeds {
		if s.flags&fzTopics != 0 {
			continue
		}
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			c.t = t
			for _, e := range c.envs {
				e.t = t
			}
			defer func() {
				c.t = outer
				for _, e := range c.envs {
					e.t = outer
				}
			}()
			lead := c.leaderOf("q")
			via := (lead + 1) % len(c.envs)
			leader, other := c.envs[lead].client(), c.envs[via].client()
			defer leader.close()
			defer other.close()
			handle := resetFuzzState(t, leader, false)
			checkRequest(t, other, leader, fuzzMethods[int(s.method)%len(fuzzMethods)], s.path, s.query, []byte(s.body), s.flags, handle, false)
		})
	}
	var fw int64
	for _, n := range c.nodes {
		fw += n.Status().Forwarded
	}
	if fw == 0 {
		t.Fatal("no request was forwarded: the test did not exercise forwarding")
	}
}
