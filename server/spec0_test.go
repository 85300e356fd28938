package server

// The ten things of spec §0, each checked over a real listener as a whole
// (other tests check the details of each operation):
//
//	 1 namespace without a trailing slash on every response, never a prefix   TestSpec0ResponseDocuments
//	 2 request XML by local name, any namespace                                TestSpec0RequestNamespaces
//	 3 errors: text/xml, Error with Code, Message, RequestId, HostId            wantError (every test), TestSpec0ResponseDocuments
//	 4 Content-MD5 in either encoding (or neither) never refused                TestContentMD5Forms
//	 5 the raw request target is signed                                         TestSignatureVectorOverTheWire, TestSpec0PlusIsAPlus
//	 6 '+' in a query value is a plus                                           TestSpec0PlusIsAPlus
//	 7 query parameter names in any case                                        TestSpec0ParameterNamesAnyCase
//	 8 exact success codes of the 14 operations                                 TestSpec0ResponseDocuments
//	 9 empty queue = 404 MessageNotExist after the wait; batch partial failures
//	   are >= 400 with a list body                                              TestSpec0ResponseDocuments
//	10 all 12 attributes, all 9 (7) message elements, no empty elements,
//	   Location also on 204                                                     TestSpec0ResponseDocuments
//
// and two details of §2.3 and §3.5: TestSecurityTokenAndOtherHeadersIgnored,
// TestSendKeepsPropertiesIgnoresGroup.

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
)

// xnode is a parsed XML element, with namespace information kept.
type xnode struct {
	name     xml.Name
	attrs    []xml.Attr
	children []*xnode
	text     string
}

// parseXMLTree parses a whole response document.
func parseXMLTree(t *testing.T, body []byte) *xnode {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(body))
	var stack []*xnode
	var root *xnode
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("response is not well-formed XML (%v): %s", err, body)
		}
		switch tk := tok.(type) {
		case xml.StartElement:
			n := &xnode{name: tk.Name, attrs: tk.Attr}
			if len(stack) > 0 {
				p := stack[len(stack)-1]
				p.children = append(p.children, n)
			} else if root != nil {
				t.Fatalf("two root elements: %s", body)
			} else {
				root = n
			}
			stack = append(stack, n)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 {
				stack[len(stack)-1].text += string(tk)
			}
		}
	}
	if root == nil {
		t.Fatalf("no root element: %q", body)
	}
	return root
}

func (n *xnode) childNames() []string {
	var s []string
	for _, c := range n.children {
		s = append(s, c.name.Local)
	}
	return s
}

