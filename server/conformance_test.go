package server

// Conformance checks of spec §9.6 and where each is covered:
//
//	 1 signature vectors; both Content-MD5 forms; '+' in raw handles kept
//	   TestSignatureVectors, TestSignatureVectorOverTheWire, TestContentMD5Forms,
//	   TestDeleteMessage (raw and escaped old-style handles), TestParseQuery
//	 2 Create 201 → same 204 (Location) → different 409   TestCreateQueueStatusesAndLocation
//	 3 Priority 0 → 400; 17 entries → 400                  TestSendValidation, TestBatchSendMessage
//	 4 empty receive 404 at once; waitseconds=2 after ~2 s; woken by a send
//	                                                       TestLongPoll, TestPollingWaitSecondsDefault
//	 5 receive → delete 204 → again 404; garbage 400        TestDeleteMessage
//	 6 change visibility → new handle; old 404; new deletes TestChangeMessageVisibility
//	 7 visibility expiry: DequeueCount 2, FirstDequeueTime kept, old handle 404
//	                                                       TestVisibilityExpiry
//	 8 priority 1 before an earlier priority 16             TestPriorityOrder
//	 9 GetQueueAttributes has 12 elements; counters move    TestCreateQueueAttributesAndGet, TestQueueCounters
//	10 ListQueue paging, prefix, no NextMarker at the end   TestListQueuePaging
//	11 error bodies: namespace, four elements, text/xml     TestErrorDocumentBytes (and wantError everywhere)
//	12 @alicloud/mns body with '<' → 400 MalformedXML       TestAlicloudMNSUnescapedBody

import (
	"errors"
	"strings"
	"testing"

	"github.com/smqd/smqd/engine"
)

// @alicloud/mns interpolates bodies without escaping them: a '<' or '&'
// in the text arrives malformed and is answered MalformedXML, with nothing
// stored; the same text escaped is stored as the client meant it.
func TestAlicloudMNSUnescapedBody(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	c.ctype = "text/xml" // what @alicloud/mns sends
	c.xmnsDate = true    // it sends x-mns-date equal to Date
	c.mustCreate("q")
	for _, text := range []string{"if a < b", "Tom & Jerry", "<b>bold</b> & more"} {
		body := `<?xml version="1.0" encoding="UTF-8"?><Message xmlns="http://mns.aliyuncs.com/doc/v1/"><MessageBody>` + text + `</MessageBody></Message>`
		wantError(t, c.post("/queues/q/messages", body), 400, "MalformedXML")
	}
	var q xQueue
	decode(t, c.get("/queues/q"), &q)
	if q.ActiveMessages != 0 {
		t.Fatalf("a malformed send stored something: %+v", q)
	}
	m := c.mustSend("q", "if a &lt; b &amp;&amp; c", "")
	if m.MessageBodyMD5 != md5Upper("if a < b && c") {
		t.Fatalf("MD5 %s", m.MessageBodyMD5)
	}
	// Elements inside MessageBody (well-formed, but not text): InvalidArgument.
	wantError(t, c.post("/queues/q/messages", `<Message><MessageBody><b>x</b></MessageBody></Message>`), 400, "InvalidArgument")
}

// A closed broker answers 503 ServiceUnavailable (not in the MNS table;
// only while the daemon shuts down).
func TestBrokerClosed(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	c.mustCreate("q")
	env.broker.Close()
	wantError(t, c.get("/queues/q"), 503, "ServiceUnavailable")
	wantError(t, c.post("/queues/q/messages", sendBody("x", "")), 503, "ServiceUnavailable")
	wantError(t, c.get("/queues/q/messages?waitseconds=1"), 503, "ServiceUnavailable")
}

// Batch send partial failure (spec §3.6): 500, one entry per request entry
// in order, exactly {MessageId, MessageBodyMD5} or {ErrorCode, ErrorMessage}.
// The in-memory engine cannot fail an entry, so the encoder is tested with
// synthetic results.
func TestBatchSendPartialFailureShape(t *testing.T) {
	s := &Server{log: testLogger(t)}
	var id engine.MessageID
	id[15] = 1
	res := []engine.SendResult{
		{ID: id, MD5: [16]byte{0xAB}},
		{Err: errors.New("disk full")},
		{Err: &engine.ArgumentError{Field: "MessageBody", Msg: "must not be empty"}},
	}
	b, status := s.appendBatchSendResults(nil, res, "q")
	if status != 500 {
		t.Fatalf("status %d", status)
	}
	want := xmlDecl + `<Messages xmlns="http://mns.aliyuncs.com/doc/v1">` +
		`<Message><MessageId>00000000000000000000000000000001</MessageId><MessageBodyMD5>AB000000000000000000000000000000</MessageBodyMD5></Message>` +
		`<Message><ErrorCode>InternalError</ErrorCode><ErrorMessage>internal error</ErrorMessage></Message>` +
		`<Message><ErrorCode>InvalidArgument</ErrorCode><ErrorMessage>MessageBody must not be empty</ErrorMessage></Message>` +
		`</Messages>`
	if string(b) != want {
		t.Fatalf("got\n%s\nwant\n%s", b, want)
	}
	b, status = s.appendBatchSendResults(nil, res[:1], "q")
	if status != 201 || strings.Contains(string(b), "Error") {
		t.Fatalf("all stored: %d %s", status, b)
	}
}
