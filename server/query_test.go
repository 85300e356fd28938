package server

import (
	"errors"
	"strings"
	"testing"

	"github.com/smqd/smqd/engine"
)

func TestSplitTarget(t *testing.T) {
	cases := []struct{ in, path, query string }{
		{"/queues/q/messages?numOfMessages=16&waitseconds=30", "/queues/q/messages", "numOfMessages=16&waitseconds=30"},
		{"/queues", "/queues", ""},
		{"http://acct.mns.cn-hangzhou.aliyuncs.com/queues/q?x=1", "/queues/q", "x=1"},
		{"HTTPS://127.0.0.1:8080/queues", "/queues", ""},
		{"http://host", "/", ""},
		{"http://host?x", "", "x"},
		{"//queues/q", "//queues/q", ""},
		{"/a?b?c", "/a", "b?c"},
		{"weird", "weird", ""},
		{"ht tp://x/y", "ht tp://x/y", ""},
	}
	for _, tc := range cases {
		p, q, _ := splitTarget([]byte(tc.in))
		if string(p) != tc.path || string(q) != tc.query {
			t.Errorf("%q → %q %q, want %q %q", tc.in, p, q, tc.path, tc.query)
		}
	}
}

func TestParseQuery(t *testing.T) {
	var q queryParams
	scratch, err := parseQuery([]byte("ReceiptHandle=1-ODU4+/OTk==&VisibilityTimeout=%2030%20&unknown=%41&&x"), &q, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(q.receiptHandle.val) != "1-ODU4+/OTk==" || string(q.visibilityTimeout.val) != " 30 " {
		t.Fatalf("%q %q", q.receiptHandle.val, q.visibilityTimeout.val)
	}
	if n, ok := parseDecimal(q.visibilityTimeout.val); !ok || n != 30 {
		t.Fatalf("decimal %d %v", n, ok)
	}
	// Go's escaped form decodes to the same handle; '+' stays '+'.
	_, err = parseQuery([]byte("receipthandle=1-ODU4%2B%2FOTk%3D%3D&visibilitytimeout=5"), &q, scratch)
	if err != nil || string(q.receiptHandle.val) != "1-ODU4+/OTk==" || string(q.visibilityTimeout.val) != "5" {
		t.Fatalf("%v %q", err, q.receiptHandle.val)
	}
	_, err = parseQuery([]byte("peekonly=TRUE&NumOfMessages=3&WAITSECONDS=1&MetaOverride=true"), &q, nil)
	if err != nil || !isTrue(q.peekOnly.val) || string(q.numOfMessages.val) != "3" || string(q.waitSeconds.val) != "1" || !isTrue(q.metaOverride.val) {
		t.Fatalf("%v %+v", err, q)
	}
	_, err = parseQuery([]byte("peekonly"), &q, nil)
	if err != nil || !q.peekOnly.present || isTrue(q.peekOnly.val) {
		t.Fatalf("bare name: %v %+v", err, q.peekOnly)
	}
	for _, bad := range []string{"ReceiptHandle=%", "ReceiptHandle=%4", "ReceiptHandle=%zz", "x=%g0", "numOfMessages=1&numofmessages=2"} {
		if _, err := parseQuery([]byte(bad), &q, nil); err == nil {
			t.Errorf("%q: no error", bad)
		} else if _, ok := err.(*queryError); !ok {
			t.Errorf("%q: %T", bad, err)
		}
	}
}

func TestParseDecimal(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "16": 16, " 7 ": 7, "-1": -1, "\t43200\n": 43200, "000000000000005": 5} {
		if n, ok := parseDecimal([]byte(in)); !ok || n != want {
			t.Errorf("%q → %d %v", in, n, ok)
		}
	}
	for _, in := range []string{"", " ", "-", "1.5", "1e3", "+1", "0x10", "1 2", "9999999999999999", "١"} {
		if _, ok := parseDecimal([]byte(in)); ok {
			t.Errorf("%q accepted", in)
		}
	}
}

func TestRoute(t *testing.T) {
	cases := []struct {
		method, path string
		op           op
		queue        string
	}{
		{"GET", "/queues", opListQueue, ""},
		{"GET", "/queues/", opListQueue, ""},
		{"PUT", "/queues/q", opCreateQueue, "q"},
		{"GET", "/queues/q", opGetQueueAttributes, "q"},
		{"DELETE", "/queues/q", opDeleteQueue, "q"},
		{"POST", "/queues/q/messages", opSendMessage, "q"},
		{"GET", "/queues/q/messages", opReceiveMessage, "q"},
		{"DELETE", "/queues/q/messages", opDeleteMessage, "q"},
		{"PUT", "/queues/q/messages", opChangeMessageVisibility, "q"},
		{"GET", "//queues/q/messages", opReceiveMessage, "q"},
		{"GET", "/healthz", opHealthz, ""},
		{"GET", "/metrics", opMetrics, ""},
		{"POST", "/queues/q/messages/", opSendMessage, "q"},
		{"get", "/queues", opUnknown, ""},
		{"POST", "/queues", opUnknown, ""},
		{"GET", "/queues//messages", opUnknown, ""},
		{"GET", "/queues/q/messages/1", opUnknown, ""},
		{"GET", "", opUnknown, ""},
		{"OPTIONS", "/queues/q", opUnknown, ""},
	}
	for _, tc := range cases {
		r := route([]byte(tc.method), []byte(tc.path))
		if r.op != tc.op || string(r.queue) != tc.queue {
			t.Errorf("%s %s → %v %q, want %v %q", tc.method, tc.path, r.op, r.queue, tc.op, tc.queue)
		}
	}
}

// decodeQueueName validates like engine.ValidateQueueName (it avoids the
// string conversion on the hot path, so the rule is written twice).
func TestQueueNameRuleAgreesWithEngine(t *testing.T) {
	names := []string{"", "a", "A", "0", "-", "-a", "a-", "a--b", "a_b", "a.b", "a b", "ä", "Z9-z", strings.Repeat("x", 256), strings.Repeat("x", 257)}
	for i := 0; i < 2000; i++ {
		n := make([]byte, i%7)
		for j := range n {
			n[j] = "aZ09-_.~%"[(i*7+j*13)%9]
		}
		names = append(names, string(n))
	}
	for _, n := range names {
		_, got := decodeQueueName(nil, []byte(strings.ReplaceAll(n, "%", "%25")))
		want := engine.ValidateQueueName(n)
		if !errors.Is(got, want) && !(got == nil && want == nil) {
			t.Errorf("%q: server %v, engine %v", n, got, want)
		}
	}
}