// checkDocument checks a response body against spec §0.1, §0.10 and §3.1:
// the declaration, the root's name in the default namespace without a
// trailing slash and no other namespace declaration or prefix anywhere, and
// no empty element. It returns the root.
func checkDocument(t *testing.T, r *response, root string) *xnode {
	t.Helper()
	const decl = `<?xml version="1.0" encoding="UTF-8"?>`
	if !bytes.HasPrefix(r.body, []byte(decl)) {
		t.Fatalf("no XML declaration: %s", r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "text/xml;charset=utf-8" {
		t.Fatalf("Content-Type %q", ct)
	}
	if n := bytes.Count(r.body, []byte("xmlns")); n != 1 {
		t.Fatalf("%d namespace declarations: %s", n, r.body)
	}
	doc := parseXMLTree(t, r.body)
	if doc.name.Local != root || doc.name.Space != "http://mns.aliyuncs.com/doc/v1" {
		t.Fatalf("root {%s}%s, want {http://mns.aliyuncs.com/doc/v1}%s: %s", doc.name.Space, doc.name.Local, root, r.body)
	}
	if len(doc.attrs) != 1 || doc.attrs[0].Name.Space != "" || doc.attrs[0].Name.Local != "xmlns" {
		t.Fatalf("root attributes %v: %s", doc.attrs, r.body)
	}
	var walk func(n *xnode)
	walk = func(n *xnode) {
		if n != doc && len(n.attrs) > 0 {
			t.Fatalf("attributes on %s: %s", n.name.Local, r.body)
		}
		if len(n.children) == 0 && n != doc && n.text == "" {
			t.Fatalf("empty element %s: %s", n.name.Local, r.body)
		}
		for _, c := range n.children {
			walk(c)
		}
	}
	walk(doc)
	return doc
}

func wantChildren(t *testing.T, n *xnode, want ...string) {
	t.Helper()
	if got := strings.Join(n.childNames(), ","); got != strings.Join(want, ",") {
		t.Fatalf("%s has %s, want %s", n.name.Local, got, strings.Join(want, ","))
	}
}

var (
	queueElems    = []string{"QueueName", "CreateTime", "LastModifyTime", "DelaySeconds", "MaximumMessageSize", "MessageRetentionPeriod", "VisibilityTimeout", "PollingWaitSeconds", "ActiveMessages", "InactiveMessages", "DelayMessages", "LoggingEnabled"}
	receivedElems = []string{"MessageId", "ReceiptHandle", "MessageBodyMD5", "MessageBody", "EnqueueTime", "NextVisibleTime", "FirstDequeueTime", "DequeueCount", "Priority"}
	peekedElems   = []string{"MessageId", "MessageBodyMD5", "MessageBody", "EnqueueTime", "FirstDequeueTime", "DequeueCount", "Priority"}
)

// One walk through all 14 operations: exact success statuses (§0.8), the
// document of every answer (§0.1, §0.10), empty receives (§0.9), batch
// partial failure (§0.9), and errors from every layer (§0.3).
func TestSpec0ResponseDocuments(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	loc := "http://" + env.addr + "/queues/q"

	// CreateQueue 201, identical 204, both with Location; no body.
	r := c.put("/queues/q", "")
	wantStatus(t, r, 201)
	if r.header.Get("Location") != loc || len(r.body) != 0 {
		t.Fatalf("create: %v %q", r.header, r.body)
	}
	r = c.put("/queues/q", "<Queue/>")
	wantStatus(t, r, 204)
	if r.header.Get("Location") != loc || len(r.body) != 0 {
		t.Fatalf("create again: %v %q", r.header, r.body)
	}
	// SetQueueAttributes 204.
	r = c.put("/queues/q?metaoverride=true", "<Queue><LoggingEnabled>true</LoggingEnabled></Queue>")
	wantStatus(t, r, 204)
	// GetQueueAttributes 200, exactly the 12 elements.
	r = c.get("/queues/q")
	wantStatus(t, r, 200)
	wantChildren(t, checkDocument(t, r, "Queue"), queueElems...)
	// ListQueue 200, plain and with meta: QueueURL (+ the 12), NextMarker
	// only while more remain; an empty list is an empty root.
	c.mustCreate("q2")
	r = c.do(req{method: "GET", target: "/queues", headers: map[string]string{"x-mns-ret-number": "1"}})
	wantStatus(t, r, 200)
	doc := checkDocument(t, r, "Queues")
	wantChildren(t, doc, "Queue", "NextMarker")
	wantChildren(t, doc.children[0], "QueueURL")
	r = c.do(req{method: "GET", target: "/queues", headers: map[string]string{"x-mns-with-meta": "true"}})
	wantStatus(t, r, 200)
	doc = checkDocument(t, r, "Queues")
	wantChildren(t, doc, "Queue", "Queue")
	for _, q := range doc.children {
		wantChildren(t, q, append([]string{"QueueURL"}, queueElems...)...)
	}
	r = c.do(req{method: "GET", target: "/queues", headers: map[string]string{"x-mns-prefix": "none"}})
	wantStatus(t, r, 200)
	wantChildren(t, checkDocument(t, r, "Queues"))

	// Empty queue: 404 MessageNotExist for the four receive/peek forms,
	// also after a wait.
	for _, target := range []string{
		"/queues/q/messages", "/queues/q/messages?waitseconds=1",
		"/queues/q/messages?numOfMessages=16", "/queues/q/messages?numOfMessages=16&waitseconds=1",
		"/queues/q/messages?peekonly=true", "/queues/q/messages?peekonly=true&numOfMessages=16",
	} {
		r = c.get(target)
		wantError(t, r, 404, "MessageNotExist")
		checkDocument(t, r, "Error")
	}

	// SendMessage 201: MessageId and MessageBodyMD5.
	r = c.post("/queues/q/messages", sendBody("one", "<Priority>1</Priority>"))
	wantStatus(t, r, 201)
	wantChildren(t, checkDocument(t, r, "Message"), "MessageId", "MessageBodyMD5")
	// BatchSendMessage 201: one entry per message, exactly the two elements.
	r = c.post("/queues/q/messages", `<Messages><Message><MessageBody>two</MessageBody></Message><Message><MessageBody>three</MessageBody></Message></Messages>`)
	wantStatus(t, r, 201)
	doc = checkDocument(t, r, "Messages")
	wantChildren(t, doc, "Message", "Message")
	for _, m := range doc.children {
		wantChildren(t, m, "MessageId", "MessageBodyMD5")
	}
	// PeekMessage / BatchPeekMessage 200: the 7 elements.
	r = c.get("/queues/q/messages?peekonly=true")
	wantStatus(t, r, 200)
	wantChildren(t, checkDocument(t, r, "Message"), peekedElems...)
	r = c.get("/queues/q/messages?peekonly=true&numOfMessages=1")
	wantStatus(t, r, 200)
	doc = checkDocument(t, r, "Messages") // Messages also for N=1
	wantChildren(t, doc, "Message")
	wantChildren(t, doc.children[0], peekedElems...)
	// ReceiveMessage / BatchReceiveMessage 200: the 9 elements.
	r = c.get("/queues/q/messages")
	wantStatus(t, r, 200)
	doc = checkDocument(t, r, "Message")
	wantChildren(t, doc, receivedElems...)
	h1 := doc.children[1].text
	r = c.get("/queues/q/messages?numOfMessages=16")
	wantStatus(t, r, 200)
	doc = checkDocument(t, r, "Messages")
	wantChildren(t, doc, "Message", "Message")
	var hs []string
	for _, m := range doc.children {
		wantChildren(t, m, receivedElems...)
		hs = append(hs, m.children[1].text)
	}
	// ChangeMessageVisibility 200: ChangeVisibility with the two elements.
	r = c.put("/queues/q/messages?ReceiptHandle="+h1+"&VisibilityTimeout=60", "")
	wantStatus(t, r, 200)
	doc = checkDocument(t, r, "ChangeVisibility")
	wantChildren(t, doc, "ReceiptHandle", "NextVisibleTime")
	h1 = doc.children[0].text
	// DeleteMessage 204, no body.
	r = c.del("/queues/q/messages?ReceiptHandle="+h1, "")
	wantStatus(t, r, 204)
	if len(r.body) != 0 {
		t.Fatalf("delete body %q", r.body)
	}
	// BatchDeleteMessage: partial failure 404 with an Errors list of
	// exactly ErrorCode, ErrorMessage, ReceiptHandle; the valid one is gone.
	r = c.del("/queues/q/messages", "<ReceiptHandles><ReceiptHandle>"+h1+"</ReceiptHandle><ReceiptHandle>"+hs[0]+"</ReceiptHandle></ReceiptHandles>")
	wantStatus(t, r, 404)
	doc = checkDocument(t, r, "Errors")
	wantChildren(t, doc, "Error")
	wantChildren(t, doc.children[0], "ErrorCode", "ErrorMessage", "ReceiptHandle")
	// All deleted: 204, no body.
	r = c.del("/queues/q/messages", "<ReceiptHandles><ReceiptHandle>"+hs[1]+"</ReceiptHandle></ReceiptHandles>")
	wantStatus(t, r, 204)
	if len(r.body) != 0 {
		t.Fatalf("batch delete body %q", r.body)
	}
	// DeleteQueue 204, no body.
	r = c.del("/queues/q2", "")
	wantStatus(t, r, 204)

	// Errors of every layer are the same document: routing, authentication,
	// query, XML syntax, validation, engine, transport.
	for _, e := range []struct {
		r      *response
		status int
		code   string
	}{
		{c.get("/nothing"), 400, "InvalidRequestURL"},
		{c.do(req{method: "GET", target: "/queues/q", noSign: true}), 400, "MissingAuthorizationHeader"},
		{c.get("/queues/q/messages?waitseconds=%zz"), 400, "InvalidQueryString"},
		{c.post("/queues/q/messages", "<Message><MessageBody>a < b</MessageBody></Message>"), 400, "MalformedXML"},
		{c.post("/queues/q/messages", sendBody("x", "<Priority>0</Priority>")), 400, "InvalidArgument"},
		{c.get("/queues/q2"), 404, "QueueNotExist"},
		{c.put("/queues/q", "<Queue><VisibilityTimeout>31</VisibilityTimeout></Queue>"), 409, "QueueAlreadyExist"},
		{env.client().raw("POST /queues/q/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 104857600\r\n\r\n"), 400, "InvalidArgument"},
	} {
		wantError(t, e.r, e.status, e.code)
		wantChildren(t, checkDocument(t, e.r, "Error"), "Code", "Message", "RequestId", "HostId")
	}
}

// Request documents are matched by local name: no namespace (Go, ali-mns),
// .../doc/v1/ (Python, Node, PHP), .../doc/v1 (Java, with standalone="no"),
// and a prefixed form, for each request root.
func TestSpec0RequestNamespaces(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	forms := []struct{ name, decl, open, close, elem string }{
		{"none", "", "<%s>", "</%s>", "%s"},
		{"slash", `<?xml version="1.0" encoding="utf-8"?>`, `<%s xmlns="http://mns.aliyuncs.com/doc/v1/">`, "</%s>", "%s"},
		{"noslash", `<?xml version="1.0" encoding="UTF-8" standalone="no"?>`, `<%s xmlns="http://mns.aliyuncs.com/doc/v1">`, "</%s>", "%s"},
		{"prefixed", "", `<m:%s xmlns:m="http://mns.aliyuncs.com/doc/v1/">`, "</m:%s>", "m:%s"},
	}
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			el := func(name, text string) string {
				n := strings.ReplaceAll(f.elem, "%s", name)
				return "<" + n + ">" + text + "</" + n + ">"
			}
			root := func(name, inner string) string {
				return f.decl + strings.ReplaceAll(f.open, "%s", name) + inner + strings.ReplaceAll(f.close, "%s", name)
			}
			q := "ns-" + f.name
			wantStatus(t, c.put("/queues/"+q, root("Queue", el("VisibilityTimeout", "40"))), 201)
			wantStatus(t, c.put("/queues/"+q+"?metaoverride=true", root("Queue", el("DelaySeconds", "0")+el("MaximumMessageSize", "2048"))), 204)
			var qa xQueue
			decode(t, c.get("/queues/"+q), &qa)
			if qa.VisibilityTimeout != 40 || qa.MaximumMessageSize != 2048 {
				t.Fatalf("attributes not applied: %+v", qa)
			}
			r := c.post("/queues/"+q+"/messages", root("Message", el("MessageBody", "single")+el("Priority", "2")))
			wantStatus(t, r, 201)
			r = c.post("/queues/"+q+"/messages", root("Messages", el("Message", el("MessageBody", "b1"))+el("Message", el("MessageBody", "b2")+el("Priority", "16"))))
			wantStatus(t, r, 201)
			var ms xMessages
			decode(t, r, &ms)
			if len(ms.Messages) != 2 {
				t.Fatalf("batch: %s", r.body)
			}
			r = c.get("/queues/" + q + "/messages?numOfMessages=16")
			wantStatus(t, r, 200)
			ms = xMessages{}
			decode(t, r, &ms)
			if len(ms.Messages) != 3 || ms.Messages[0].MessageBody != "single" || ms.Messages[0].Priority != 2 {
				t.Fatalf("received: %+v", ms.Messages)
			}
			var hs string
			for _, m := range ms.Messages {
				hs += el("ReceiptHandle", m.ReceiptHandle)
			}
			wantStatus(t, c.del("/queues/"+q+"/messages", root("ReceiptHandles", hs)), 204)
		})
	}
}

