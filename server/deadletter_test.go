package server

// Queue dead-letter policies over the wire: the flat extension elements of
// topic spec §3.8 (DeadLetterTargetQueue, MaxReceiveCount; or the OpenAPI
// DlqPolicy shape) on CreateQueue and SetQueueAttributes, echoed flat by
// GetQueueAttributes only when set; a message received too often moves to
// the target and carries the three DLQ system properties.

import (
	"slices"
	"strings"
	"testing"
	"time"
)

type xQueueDLQ struct {
	QueueName             string
	DeadLetterTargetQueue string
	MaxReceiveCount       int
}

func TestDeadLetterQueueAttributes(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	c.mustCreate("dlq")

	// Not set: exactly the 12 elements.
	c.mustCreate("plain")
	wantChildren(t, checkDocument(t, c.get("/queues/plain"), "Queue"), queueElems...)

	// Flat elements on create, echoed flat after the 12.
	wantStatus(t, c.put("/queues/src", `<Queue><VisibilityTimeout>10</VisibilityTimeout><DeadLetterTargetQueue>dlq</DeadLetterTargetQueue><MaxReceiveCount>3</MaxReceiveCount></Queue>`), 201)
	r := c.get("/queues/src")
	wantStatus(t, r, 200)
	withDLQ := append(queueElems[:len(queueElems):len(queueElems)], "DeadLetterTargetQueue", "MaxReceiveCount")
	wantChildren(t, checkDocument(t, r, "Queue"), withDLQ...)
	var q xQueueDLQ
	decode(t, r, &q)
	if q.DeadLetterTargetQueue != "dlq" || q.MaxReceiveCount != 3 {
		t.Fatalf("get: %+v", q)
	}
	// ListQueue with meta carries them too.
	r = c.do(req{method: "GET", target: "/queues", headers: map[string]string{"x-mns-with-meta": "true", "x-mns-prefix": "src"}})
	wantStatus(t, r, 200)
	doc := checkDocument(t, r, "Queues")
	wantChildren(t, doc.children[0], append([]string{"QueueURL"}, withDLQ...)...)

	// Same create again: 204; another policy: 409.
	wantStatus(t, c.put("/queues/src", `<Queue><VisibilityTimeout>10</VisibilityTimeout><DeadLetterTargetQueue>dlq</DeadLetterTargetQueue><MaxReceiveCount>3</MaxReceiveCount></Queue>`), 204)
	wantError(t, c.put("/queues/src", `<Queue><VisibilityTimeout>10</VisibilityTimeout><DeadLetterTargetQueue>dlq</DeadLetterTargetQueue><MaxReceiveCount>4</MaxReceiveCount></Queue>`), 409, "QueueAlreadyExist")

	// Set: the count alone; then the OpenAPI shape; then off.
	wantStatus(t, c.put("/queues/src?metaoverride=true", `<Queue><MaxReceiveCount>5</MaxReceiveCount></Queue>`), 204)
	decode(t, c.get("/queues/src"), &q)
	if q.DeadLetterTargetQueue != "dlq" || q.MaxReceiveCount != 5 {
		t.Fatalf("after setting the count: %+v", q)
	}
	c.mustCreate("dlq2")
	wantStatus(t, c.put("/queues/src?metaoverride=true", `<Queue><DlqPolicy><Enabled>True</Enabled><DeadLetterTargetQueue>dlq2</DeadLetterTargetQueue><MaxReceiveCount>7</MaxReceiveCount></DlqPolicy></Queue>`), 204)
	decode(t, c.get("/queues/src"), &q)
	if q.DeadLetterTargetQueue != "dlq2" || q.MaxReceiveCount != 7 {
		t.Fatalf("after DlqPolicy: %+v", q)
	}
	wantStatus(t, c.put("/queues/src?metaoverride=true", `<Queue><DlqPolicy><Enabled>False</Enabled></DlqPolicy></Queue>`), 204)
	wantChildren(t, checkDocument(t, c.get("/queues/src"), "Queue"), queueElems...)
	wantStatus(t, c.put("/queues/src?metaoverride=true", `<Queue><DeadLetterTargetQueue>dlq</DeadLetterTargetQueue><MaxReceiveCount>2</MaxReceiveCount></Queue>`), 204)
	wantStatus(t, c.put("/queues/src?metaoverride=true", `<Queue><DeadLetterTargetQueue></DeadLetterTargetQueue></Queue>`), 204)
	wantChildren(t, checkDocument(t, c.get("/queues/src"), "Queue"), queueElems...)
}

