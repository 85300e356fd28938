package server

// The ReceiptHandle of a delayed send (spec §3.5): returned by a single
// SendMessage whose message starts Delayed (its own DelaySeconds or the
// queue's), accepted by DeleteMessage and ChangeMessageVisibility until the
// message becomes visible, single use like every handle.

import (
	"net/url"
	"testing"
	"time"
)

func TestDelayedSendReceiptHandle(t *testing.T) {
	env := startEnv(t, envConfig{fakeClock: true})
	c := env.client()
	c.mustCreate("q")

	// Not delayed: no handle, the spec's two elements.
	r := c.post("/queues/q/messages", sendBody("now", ""))
	wantStatus(t, r, 201)
	wantChildren(t, checkDocument(t, r, "Message"), "MessageId", "MessageBodyMD5")

	// Delayed: a third element, ReceiptHandle; delete works before the
	// message becomes visible, once.
	r = c.post("/queues/q/messages", sendBody("later", "<DelaySeconds>60</DelaySeconds>"))
	wantStatus(t, r, 201)
	wantChildren(t, checkDocument(t, r, "Message"), "MessageId", "MessageBodyMD5", "ReceiptHandle")
	var m xMessage
	decode(t, r, &m)
	if m.ReceiptHandle == "" {
		t.Fatal("no ReceiptHandle for a delayed send")
	}
	wantStatus(t, c.del("/queues/q/messages?ReceiptHandle="+url.QueryEscape(m.ReceiptHandle), ""), 204)
	wantError(t, c.del("/queues/q/messages?ReceiptHandle="+m.ReceiptHandle, ""), 404, "MessageNotExist")
	var q xQueue
	decode(t, c.get("/queues/q"), &q)
	if q.DelayMessages != 0 || q.ActiveMessages != 1 {
		t.Fatalf("after deleting the delayed message: %+v", q)
	}

	// Change visibility with it: a new handle, a new end of the delay; the
	// old handle is dead; the message is still Delayed until then.
	m = c.mustSend("q", "moved", "<DelaySeconds>60</DelaySeconds>")
	r = c.put("/queues/q/messages?ReceiptHandle="+m.ReceiptHandle+"&VisibilityTimeout=300", "")
	wantStatus(t, r, 200)
	var cv xChangeVisibility
	decode(t, r, &cv)
	if cv.ReceiptHandle == "" || cv.ReceiptHandle == m.ReceiptHandle || cv.NextVisibleTime != env.now().Add(300*time.Second).UnixMilli() {
		t.Fatalf("change visibility: %+v", cv)
	}
	wantError(t, c.put("/queues/q/messages?ReceiptHandle="+m.ReceiptHandle+"&VisibilityTimeout=10", ""), 404, "MessageNotExist")
	wantError(t, c.del("/queues/q/messages?ReceiptHandle="+m.ReceiptHandle, ""), 404, "MessageNotExist")
	decode(t, c.get("/queues/q"), &q)
	if q.DelayMessages != 1 {
		t.Fatalf("the changed message is not Delayed: %+v", q)
	}
	// At the original delay's end it is still hidden; at the new one it is
	// visible, and then the handle is dead.
	env.clock.Advance(61 * time.Second)
	got := c.mustReceive("q")
	if got.MessageBody != "now" {
		t.Fatalf("received %q before the new delay ended", got.MessageBody)
	}
	env.clock.Advance(240 * time.Second)
	got = c.mustReceive("q")
	if got.MessageBody != "moved" || got.DequeueCount != 1 {
		t.Fatalf("received %+v", got)
	}
	wantError(t, c.del("/queues/q/messages?ReceiptHandle="+cv.ReceiptHandle, ""), 404, "MessageNotExist")

	// The queue's DelaySeconds makes a send delayed too; once the delay
	// ended the handle no longer works.
	wantStatus(t, c.put("/queues/d", "<Queue><DelaySeconds>5</DelaySeconds></Queue>"), 201)
	m = c.mustSend("d", "queue delay", "")
	if m.ReceiptHandle == "" {
		t.Fatal("no ReceiptHandle for a send delayed by the queue")
	}
	env.clock.Advance(5 * time.Second)
	wantError(t, c.del("/queues/d/messages?ReceiptHandle="+m.ReceiptHandle, ""), 404, "MessageNotExist")
	if got := c.mustReceive("d"); got.MessageBody != "queue delay" {
		t.Fatalf("received %+v", got)
	}

	// Batch sends carry no handle (Python accepts exactly two elements per
	// entry, spec §3.6).
	r = c.post("/queues/q/messages", `<Messages><Message><MessageBody>a</MessageBody><DelaySeconds>30</DelaySeconds></Message></Messages>`)
	wantStatus(t, r, 201)
	doc := checkDocument(t, r, "Messages")
	wantChildren(t, doc.children[0], "MessageId", "MessageBodyMD5")
}