// A literal '+' in a query value is a plus (spec §0.6), and the target is
// signed as sent (§0.5): "+1" is not an integer (a form decoder would read
// " 1" and accept it), "%201" is one (a space, ignored around integers),
// and a handle with '+', '/' and '=' sent raw is refused as a handle, not
// as a signature.
func TestSpec0PlusIsAPlus(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	c.mustCreate("q")
	c.mustSend("q", "x", "")
	wantError(t, c.get("/queues/q/messages?numOfMessages=+1"), 400, "InvalidArgument")
	wantError(t, c.get("/queues/q/messages?peekonly=true&numOfMessages=1+"), 400, "InvalidArgument")
	r := c.get("/queues/q/messages?peekonly=true&numOfMessages=%201")
	wantStatus(t, r, 200)
	wantError(t, c.del("/queues/q/messages?ReceiptHandle=1-ODU4+/OTk==", ""), 400, "ReceiptHandleError")
	wantError(t, c.del("/queues/q/messages?ReceiptHandle=1-ODU4%2B%2FOTk%3D%3D", ""), 400, "ReceiptHandleError")
	wantError(t, c.put("/queues/q/messages?receiptHandle=MbZj6wDWli+QEauMZc8ZRv37sIW2iJKq3M9Mx/KSbkJ0&visibilityTimeout=10", ""), 400, "ReceiptHandleError")
}