// Bad policies: 400 InvalidArgument, and nothing changes (a create makes no
// queue, a set leaves the attributes as they were).
func TestDeadLetterQueueErrors(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	c.mustCreate("dlq")
	wantStatus(t, c.put("/queues/src", `<Queue><DeadLetterTargetQueue>dlq</DeadLetterTargetQueue><MaxReceiveCount>3</MaxReceiveCount></Queue>`), 201)
	before := string(c.get("/queues/src").body)
	for _, bad := range []struct{ name, body string }{
		{"self", `<DeadLetterTargetQueue>%s</DeadLetterTargetQueue><MaxReceiveCount>3</MaxReceiveCount>`},
		{"missing target", `<DeadLetterTargetQueue>nope</DeadLetterTargetQueue><MaxReceiveCount>3</MaxReceiveCount>`},
		{"count 0", `<DeadLetterTargetQueue>dlq</DeadLetterTargetQueue><MaxReceiveCount>0</MaxReceiveCount>`},
		{"count 1001", `<DeadLetterTargetQueue>dlq</DeadLetterTargetQueue><MaxReceiveCount>1001</MaxReceiveCount>`},
		{"count not a number", `<DeadLetterTargetQueue>dlq</DeadLetterTargetQueue><MaxReceiveCount>x</MaxReceiveCount>`},
		{"bad target name", `<DeadLetterTargetQueue>a_b</DeadLetterTargetQueue><MaxReceiveCount>3</MaxReceiveCount>`},
		{"DlqPolicy self", `<DlqPolicy><Enabled>true</Enabled><DeadLetterTargetQueue>%s</DeadLetterTargetQueue><MaxReceiveCount>3</MaxReceiveCount></DlqPolicy>`},
		{"DlqPolicy bad Enabled", `<DlqPolicy><Enabled>maybe</Enabled><DeadLetterTargetQueue>dlq</DeadLetterTargetQueue></DlqPolicy>`},
	} {
		create := strings.ReplaceAll(bad.body, "%s", "new")
		wantError(t, c.put("/queues/new", "<Queue>"+create+"</Queue>"), 400, "InvalidArgument")
		wantError(t, c.get("/queues/new"), 404, "QueueNotExist")
		set := strings.ReplaceAll(bad.body, "%s", "src")
		wantError(t, c.put("/queues/src?metaoverride=true", "<Queue><VisibilityTimeout>99</VisibilityTimeout>"+set+"</Queue>"), 400, "InvalidArgument")
		after := string(c.get("/queues/src").body)
		if after != before {
			t.Fatalf("%s: a failed set changed the queue:\n%s\n%s", bad.name, before, after)
		}
	}
	// A count without a target (none set, none given).
	c.mustCreate("other")
	wantError(t, c.put("/queues/new", `<Queue><MaxReceiveCount>3</MaxReceiveCount></Queue>`), 400, "InvalidArgument")
	wantError(t, c.put("/queues/other?metaoverride=true", `<Queue><MaxReceiveCount>3</MaxReceiveCount></Queue>`), 400, "InvalidArgument")
}

// The move over the wire: the third receive of a message with
// MaxReceiveCount 2 finds the source empty, and the dead-letter queue
// serves the message with its properties and the three DLQ ones.
func TestDeadLetterMoveOverTheWire(t *testing.T) {
	env := startEnv(t, envConfig{fakeClock: true})
	c := env.client()
	c.mustCreate("dlq")
	wantStatus(t, c.put("/queues/src", `<Queue><VisibilityTimeout>10</VisibilityTimeout><DeadLetterTargetQueue>dlq</DeadLetterTargetQueue><MaxReceiveCount>2</MaxReceiveCount></Queue>`), 201)
	sent := c.mustSend("src", "poison", `<UserProperties><PropertyValue><Name>k</Name><Value>v</Value><Type>STRING</Type></PropertyValue></UserProperties>`)
	for i := 1; i <= 2; i++ {
		if m := c.mustReceive("src"); m.DequeueCount != i {
			t.Fatalf("receive %d: %+v", i, m)
		}
		env.clock.Advance(10 * time.Second)
	}
	wantError(t, c.get("/queues/src/messages"), 404, "MessageNotExist")
	r := c.get("/queues/dlq/messages")
	wantStatus(t, r, 200)
	wantChildren(t, checkDocument(t, r, "Message"), append(receivedElems[:len(receivedElems):len(receivedElems)], "UserProperties", "SystemProperties")...)
	checkDeadLettered(t, r, sent.MessageId, "src")
	var dq xQueue
	decode(t, c.get("/queues/dlq"), &dq)
	if dq.InactiveMessages != 1 {
		t.Fatalf("dlq counts %+v", dq)
	}
	m2 := scrape(t, c)
	if v := value(t, m2, "smqd_queue_dead_lettered_total", "queue", "src"); v != 1 {
		t.Fatalf("smqd_queue_dead_lettered_total{queue=src} = %v", v)
	}
	if v := value(t, m2, "smqd_queue_dead_lettered_total", "queue", "dlq"); v != 0 {
		t.Fatalf("smqd_queue_dead_lettered_total{queue=dlq} = %v", v)
	}
}

// checkDeadLettered checks a receive's answer: the message "poison" sent
// (as id) to queue src with the user property k=v, moved to its
// dead-letter queue: a new MessageId, the property kept, and the three DLQ
// system properties.
func checkDeadLettered(t *testing.T, r *response, id, src string) {
	t.Helper()
	var m xPropMessage
	decode(t, r, &m)
	if m.MessageBody != "poison" || m.MessageId == id {
		t.Fatalf("dead-lettered: %+v", m)
	}
	if len(m.UserProperties) != 1 || m.UserProperties[0] != (xProp{"k", "v", "STRING"}) {
		t.Fatalf("user properties %+v", m.UserProperties)
	}
	want := []xProp{
		{"DLQMessageType", "QUEUE", "STRING"},
		{"DLQSourceArn", "acs:mns:local:0:/queues/" + src, "STRING"},
		{"DLQOriginMessageId", id, "STRING"},
	}
	if !slices.Equal(m.SystemProperties, want) {
		t.Fatalf("system properties %+v, want %+v", m.SystemProperties, want)
	}
}
