package server

// FuzzQueueRequests drives whole requests (method, path, query, headers and
// body) through the server's real handler, signed as an SDK signs them,
// against one queue in a known state, and checks what every answer must
// hold whatever the input:
//
//  1. no answer is a 500, and every answer carries the common headers;
//  2. every refusal is an MNS error document: root Error (or Errors, the
//     per-entry answer of a batch) in the MNS namespace, a Code, a Message,
//     the RequestId of the header and a HostId;
//  3. a request refused as a whole (root Error) changes nothing: every
//     queue's attributes and message counts are as they were.
//
// The queue "q" holds three messages before each input: two visible, one
// received. The token HANDLE in the query or body stands for the received
// message's receipt handle, so that the fuzzer reaches the delete and
// visibility paths with a live handle too. "q" always has visible messages,
// so no receive long-polls.

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/smqd/smqd/engine"
)

func FuzzQueueRequests(f *testing.F) {
	const sign, withHandle = 1, 2
	seeds := []struct {
		method      byte
		path, query string
		body        string
		flags       byte
	}{
		{0, "/q", "", "", sign}, // GetQueueAttributes
		{1, "/q", "", `<Queue><VisibilityTimeout>60</VisibilityTimeout></Queue>`, sign}, // create: 409, a different queue
		{1, "/q", "metaoverride=true", `<Queue><DelaySeconds>2</DelaySeconds></Queue>`, sign},
		{1, "/q", "metaoverride=true", `<Queue><DelaySeconds>999999</DelaySeconds></Queue>`, sign},
		{1, "/q", "metaoverride=true", `<Queue><LoggingEnabled>true</LoggingEnabled><DeadLetterTargetQueue>nosuch</DeadLetterTargetQueue><MaxReceiveCount>3</MaxReceiveCount></Queue>`, sign},
		{1, "/other", "", `<Queue/>`, sign},
		{1, "/bad name", "", `<Queue/>`, sign},
		{3, "/q", "", "", sign},
		{0, "", "", "", sign}, // ListQueue
		{2, "/q/messages", "", sendBody("aGVsbG8=", "<Priority>3</Priority>"), sign},
		{2, "/q/messages", "", sendBody("x", "<Priority>17</Priority>"), sign},
		{2, "/q/messages", "", `<Messages><Message><MessageBody>a</MessageBody></Message><Message><MessageBody></MessageBody></Message></Messages>`, sign},
		{0, "/q/messages", "numOfMessages=2", "", sign},
		{0, "/q/messages", "numOfMessages=99", "", sign},
		{0, "/q/messages", "peekonly=true&numOfMessages=16", "", sign},
		{3, "/q/messages", "ReceiptHandle=HANDLE", "", sign | withHandle},
		{3, "/q/messages", "ReceiptHandle=1-bad", "", sign},
		{3, "/q/messages", "", `<ReceiptHandles><ReceiptHandle>HANDLE</ReceiptHandle><ReceiptHandle>1-bad</ReceiptHandle></ReceiptHandles>`, sign | withHandle},
		{1, "/q/messages", "ReceiptHandle=HANDLE&VisibilityTimeout=10", "", sign | withHandle},
		{1, "/q/messages", "ReceiptHandle=HANDLE&VisibilityTimeout=-1", "", sign | withHandle},
		{0, "/q", "", "", 0}, // unsigned
		{2, "/q/messages", "", "<Message><MessageBody>&bogus;</MessageBody></Message>", sign},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, s.query, []byte(s.body), s.flags)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil)) // f.Log may not be called while fuzzing
	env := startEnv(f, envConfig{fakeClock: true,
		engineOpts: func(o *engine.Options) { o.Logger = quiet },
		serverOpts: func(o *Options) { o.Logger = quiet }})
	c := env.client()
	// No HEAD: the test's client reads a body of the answer's
	// Content-Length, which a HEAD answer does not carry.
	methods := []string{"GET", "PUT", "POST", "DELETE", "PATCH", "OPTIONS"}

	f.Fuzz(func(t *testing.T, m byte, path, query string, body []byte, flags byte) {
		env.t = t // failures and logs go to this input
		handle := resetFuzzQueue(t, c)
		method := methods[int(m)%len(methods)]
		target := "/queues" + requestLineSafe(path)
		if q := requestLineSafe(query); q != "" {
			target += "?" + q
		}
		if flags&withHandle != 0 {
			target = strings.ReplaceAll(target, "HANDLE", handle)
			body = bytes.ReplaceAll(body, []byte("HANDLE"), []byte(handle))
		}
		before := queueStates(t, c)
		r, err := c.doErr(req{method: method, target: target, body: string(body), noSign: flags&sign == 0})
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
		if after := queueStates(t, c); after != before {
			t.Fatalf("%s %s was refused (%s) but changed the queues:\nbefore %s\nafter  %s", method, target, r, before, after)
		}
		// Nor used up the received message's handle.
		r = c.put("/queues/q/messages?ReceiptHandle="+handle+"&VisibilityTimeout=30", "")
		if r.status != 200 {
			t.Fatalf("%s %s was refused but used up the receipt handle: %s", method, target, r)
		}
	})
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

// resetFuzzQueue leaves exactly one queue, "q" with default attributes,
// holding two visible messages and one received; it returns the received
// one's receipt handle.
func resetFuzzQueue(t *testing.T, c *client) string {
	t.Helper()
	r := c.do(req{method: "GET", target: "/queues", headers: map[string]string{"x-mns-with-meta": "true"}})
	var qs xQueues
	decode(t, r, &qs)
	for _, q := range qs.Queues {
		if r := c.del("/queues/"+q.QueueName, ""); r.status != 204 {
			t.Fatalf("delete %s: %s", q.QueueName, r)
		}
	}
	c.mustCreate("q")
	r = c.post("/queues/q/messages", `<Messages><Message><MessageBody>a</MessageBody><Priority>1</Priority></Message>`+
		`<Message><MessageBody>b</MessageBody></Message><Message><MessageBody>c</MessageBody></Message></Messages>`)
	if r.status != 201 {
		t.Fatalf("send: %s", r)
	}
	m := c.mustReceive("q")
	return m.ReceiptHandle
}

// queueStates is every queue's attributes and counts, as ListQueue with
// meta shows them, and q's visible messages as a peek shows them (ids,
// bodies, priorities, dequeue counts, times), in one comparable string.
func queueStates(t *testing.T, c *client) string {
	t.Helper()
	r := c.do(req{method: "GET", target: "/queues", headers: map[string]string{"x-mns-with-meta": "true"}})
	if r.status != 200 {
		t.Fatalf("list: %s", r)
	}
	var qs xQueues
	decode(t, r, &qs)
	var ms xMessages
	if r := c.get("/queues/q/messages?peekonly=true&numOfMessages=16"); r.status == 200 {
		decode(t, r, &ms)
	} else if r.status != 404 {
		t.Fatalf("peek: %s", r)
	}
	return fmt.Sprintf("%+v %+v", qs.Queues, ms.Messages)
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
		var e xError
		decode(t, r, &e)
		if e.Code == "" || e.Message == "" || e.RequestId != r.header.Get("x-mns-request-id") || !strings.HasPrefix(e.HostId, "http://") {
			t.Fatalf("an error document lacks an element: %s", r)
		}
		return true
	}
	t.Fatalf("a refusal that is not an MNS error document: %s", r)
	return false
}