// Query parameter names match in any case (spec §0.7, §1.3).
func TestSpec0ParameterNamesAnyCase(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	c.mustCreate("q")
	wantStatus(t, c.put("/queues/q?METAOVERRIDE=True", "<Queue><VisibilityTimeout>50</VisibilityTimeout></Queue>"), 204)
	wantStatus(t, c.put("/queues/q?metaOverride=TRUE", "<Queue><DelaySeconds>0</DelaySeconds></Queue>"), 204)
	var qa xQueue
	decode(t, c.get("/queues/q"), &qa)
	if qa.VisibilityTimeout != 50 {
		t.Fatalf("set with METAOVERRIDE: %+v", qa)
	}
	for i := 0; i < 3; i++ {
		c.mustSend("q", "m", "")
	}
	r := c.get("/queues/q/messages?PeekOnly=TRUE&NUMOFMESSAGES=2")
	wantStatus(t, r, 200)
	var ms xMessages
	decode(t, r, &ms)
	if len(ms.Messages) != 2 || ms.Messages[0].ReceiptHandle != "" {
		t.Fatalf("peek: %s", r.body)
	}
	r = c.get("/queues/q/messages?NumOfMessages=3&WaitSeconds=1")
	wantStatus(t, r, 200)
	ms = xMessages{}
	decode(t, r, &ms)
	if len(ms.Messages) != 3 {
		t.Fatalf("receive: %s", r.body)
	}
	h := []string{ms.Messages[0].ReceiptHandle, ms.Messages[1].ReceiptHandle, ms.Messages[2].ReceiptHandle}
	for i, names := range [][2]string{
		{"ReceiptHandle", "VisibilityTimeout"}, // Go, Python, Java, ali-mns
		{"receiptHandle", "visibilityTimeout"}, // @alicloud/mns, PHP, docs
		{"RECEIPTHANDLE", "VISIBILITYTIMEOUT"},
	} {
		r = c.put("/queues/q/messages?"+names[0]+"="+h[i]+"&"+names[1]+"=40", "")
		wantStatus(t, r, 200)
		var cv xChangeVisibility
		decode(t, r, &cv)
		h[i] = cv.ReceiptHandle
	}
	wantStatus(t, c.del("/queues/q/messages?receipthandle="+h[0], ""), 204)
	wantStatus(t, c.del("/queues/q/messages?ReceiptHandle="+h[1], ""), 204)
	wantStatus(t, c.del("/queues/q/messages?RECEIPTHANDLE="+h[2], ""), 204)
	// The same parameter twice, in two spellings, is ambiguous.
	wantError(t, c.del("/queues/q/messages?ReceiptHandle="+h[0]+"&receiptHandle="+h[1], ""), 400, "InvalidQueryString")
}

