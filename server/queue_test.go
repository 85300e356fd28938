package server

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Spec §9.6 check 2: Create 201 → same attrs 204 (with Location) → different 409.
func TestCreateQueueStatusesAndLocation(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	r := c.put("/queues/orders", "")
	wantStatus(t, r, 201)
	if got, want := r.header.Get("Location"), "http://"+env.addr+"/queues/orders"; got != want {
		t.Fatalf("Location %q, want %q", got, want)
	}
	if len(r.body) != 0 {
		t.Fatalf("create has a body: %s", r.body)
	}
	// Same attributes (absent ones are defaults): 204 with Location.
	r = c.put("/queues/orders", `<Queue xmlns="http://mns.aliyuncs.com/doc/v1/"><VisibilityTimeout>30</VisibilityTimeout></Queue>`)
	wantStatus(t, r, 204)
	if r.header.Get("Location") != "http://"+env.addr+"/queues/orders" {
		t.Fatalf("204 create without Location: %v", r.header)
	}
	r = c.put("/queues/orders", `<Queue><VisibilityTimeout>60</VisibilityTimeout></Queue>`)
	wantError(t, r, 409, "QueueAlreadyExist")
	// ali-mns sends <Queue/>.
	wantStatus(t, c.put("/queues/alimns", `<Queue/>`), 201)
}

