package server

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestSendMessage(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	c.mustCreate("q")
	r := c.post("/queues/q/messages", `<Message><MessageBody>hello world</MessageBody><DelaySeconds>0</DelaySeconds><Priority>8</Priority></Message>`)
	wantStatus(t, r, 201)
	if !strings.HasPrefix(string(r.body), `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+`<Message xmlns="http://mns.aliyuncs.com/doc/v1"><MessageId>`) {
		t.Fatalf("send response: %s", r.body)
	}
	var m xMessage
	decode(t, r, &m)
	// Spec §7.2: verified MD5 of "hello world".
	if m.MessageBodyMD5 != "5EB63BBBE01EEED093CB22BB8F5ACDC3" || len(m.MessageId) != 32 || m.MessageId != strings.ToUpper(m.MessageId) {
		t.Fatalf("got %+v", m)
	}
	checkOrder(t, string(r.body), []string{"MessageId", "MessageBodyMD5"})
	// Java namespace, with declaration standalone="no" and UserProperties (ignored).
	r = c.post("/queues/q/messages", `<?xml version="1.0" encoding="UTF-8" standalone="no"?><Message xmlns="http://mns.aliyuncs.com/doc/v1"><MessageBody>aGk=</MessageBody><UserProperties><PropertyValue><Name>k</Name><Value>v</Value><Type>STRING</Type></PropertyValue></UserProperties></Message>`)
	wantStatus(t, r, 201)
	// Entities are decoded before hashing and storing (spec §7.2), incl. &#NN; and &#xNN;.
	m = c.mustSend("q", "I am &#27979;&#x8BD5;&#23383;&#31526;&#20018;.", "")
	if m.MessageBodyMD5 != "9D75198CAA17528AB23790C1861987AF" {
		t.Fatalf("MD5 of entity-decoded body: %s", m.MessageBodyMD5)
	}
	wantError(t, c.post("/queues/nope/messages", sendBody("x", "")), 404, "QueueNotExist")
}

func TestSendValidation(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	wantStatus(t, c.put("/queues/q", "<Queue><MaximumMessageSize>1024</MaximumMessageSize></Queue>"), 201)
	cases := []struct {
		name, body, code, msg string
	}{
		{"priority 0 (Go SDK default)", sendBody("x", "<Priority>0</Priority>"), "InvalidArgument", "Priority must be between 1 and 16"},
		{"priority 17", sendBody("x", "<Priority>17</Priority>"), "InvalidArgument", "Priority must be between 1 and 16"},
		{"delay", sendBody("x", "<DelaySeconds>604801</DelaySeconds>"), "InvalidArgument", "DelaySeconds must be between 0 and 604800 seconds"},
		{"empty body", sendBody("", ""), "InvalidArgument", "MessageBody must not be empty"},
		{"no body element", `<Message><Priority>1</Priority></Message>`, "InvalidArgument", "MessageBody is missing"},
		{"too big for the queue", sendBody(strings.Repeat("a", 1025), ""), "InvalidArgument", "MaximumMessageSize"},
		{"wrong root", `<Queue/>`, "InvalidArgument", "root element"},
		{"not XML", `hello`, "MalformedXML", ""},
		{"empty request", ``, "MalformedXML", ""},
		{"unescaped <", sendBody("a<b", ""), "MalformedXML", ""},
		{"unescaped &", sendBody("a & b", ""), "MalformedXML", ""},
		{"mismatched tags", `<Message><MessageBody>x</Body></Message>`, "MalformedXML", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := c.post("/queues/q/messages", tc.body)
			if tc.body == "" {
				r = c.do(req{method: "POST", target: "/queues/q/messages"})
			}
			e := wantError(t, r, 400, tc.code)
			if !strings.Contains(e.Message, tc.msg) {
				t.Fatalf("message %q lacks %q", e.Message, tc.msg)
			}
		})
	}
	// Exactly MaximumMessageSize bytes is fine, after entity decoding.
	c.mustSend("q", strings.Repeat("&lt;", 1024), "")
	// Nothing was stored by the failures above.
	var q xQueue
	decode(t, c.get("/queues/q"), &q)
	if q.ActiveMessages != 1 {
		t.Fatalf("active %d, want 1", q.ActiveMessages)
	}
}

func batchBody(n int, entry func(i int) string) string {
	var sb strings.Builder
	sb.WriteString(`<?xml version="1.0" encoding="UTF-8"?><Messages xmlns="http://mns.aliyuncs.com/doc/v1/">`)
	for i := 0; i < n; i++ {
		sb.WriteString("<Message>" + entry(i) + "</Message>")
	}
	sb.WriteString("</Messages>")
	return sb.String()
}

func TestBatchSendMessage(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	c.mustCreate("q")
	body := batchBody(16, func(i int) string {
		return fmt.Sprintf("<MessageBody>m%d</MessageBody><Priority>%d</Priority>", i, i%16+1)
	})
	r := c.post("/queues/q/messages", body)
	wantStatus(t, r, 201)
	var ms xMessages
	decode(t, r, &ms)
	if len(ms.Messages) != 16 {
		t.Fatalf("%d entries", len(ms.Messages))
	}
	for i, m := range ms.Messages {
		if m.MessageBodyMD5 != md5Upper(fmt.Sprintf("m%d", i)) || m.MessageId == "" || m.ReceiptHandle != "" {
			t.Fatalf("entry %d: %+v", i, m)
		}
	}
	// 17 entries: 400, nothing stored (spec §9.6 check 3).
	r = c.post("/queues/q/messages", batchBody(17, func(i int) string { return "<MessageBody>x</MessageBody>" }))
	wantError(t, r, 400, "InvalidArgument")
	// One bad entry fails the whole batch; nothing stored.
	r = c.post("/queues/q/messages", batchBody(3, func(i int) string {
		if i == 2 {
			return "<MessageBody>x</MessageBody><Priority>0</Priority>"
		}
		return "<MessageBody>x</MessageBody>"
	}))
	wantError(t, r, 400, "InvalidArgument")
	wantError(t, c.post("/queues/q/messages", `<Messages></Messages>`), 400, "InvalidArgument")
	var q xQueue
	decode(t, c.get("/queues/q"), &q)
	if q.ActiveMessages != 16 {
		t.Fatalf("active %d, want 16", q.ActiveMessages)
	}
}

func TestReceivePeekAndFields(t *testing.T) {
	env := startEnv(t, envConfig{fakeClock: true})
	c := env.client()
	c.mustCreate("q")
	sent := c.mustSend("q", "hello world", "")
	enq := env.now().UnixMilli()

	// Peek: 7 elements, no handle, nothing changes (spec §3.8).
	r := c.get("/queues/q/messages?peekonly=true")
	wantStatus(t, r, 200)
	checkOrder(t, string(r.body), []string{"MessageId", "MessageBodyMD5", "MessageBody", "EnqueueTime", "FirstDequeueTime", "DequeueCount", "Priority"})
	if strings.Contains(string(r.body), "ReceiptHandle") || strings.Contains(string(r.body), "NextVisibleTime") {
		t.Fatalf("peek has receive fields: %s", r.body)
	}
	var p xMessage
	decode(t, r, &p)
	if p.MessageId != sent.MessageId || p.FirstDequeueTime != enq || p.EnqueueTime != enq || p.DequeueCount != 0 || p.Priority != 8 {
		t.Fatalf("peek: %+v", p)
	}
	env.clock.Advance(time.Second)
	r = c.get("/queues/q/messages")
	wantStatus(t, r, 200)
	checkOrder(t, string(r.body), []string{"MessageId", "ReceiptHandle", "MessageBodyMD5", "MessageBody", "EnqueueTime", "NextVisibleTime", "FirstDequeueTime", "DequeueCount", "Priority"})
	var m xMessage
	decode(t, r, &m)
	now := env.now().UnixMilli()
	if m.MessageId != sent.MessageId || m.MessageBody != "hello world" || m.MessageBodyMD5 != sent.MessageBodyMD5 ||
		m.EnqueueTime != enq || m.FirstDequeueTime != now || m.NextVisibleTime != now+30000 || m.DequeueCount != 1 || m.Priority != 8 {
		t.Fatalf("receive: %+v (now %d)", m, now)
	}
	// Empty (all inactive): 404 MessageNotExist for all four forms (spec §0.9).
	for _, target := range []string{"/queues/q/messages", "/queues/q/messages?numOfMessages=4", "/queues/q/messages?peekonly=true", "/queues/q/messages?numOfMessages=4&peekonly=true"} {
		wantError(t, c.get(target), 404, "MessageNotExist")
	}
	wantError(t, c.get("/queues/nope/messages"), 404, "QueueNotExist")
}

func TestBatchReceiveAndPeek(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	c.mustCreate("q")
	c.mustSend("q", "only", "")
	// numOfMessages present → Messages root even for one (spec §1.2); both parameter orders.
	for _, target := range []string{"/queues/q/messages?numOfMessages=16&peekonly=true", "/queues/q/messages?peekonly=true&numOfMessages=16"} {
		r := c.get(target)
		wantStatus(t, r, 200)
		var ms xMessages
		decode(t, r, &ms)
		if len(ms.Messages) != 1 || ms.Messages[0].MessageBody != "only" || ms.Messages[0].ReceiptHandle != "" {
			t.Fatalf("batch peek %s: %s", target, r.body)
		}
	}
	for i := 0; i < 5; i++ {
		c.mustSend("q", fmt.Sprintf("m%d", i), "")
	}
	r := c.get("/queues/q/messages?numOfMessages=4")
	wantStatus(t, r, 200)
	var ms xMessages
	decode(t, r, &ms)
	if len(ms.Messages) != 4 {
		t.Fatalf("batch receive: %s", r.body)
	}
	for _, m := range ms.Messages {
		if m.ReceiptHandle == "" || m.DequeueCount != 1 || m.NextVisibleTime == 0 {
			t.Fatalf("entry %+v", m)
		}
	}
	r = c.get("/queues/q/messages?numOfMessages=16&waitseconds=1")
	wantStatus(t, r, 200)
	ms = xMessages{}
	decode(t, r, &ms)
	if len(ms.Messages) != 2 {
		t.Fatalf("second batch: %d", len(ms.Messages))
	}
	for _, bad := range []string{"numOfMessages=0", "numOfMessages=17", "numOfMessages=x", "waitseconds=31", "waitseconds=-1", "numOfMessages=2&waitseconds=1.5"} {
		e := wantError(t, c.get("/queues/q/messages?"+bad), 400, "InvalidArgument")
		if !strings.Contains(e.Message, strings.SplitN(strings.SplitN(bad, "&", 2)[len(strings.SplitN(bad, "&", 2))-1], "=", 2)[0]) {
			t.Errorf("%s: message %q", bad, e.Message)
		}
	}
	wantError(t, c.get("/queues/q/messages?numOfMessages=%zz"), 400, "InvalidQueryString")
	wantError(t, c.get("/queues/q/messages?numOfMessages=1&NUMOFMESSAGES=2"), 400, "InvalidQueryString")
}

// Spec §9.6 check 5: receive → delete 204; again 404; garbage 400.
func TestDeleteMessage(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	c.mustCreate("q")
	c.mustSend("q", "x", "")
	m := c.mustReceive("q")
	wantStatus(t, c.del("/queues/q/messages?ReceiptHandle="+m.ReceiptHandle, ""), 204)
	wantError(t, c.del("/queues/q/messages?ReceiptHandle="+m.ReceiptHandle, ""), 404, "MessageNotExist")
	wantError(t, c.del("/queues/q/messages?ReceiptHandle=garbage", ""), 400, "ReceiptHandleError")
	// Old-style base64 handles with raw + / = (spec §0.6): garbage to us, but
	// routed, signed over the raw bytes and answered ReceiptHandleError.
	wantError(t, c.del("/queues/q/messages?ReceiptHandle=1-ODU4+/OTk==", ""), 400, "ReceiptHandleError")
	wantError(t, c.del("/queues/q/messages?ReceiptHandle=1-ODU4%2B%2FOTk%3D%3D", ""), 400, "ReceiptHandleError")
	wantError(t, c.del("/queues/q/messages", ""), 400, "MissingReceiptHandle")
	wantError(t, c.del("/queues/q/messages?ReceiptHandle=", ""), 400, "MissingReceiptHandle")
	wantError(t, c.del("/queues/nope/messages?ReceiptHandle="+m.ReceiptHandle, ""), 404, "QueueNotExist")
	// A handle of our syntax that this queue never issued (check fails).
	forged := m.ReceiptHandle[:len(m.ReceiptHandle)-1] + string("0123456789ABCDEF"[(strings.IndexByte("0123456789ABCDEF", m.ReceiptHandle[len(m.ReceiptHandle)-1])+1)%16])
	wantError(t, c.del("/queues/q/messages?ReceiptHandle="+forged, ""), 400, "ReceiptHandleError")
	// Go SDK form: url.QueryEscape'd; lower-case name (receiptHandle).
	c.mustSend("q", "y", "")
	m = c.mustReceive("q")
	wantStatus(t, c.del("/queues/q/messages?receipthandle="+url.QueryEscape(m.ReceiptHandle), ""), 204)
}

func handlesBody(hs ...string) string {
	var sb strings.Builder
	sb.WriteString(`<ReceiptHandles xmlns="http://mns.aliyuncs.com/doc/v1/">`)
	for _, h := range hs {
		sb.WriteString("<ReceiptHandle>" + h + "</ReceiptHandle>")
	}
	sb.WriteString("</ReceiptHandles>")
	return sb.String()
}

func TestBatchDeleteMessage(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	c.mustCreate("q")
	for i := 0; i < 4; i++ {
		c.mustSend("q", fmt.Sprintf("m%d", i), "")
	}
	var ms xMessages
	decode(t, c.get("/queues/q/messages?numOfMessages=4"), &ms)
	if len(ms.Messages) != 4 {
		t.Fatalf("%d", len(ms.Messages))
	}
	h := []string{ms.Messages[0].ReceiptHandle, ms.Messages[1].ReceiptHandle, ms.Messages[2].ReceiptHandle, ms.Messages[3].ReceiptHandle}
	wantStatus(t, c.del("/queues/q/messages", handlesBody(h[0], h[1])), 204)
	// Partial failure: 404 Errors list with exactly the failed handles (spec §3.9).
	r := c.del("/queues/q/messages", handlesBody(h[2], h[0], "garbage", h[3]))
	wantStatus(t, r, 404)
	if !strings.Contains(string(r.body), `<Errors xmlns="http://mns.aliyuncs.com/doc/v1">`) {
		t.Fatalf("root: %s", r.body)
	}
	var es xErrors
	decode(t, r, &es)
	if len(es.Errors) != 2 || es.Errors[0].ErrorCode != "MessageNotExist" || es.Errors[0].ReceiptHandle != h[0] ||
		es.Errors[1].ErrorCode != "ReceiptHandleError" || es.Errors[1].ReceiptHandle != "garbage" || es.Errors[0].ErrorMessage == "" {
		t.Fatalf("errors: %s", r.body)
	}
	var q xQueue
	decode(t, c.get("/queues/q"), &q)
	if q.ActiveMessages+q.InactiveMessages != 0 {
		t.Fatalf("left: %+v", q)
	}
	hs := make([]string, 17)
	for i := range hs {
		hs[i] = h[0]
	}
	wantError(t, c.del("/queues/q/messages", handlesBody(hs...)), 400, "InvalidArgument")
	wantError(t, c.del("/queues/q/messages", handlesBody()), 400, "InvalidArgument")
	wantError(t, c.del("/queues/q/messages", `<ReceiptHandles><ReceiptHandle>x</ReceiptHandles>`), 400, "MalformedXML")
	wantError(t, c.del("/queues/nope/messages", handlesBody(h[0])), 404, "QueueNotExist")

	// An entry with no handle (empty, or elements instead of text) fails
	// the whole request and deletes nothing: an Errors entry would have
	// to echo an empty ReceiptHandle, which Python's decoder cannot read
	// (spec §0.7, §3.9).
	c.mustSend("q", "kept", "")
	m := c.mustReceive("q")
	for _, bad := range []string{`<ReceiptHandle></ReceiptHandle>`, `<ReceiptHandle/>`, `<ReceiptHandle><x>1</x></ReceiptHandle>`} {
		wantError(t, c.del("/queues/q/messages", `<ReceiptHandles><ReceiptHandle>`+m.ReceiptHandle+`</ReceiptHandle>`+bad+`</ReceiptHandles>`), 400, "MissingReceiptHandle")
	}
	wantStatus(t, c.del("/queues/q/messages?ReceiptHandle="+m.ReceiptHandle, ""), 204)
}

// Spec §9.6 check 6: receive → change visibility → new handle; old → 404; new deletes.
func TestChangeMessageVisibility(t *testing.T) {
	env := startEnv(t, envConfig{fakeClock: true})
	c := env.client()
	c.mustCreate("q")
	c.mustSend("q", "x", "")
	m := c.mustReceive("q")
	r := c.put("/queues/q/messages?ReceiptHandle="+m.ReceiptHandle+"&VisibilityTimeout=100", "")
	wantStatus(t, r, 200)
	if !strings.Contains(string(r.body), `<ChangeVisibility xmlns="http://mns.aliyuncs.com/doc/v1"><ReceiptHandle>`) {
		t.Fatalf("root: %s", r.body)
	}
	var cv xChangeVisibility
	decode(t, r, &cv)
	if cv.ReceiptHandle == "" || cv.ReceiptHandle == m.ReceiptHandle || cv.NextVisibleTime != env.now().UnixMilli()+100000 {
		t.Fatalf("change: %+v", cv)
	}
	wantError(t, c.del("/queues/q/messages?ReceiptHandle="+m.ReceiptHandle, ""), 404, "MessageNotExist")
	wantError(t, c.put("/queues/q/messages?ReceiptHandle="+m.ReceiptHandle+"&VisibilityTimeout=10", ""), 404, "MessageNotExist")
	// @alicloud/mns and PHP: lower-case names.
	r = c.put("/queues/q/messages?receiptHandle="+cv.ReceiptHandle+"&visibilityTimeout=5", "")
	wantStatus(t, r, 200)
	decode(t, r, &cv)
	wantStatus(t, c.del("/queues/q/messages?ReceiptHandle="+cv.ReceiptHandle, ""), 204)

	wantError(t, c.put("/queues/q/messages?VisibilityTimeout=5", ""), 400, "MissingReceiptHandle")
	wantError(t, c.put("/queues/q/messages?ReceiptHandle="+cv.ReceiptHandle, ""), 400, "MissingVisibilityTimeout")
	for _, v := range []string{"0", "43201", "abc"} {
		e := wantError(t, c.put("/queues/q/messages?ReceiptHandle="+cv.ReceiptHandle+"&VisibilityTimeout="+v, ""), 400, "InvalidArgument")
		if !strings.Contains(e.Message, "VisibilityTimeout") {
			t.Fatalf("message %q", e.Message)
		}
	}
	wantError(t, c.put("/queues/q/messages?ReceiptHandle=junk&VisibilityTimeout=5", ""), 400, "ReceiptHandleError")
}

// Spec §9.6 check 7: visibility expiry → visible again, DequeueCount 2,
// FirstDequeueTime unchanged, old handle 404. Fake clock, no sleeping.
func TestVisibilityExpiry(t *testing.T) {
	env := startEnv(t, envConfig{fakeClock: true})
	c := env.client()
	wantStatus(t, c.put("/queues/q", "<Queue><VisibilityTimeout>10</VisibilityTimeout></Queue>"), 201)
	c.mustSend("q", "x", "")
	first := c.mustReceive("q")
	wantError(t, c.get("/queues/q/messages"), 404, "MessageNotExist")
	env.clock.Advance(10*time.Second + time.Millisecond)
	second := c.mustReceive("q")
	if second.MessageId != first.MessageId || second.DequeueCount != 2 || second.FirstDequeueTime != first.FirstDequeueTime || second.ReceiptHandle == first.ReceiptHandle {
		t.Fatalf("first %+v\nsecond %+v", first, second)
	}
	wantError(t, c.del("/queues/q/messages?ReceiptHandle="+first.ReceiptHandle, ""), 404, "MessageNotExist")
	wantStatus(t, c.del("/queues/q/messages?ReceiptHandle="+second.ReceiptHandle, ""), 204)
}

// Spec §9.6 check 8: priority 1 received before priority 16 sent earlier.
func TestPriorityOrder(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	c.mustCreate("q")
	c.mustSend("q", "low", "<Priority>16</Priority>")
	c.mustSend("q", "high", "<Priority>1</Priority>")
	if m := c.mustReceive("q"); m.MessageBody != "high" || m.Priority != 1 {
		t.Fatalf("first received %+v", m)
	}
	if m := c.mustReceive("q"); m.MessageBody != "low" || m.Priority != 16 {
		t.Fatalf("second received %+v", m)
	}
}

// Spec §9.6 check 9: the counters move with send, receive and delay.
func TestQueueCounters(t *testing.T) {
	env := startEnv(t, envConfig{fakeClock: true})
	c := env.client()
	c.mustCreate("q")
	c.mustSend("q", "a", "")
	c.mustSend("q", "b", "")
	c.mustSend("q", "d", "<DelaySeconds>60</DelaySeconds>")
	c.mustReceive("q")
	var q xQueue
	decode(t, c.get("/queues/q"), &q)
	if q.ActiveMessages != 1 || q.InactiveMessages != 1 || q.DelayMessages != 1 {
		t.Fatalf("counts %+v", q)
	}
	env.clock.Advance(61 * time.Second)
	decode(t, c.get("/queues/q"), &q)
	if q.ActiveMessages != 3 || q.InactiveMessages != 0 || q.DelayMessages != 0 {
		t.Fatalf("counts after delay and visibility %+v", q)
	}
}

// Bodies round-trip: escaping on output, CR LF → LF, &#13; kept, CDATA.
func TestBodyTextRoundTrip(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	c.mustCreate("q")
	cases := []struct{ sent, stored string }{
		{"a &lt;b&gt; &amp; &quot;c&quot; &apos;", `a <b> & "c" '`},
		{"line1\r\nline2\rline3\n", "line1\nline2\nline3\n"},
		{"keep&#13;&#10;cr", "keep\r\ncr"},
		{"<![CDATA[<raw> & stuff]]>", "<raw> & stuff"},
		{"  spaced  ", "  spaced  "},
		{"日本語 ✓", "日本語 ✓"},
	}
	for _, tc := range cases {
		sent := c.mustSend("q", tc.sent, "")
		if sent.MessageBodyMD5 != md5Upper(tc.stored) {
			t.Errorf("%q: MD5 %s, want MD5 of %q", tc.sent, sent.MessageBodyMD5, tc.stored)
		}
		r := c.get("/queues/q/messages")
		wantStatus(t, r, 200)
		var m xMessage
		decode(t, r, &m)
		if m.MessageBody != tc.stored {
			t.Errorf("%q: received %q, want %q (raw %s)", tc.sent, m.MessageBody, tc.stored, r.body)
		}
		wantStatus(t, c.del("/queues/q/messages?ReceiptHandle="+m.ReceiptHandle, ""), 204)
	}
}