// STS: the security-token header (not x-mns-*, so not signed) is accepted
// and ignored (spec §2.3); the request is checked by its signature alone.
// Other x-mns-* headers (x-mns-user-request-id of Python and Java) are
// signed like every x-mns-* header and otherwise ignored; User-Agent is
// neither.
func TestSecurityTokenAndOtherHeadersIgnored(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	r := c.do(req{method: "PUT", target: "/queues/q", headers: map[string]string{"security-token": "CAIS-sts-token"}})
	wantStatus(t, r, 201)
	r = c.do(req{method: "GET", target: "/queues/q", headers: map[string]string{
		"security-token": "another", "x-mns-user-request-id": "0b5f6c1e-7d5c-4a57-a1c4-2f6f1f0f9a11", "User-Agent": "aliyun-sdk-python/1.1.6"}})
	wantStatus(t, r, 200)
	// The x-mns-user-request-id header is signed: changing it after signing
	// breaks the signature.
	h := map[string]string{"x-mns-user-request-id": "a"}
	raw := c.build(req{method: "GET", target: "/queues/q", headers: h})
	raw = strings.Replace(raw, "x-mns-user-request-id: a\r\n", "x-mns-user-request-id: b\r\n", 1)
	wantError(t, c.raw(raw), 403, "SignatureDoesNotMatch")
}

// UserProperties and SystemProperties are kept and echoed after the nine
// elements (spec §3.7); MessageGroupId (spec §3.5) is accepted and ignored.
func TestSendKeepsPropertiesIgnoresGroup(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	c.mustCreate("q")
	body := `<Message xmlns="http://mns.aliyuncs.com/doc/v1"><MessageBody>p</MessageBody>` +
		`<UserProperties><PropertyValue><Name>k</Name><Value>v</Value><Type>STRING</Type></PropertyValue></UserProperties>` +
		`<SystemProperties><SystemPropertyValue><Name>traceparent</Name><Value>00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01</Value><Type>STRING</Type></SystemPropertyValue></SystemProperties>` +
		`<MessageGroupId>g1</MessageGroupId></Message>`
	r := c.post("/queues/q/messages", body)
	wantStatus(t, r, 201)
	r = c.get("/queues/q/messages")
	wantStatus(t, r, 200)
	doc := checkDocument(t, r, "Message")
	wantChildren(t, doc, append(receivedElems[:len(receivedElems):len(receivedElems)], "UserProperties", "SystemProperties")...)
	if doc.children[3].text != "p" {
		t.Fatalf("body %q", doc.children[3].text)
	}
}