func TestCreateQueueAttributesAndGet(t *testing.T) {
	env := startEnv(t, envConfig{fakeClock: true})
	c := env.client()
	body := `<?xml version="1.0" encoding="utf-8"?><Queue xmlns="http://mns.aliyuncs.com/doc/v1/">` +
		`<DelaySeconds>5</DelaySeconds><MaximumMessageSize>2048</MaximumMessageSize>` +
		`<MessageRetentionPeriod>600</MessageRetentionPeriod><VisibilityTimeout>60</VisibilityTimeout>` +
		`<PollingWaitSeconds>3</PollingWaitSeconds><LoggingEnabled>True</LoggingEnabled></Queue>`
	wantStatus(t, c.put("/queues/q1", body), 201)
	r := c.get("/queues/q1")
	wantStatus(t, r, 200)
	// Spec §3.3: all 12 elements, in order.
	order := []string{"QueueName", "CreateTime", "LastModifyTime", "DelaySeconds", "MaximumMessageSize",
		"MessageRetentionPeriod", "VisibilityTimeout", "PollingWaitSeconds", "ActiveMessages",
		"InactiveMessages", "DelayMessages", "LoggingEnabled"}
	checkOrder(t, string(r.body), order)
	if !strings.HasPrefix(string(r.body), `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+`<Queue xmlns="http://mns.aliyuncs.com/doc/v1">`) {
		t.Fatalf("root: %s", r.body)
	}
	var q xQueue
	decode(t, r, &q)
	want := xQueue{QueueName: "q1", CreateTime: env.now().Unix(), LastModifyTime: env.now().Unix(),
		DelaySeconds: 5, MaximumMessageSize: 2048, MessageRetentionPeriod: 600, VisibilityTimeout: 60,
		PollingWaitSeconds: 3, LoggingEnabled: "True"}
	if q != want {
		t.Fatalf("got %+v\nwant %+v", q, want)
	}
}

func checkOrder(t testing.TB, doc string, names []string) {
	t.Helper()
	pos := -1
	for _, n := range names {
		i := strings.Index(doc, "<"+n+">")
		if i < 0 {
			t.Fatalf("element %s missing: %s", n, doc)
		}
		if i < pos {
			t.Fatalf("element %s out of order: %s", n, doc)
		}
		pos = i
		if strings.Contains(doc, "<"+n+"></"+n+">") {
			t.Fatalf("element %s empty: %s", n, doc)
		}
	}
}

func TestSetQueueAttributes(t *testing.T) {
	env := startEnv(t, envConfig{fakeClock: true})
	c := env.client()
	c.mustCreate("q1")
	env.clock.Advance(10 * time.Second)
	// metaoverride in any case (the docs spell it metaOverride once).
	r := c.put("/queues/q1?metaOverride=true", `<Queue><VisibilityTimeout>90</VisibilityTimeout><PollingWaitSeconds>2</PollingWaitSeconds></Queue>`)
	wantStatus(t, r, 204)
	var q xQueue
	decode(t, c.get("/queues/q1"), &q)
	if q.VisibilityTimeout != 90 || q.PollingWaitSeconds != 2 || q.DelaySeconds != 0 || q.LastModifyTime != env.now().Unix() || q.CreateTime == q.LastModifyTime {
		t.Fatalf("after set: %+v", q)
	}
	// Out of range: 400 InvalidArgument, nothing changed (bad input changes nothing).
	r = c.put("/queues/q1?metaoverride=true", `<Queue><DelaySeconds>1</DelaySeconds><VisibilityTimeout>0</VisibilityTimeout></Queue>`)
	e := wantError(t, r, 400, "InvalidArgument")
	if !strings.Contains(e.Message, "VisibilityTimeout") || !strings.Contains(e.Message, "1 and 43200 seconds") {
		t.Fatalf("message %q does not name the element, bounds and unit", e.Message)
	}
	decode(t, c.get("/queues/q1"), &q)
	if q.DelaySeconds != 0 || q.VisibilityTimeout != 90 {
		t.Fatalf("failed set changed something: %+v", q)
	}
	wantError(t, c.put("/queues/nope?metaoverride=true", `<Queue/>`), 404, "QueueNotExist")
}

func TestQueueAttributeRanges(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	cases := []struct{ elem, val, want string }{
		{"DelaySeconds", "604801", "between 0 and 604800 seconds"},
		{"DelaySeconds", "-1", "between 0 and 604800 seconds"},
		{"MaximumMessageSize", "1023", "between 1024 and 65536 bytes"},
		{"MaximumMessageSize", "65537", "between 1024 and 65536 bytes"},
		{"MessageRetentionPeriod", "59", "between 60 and 604800 seconds"},
		{"MessageRetentionPeriod", "604801", "between 60 and 604800 seconds"},
		{"VisibilityTimeout", "0", "between 1 and 43200 seconds"},
		{"PollingWaitSeconds", "-1", "between 0 and 30 seconds"},
		{"LoggingEnabled", "1", "True or False"},
		{"VisibilityTimeout", "43201", "between 1 and 43200 seconds"},
		{"PollingWaitSeconds", "31", "between 0 and 30 seconds"},
		{"VisibilityTimeout", "abc", "integer"},
		{"LoggingEnabled", "yes", "True or False"},
	}
	for i, tc := range cases {
		name := fmt.Sprintf("r%d", i)
		r := c.put("/queues/"+name, "<Queue><"+tc.elem+">"+tc.val+"</"+tc.elem+"></Queue>")
		e := wantError(t, r, 400, "InvalidArgument")
		if !strings.Contains(e.Message, tc.elem) || !strings.Contains(e.Message, tc.want) {
			t.Errorf("%s=%s: message %q", tc.elem, tc.val, e.Message)
		}
		wantError(t, c.get("/queues/"+name), 404, "QueueNotExist")
	}
	// Whitespace around numbers is fine; booleans in any case.
	wantStatus(t, c.put("/queues/ws", "<Queue><DelaySeconds> 7 </DelaySeconds><LoggingEnabled>false</LoggingEnabled></Queue>"), 201)
	wantStatus(t, c.put("/queues/ws2", "<Queue><LoggingEnabled>TRUE</LoggingEnabled></Queue>"), 201)
	// Every bound itself is accepted.
	wantStatus(t, c.put("/queues/lo", "<Queue><DelaySeconds>0</DelaySeconds><MaximumMessageSize>1024</MaximumMessageSize><MessageRetentionPeriod>60</MessageRetentionPeriod><VisibilityTimeout>1</VisibilityTimeout><PollingWaitSeconds>0</PollingWaitSeconds></Queue>"), 201)
	wantStatus(t, c.put("/queues/hi", "<Queue><DelaySeconds>604800</DelaySeconds><MaximumMessageSize>65536</MaximumMessageSize><MessageRetentionPeriod>604800</MessageRetentionPeriod><VisibilityTimeout>43200</VisibilityTimeout><PollingWaitSeconds>30</PollingWaitSeconds></Queue>"), 201)
	// Wrong root: InvalidArgument.
	wantError(t, c.put("/queues/wr", "<Message/>"), 400, "InvalidArgument")
	wantError(t, c.put("/queues/wr", "<Queue>"), 400, "MalformedXML")
}

func TestDeleteQueue(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	c.mustCreate("q1")
	c.mustSend("q1", "x", "")
	wantStatus(t, c.del("/queues/q1", ""), 204)
	wantError(t, c.get("/queues/q1"), 404, "QueueNotExist")
	wantError(t, c.del("/queues/q1", ""), 404, "QueueNotExist")
	wantError(t, c.post("/queues/q1/messages", sendBody("x", "")), 404, "QueueNotExist")
	// Re-created under the same name: a new, empty queue (the server's
	// queue cache must not serve the old one).
	c.mustCreate("q1")
	wantError(t, c.get("/queues/q1/messages"), 404, "MessageNotExist")
	c.mustSend("q1", "y", "")
	if m := c.mustReceive("q1"); m.MessageBody != "y" {
		t.Fatalf("got %+v", m)
	}
}

func TestQueueNames(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	wantError(t, c.put("/queues/-bad", ""), 400, "InvalidQueueName")
	wantError(t, c.put("/queues/a_b", ""), 400, "InvalidQueueName")
	wantError(t, c.put("/queues/a%2Fb", ""), 400, "InvalidQueueName")
	wantError(t, c.get("/queues/a.b/messages"), 400, "InvalidQueueName")
	long := strings.Repeat("a", 257)
	wantError(t, c.put("/queues/"+long, ""), 400, "QueueNameLengthError")
	wantStatus(t, c.put("/queues/"+long[:256], ""), 201)
	wantStatus(t, c.put("/queues/9starts-with-digit", ""), 201)
}

// Spec §9.6 check 10: paging with x-mns-ret-number and NextMarker, prefix,
// no NextMarker on the last page.
func TestListQueuePaging(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	r := c.get("/queues")
	wantStatus(t, r, 200)
	if !strings.Contains(string(r.body), `<Queues xmlns="http://mns.aliyuncs.com/doc/v1"/>`) {
		t.Fatalf("empty list: %s", r.body)
	}
	for _, n := range []string{"b", "a2", "a1", "a3", "c"} {
		c.mustCreate(n)
	}
	list := func(h map[string]string) xQueues {
		t.Helper()
		r := c.do(req{method: "GET", target: "/queues", headers: h})
		wantStatus(t, r, 200)
		if strings.Contains(string(r.body), "<NextMarker></NextMarker>") {
			t.Fatalf("empty NextMarker: %s", r.body)
		}
		var q xQueues
		decode(t, r, &q)
		return q
	}
	var got []string
	marker := ""
	for page := 0; page < 10; page++ {
		h := map[string]string{"x-mns-ret-number": "2"}
		if marker != "" {
			h["x-mns-marker"] = marker
		}
		q := list(h)
		for _, e := range q.Queues {
			got = append(got, strings.TrimPrefix(e.QueueURL, "http://"+env.addr+"/queues/"))
		}
		if q.NextMarker == nil {
			break
		}
		marker = *q.NextMarker
	}
	if strings.Join(got, ",") != "a1,a2,a3,b,c" {
		t.Fatalf("paged: %v", got)
	}
	q := list(map[string]string{"x-mns-prefix": "a", "x-mns-ret-number": "3"})
	if len(q.Queues) != 3 || q.NextMarker != nil {
		t.Fatalf("prefix a, 3: %+v", q)
	}
	q = list(map[string]string{"x-mns-prefix": "b", "x-mns-with-meta": "true"})
	if len(q.Queues) != 1 || q.Queues[0].QueueName != "b" || q.Queues[0].VisibilityTimeout != 30 || q.Queues[0].MaximumMessageSize != 65536 {
		t.Fatalf("with meta: %+v", q)
	}
	for _, bad := range []string{"0", "1001", "x"} {
		r := c.do(req{method: "GET", target: "/queues", headers: map[string]string{"x-mns-ret-number": bad}})
		wantError(t, r, 400, "InvalidArgument")
	}
}
