package ctl

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
)

// queueWith creates name with cfg's changes to the default attributes.
func (d *daemon) queueWith(t *testing.T, name string, change func(*engine.QueueConfig)) *engine.Queue {
	t.Helper()
	cfg := engine.DefaultQueueConfig()
	if change != nil {
		change(&cfg)
	}
	if _, err := d.b.CreateQueue(name, cfg); err != nil {
		t.Fatal(err)
	}
	q, err := d.b.Queue(name)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func sendEntries(t *testing.T, q *engine.Queue, es ...engine.SendEntry) {
	t.Helper()
	res, err := q.Send(es, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
}

// all receives every visible message of q (and deletes none).
func all(t *testing.T, q *engine.Queue) []engine.Message {
	t.Helper()
	var out []engine.Message
	for {
		ms, err := q.Receive(context.Background(), engine.ReceiveOptions{Max: 16, HasWait: true}, nil)
		if errors.Is(err, engine.ErrMessageNotExist) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			return out
		}
		for _, m := range ms {
			m.Body = slices.Clone(m.Body)
			m.Properties = slices.Clone(m.Properties)
			for i := range m.Properties {
				p := &m.Properties[i]
				p.Name, p.Value = slices.Clone(p.Name), slices.Clone(p.Value)
			}
			out = append(out, m)
		}
	}
}

// deadLetter receives q's visible messages until each has moved to its
// dead-letter queue (MaxReceiveCount 1, VisibilityTimeout 1 s), bounded.
func deadLetter(t *testing.T, q *engine.Queue) {
	t.Helper()
	all(t, q)
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := q.Attributes()
		if err != nil {
			t.Fatal(err)
		}
		if info.Active+info.Inactive+info.Delayed == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: messages not dead-lettered: %+v", q.Name(), info)
		}
		time.Sleep(200 * time.Millisecond)
		all(t, q) // a receive of a message received once moves it
	}
}

func propsText(ps []engine.Property) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "%v:%s=%s(%d);", p.System, p.Name, p.Value, p.Type)
	}
	return b.String()
}

// TestQueueRedrive: messages dead-lettered from two queues go back each to
// its own, as they were sent (body bytes, priority, properties, less the
// DLQ ones); those that cannot go stay, visible again, and are named. One
// whose DLQSourceArn a sender set, naming a queue that does not dead-letter
// here, stays: the property chose where the operator's redrive wrote,
// whatever the sender's key could write (security audit, 2026-12-06).
func TestQueueRedrive(t *testing.T) {
	d := startDaemon(t)
	c := d.ctl(t)
	dead := d.queueWith(t, "dead", nil)
	policy := func(cfg *engine.QueueConfig) {
		cfg.DeadLetterQueue, cfg.MaxReceiveCount, cfg.VisibilityTimeout = "dead", 1, time.Second
	}
	orders, payments := d.queueWith(t, "orders", policy), d.queueWith(t, "payments", policy)
	other := d.queueWith(t, "other", nil)
	userProps := []engine.Property{
		{Name: []byte("k"), Value: []byte("v <&>"), Type: engine.PropString},
		{Name: []byte("n"), Value: []byte("42"), Type: engine.PropNumber},
		{Name: []byte("bin"), Value: []byte("AAEC/w=="), Type: engine.PropBinary},
		{Name: []byte("traceparent"), Value: []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"), Type: engine.PropString, System: true},
	}
	odd := []byte("a<b>&c\r\nd\rü ]]> end")
	sendEntries(t, orders, engine.SendEntry{Body: odd, Priority: 3, Properties: userProps})
	sendEntries(t, payments, engine.SendEntry{Body: []byte("pay"), Priority: 12})
	deadLetter(t, orders)
	deadLetter(t, payments)
	// Two that cannot go back by themselves: one sent there directly, one
	// naming a source queue that is gone.
	sendEntries(t, dead, engine.SendEntry{Body: []byte("direct")}, engine.SendEntry{Body: []byte("orphan"), Properties: []engine.Property{
		{Name: []byte("DLQMessageType"), Value: []byte("QUEUE"), Type: engine.PropString, System: true},
		{Name: []byte("DLQSourceArn"), Value: []byte(d.b.DeadLetterSourceArn("gone")), Type: engine.PropString, System: true},
	}}, engine.SendEntry{Body: []byte("forged"), Properties: []engine.Property{
		{Name: []byte("DLQMessageType"), Value: []byte("QUEUE"), Type: engine.PropString, System: true},
		{Name: []byte("DLQSourceArn"), Value: []byte(d.b.DeadLetterSourceArn("other")), Type: engine.PropString, System: true},
	}})
	if info := d.info(t, "dead"); info.Active != 5 {
		t.Fatalf("dead-letter queue before: %+v", info)
	}

	r := c.fail(ExitError, "queue", "redrive", "dead")
	if !strings.Contains(r.stdout, "moved 2 message(s) from dead: 1 to orders, 1 to payments") ||
		!strings.Contains(r.stdout, "no DLQSourceArn") || !strings.Contains(r.stdout, "QueueNotExist") ||
		!strings.Contains(r.stdout, "whose dead-letter queue is not dead") ||
		!strings.Contains(r.stderr, "3 message(s) left in dead") {
		t.Errorf("redrive:\nstdout: %s\nstderr: %s", r.stdout, r.stderr)
	}
	got := all(t, orders)
	if len(got) != 1 || string(got[0].Body) != string(odd) || got[0].Priority != 3 || got[0].DequeueCount != 1 ||
		propsText(got[0].Properties) != propsText(userProps) {
		t.Fatalf("orders after the redrive: %+v\nwant body %q, priority 3, properties %s", got, odd, propsText(userProps))
	}
	if got := all(t, payments); len(got) != 1 || string(got[0].Body) != "pay" || got[0].Priority != 12 || len(got[0].Properties) != 0 {
		t.Fatalf("payments after the redrive: %+v", got)
	}
	if got := all(t, other); len(got) != 0 {
		t.Fatalf("a sender's DLQSourceArn made the redrive write to a queue that dead-letters elsewhere: %q", got[0].Body)
	}
	// The three left are visible again within a second or so (not after the
	// queue's 30 s), and a run with --to moves them.
	deadline := time.Now().Add(10 * time.Second)
	for d.info(t, "dead").Active != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("messages left not visible again: %+v", d.info(t, "dead"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	res := decodeJSON[redriveResult](t, c.ok("queue", "redrive", "dead", "--to", "orders", "--json", "--rate", "1000"))
	if res.Moved != 3 || res.To["orders"] != 3 || len(res.Left) != 0 {
		t.Errorf("redrive --to: %+v", res)
	}
	if info := d.info(t, "dead"); info.Active+info.Inactive != 0 {
		t.Errorf("dead-letter queue after: %+v", info)
	}
	bodies := map[string]bool{}
	for _, m := range all(t, orders) {
		bodies[string(m.Body)] = true
	}
	if !bodies["direct"] || !bodies["orphan"] || !bodies["forged"] || len(bodies) != 3 {
		t.Errorf("orders after redrive --to: %v", bodies)
	}

	c.fail(ExitUsage, "queue", "redrive", "dead", "--to", "dead")
	c.fail(ExitUsage, "queue", "redrive")
	c.fail(ExitNotFound, "queue", "redrive", "missing")
}

// TestQueueRedriveKeepsWhatIsRefused: a message the target refuses (over
// its size limit) stays in the dead-letter queue, and does not hold back
// the others of its batch; --max bounds a run.
func TestQueueRedriveKeepsWhatIsRefused(t *testing.T) {
	d := startDaemon(t)
	c := d.ctl(t)
	dead := d.queueWith(t, "dead", nil)
	small := d.queueWith(t, "small", func(cfg *engine.QueueConfig) { cfg.MaxMessageBytes = 1024 })
	big := strings.Repeat("x", 2000)
	sendEntries(t, dead, engine.SendEntry{Body: []byte("one")}, engine.SendEntry{Body: []byte(big)}, engine.SendEntry{Body: []byte("two")})

	res := decodeJSON[redriveResult](t, c.fail(ExitError, "queue", "redrive", "dead", "--to", "small", "--json").stdout)
	if res.Moved != 2 || len(res.Left) != 1 || !strings.Contains(res.Left[0].Reason, "InvalidArgument") {
		t.Errorf("redrive: %+v", res)
	}
	if got := all(t, small); len(got) != 2 {
		t.Errorf("small holds %d messages, want 2", len(got))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ms := all(t, dead)
		if len(ms) == 1 && string(ms[0].Body) == big {
			break
		}
		if len(ms) != 0 || time.Now().After(deadline) {
			t.Fatalf("dead-letter queue holds %d messages, want the big one", len(ms))
		}
		time.Sleep(100 * time.Millisecond)
	}

	sendEntries(t, dead, engine.SendEntry{Body: []byte("a")}, engine.SendEntry{Body: []byte("b")}, engine.SendEntry{Body: []byte("c")})
	if res := decodeJSON[redriveResult](t, c.ok("queue", "redrive", "dead", "--to", "small", "--max", "2", "--json")); res.Moved != 2 {
		t.Errorf("redrive --max 2: %+v", res)
	}
}

// TestQueueRedriveChecksTheCopy: a copy stored with another body's MD5
// (a server or proxy that mangled it) leaves the original in place: the
// delete is never sent. A fake server, since smqd stores what it is sent.
func TestQueueRedriveChecksTheCopy(t *testing.T) {
	var deletes, releases atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == "GET" && r.URL.Path == "/queues/dead":
			fmt.Fprint(w, `<Queue><QueueName>dead</QueueName><ActiveMessages>1</ActiveMessages></Queue>`)
		case r.Method == "GET" && r.URL.Path == "/queues/dead/messages":
			fmt.Fprint(w, `<Messages><Message><MessageId>M1</MessageId><ReceiptHandle>H1</ReceiptHandle><MessageBody>hi</MessageBody>`+
				`<MessageBodyMD5>49F68A5C8493EC2C0BF489821C21FC3B</MessageBodyMD5><Priority>8</Priority></Message></Messages>`)
		case r.Method == "POST" && r.URL.Path == "/queues/to/messages":
			w.WriteHeader(201)
			fmt.Fprint(w, `<Messages><Message><MessageId>C1</MessageId><MessageBodyMD5>00000000000000000000000000000000</MessageBodyMD5></Message></Messages>`)
		case r.Method == "DELETE":
			deletes.Add(1)
			w.WriteHeader(204)
		case r.Method == "PUT" && r.URL.Query().Get("ReceiptHandle") == "H1":
			releases.Add(1)
			var v struct {
				XMLName         xml.Name `xml:"ChangeVisibility"`
				ReceiptHandle   string
				NextVisibleTime int64
			}
			v.ReceiptHandle = "H2"
			xml.NewEncoder(w).Encode(v)
		default:
			http.Error(w, r.Method+" "+r.URL.String(), 400)
		}
	}))
	defer srv.Close()
	c := ctlAt(t, srv.URL)
	r := c.fail(ExitError, "queue", "redrive", "dead", "--to", "to")
	if !strings.Contains(r.stdout, "body MD5 00000000000000000000000000000000, not 49F68A5C8493EC2C0BF489821C21FC3B") || !strings.Contains(r.stdout, "moved 0") {
		t.Errorf("redrive:\n%s\n%s", r.stdout, r.stderr)
	}
	if deletes.Load() != 0 || releases.Load() != 1 {
		t.Errorf("deletes %d (want 0), releases %d (want 1)", deletes.Load(), releases.Load())
	}
}

// TestQueueRedriveCopiedNotDeletedExits1: a copy is stored and the
// original's delete misses (its receive expired first). The run counts
// it as copied, not moved, and exits 1: the original is still in the
// dead-letter queue and the next run moves it again. It exited 0.
func TestQueueRedriveCopiedNotDeletedExits1(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch key := r.Method + " " + r.URL.Path; key {
		case "GET /queues/dead":
			fmt.Fprint(w, `<Queue><QueueName>dead</QueueName><ActiveMessages>1</ActiveMessages></Queue>`)
		case "GET /queues/dead/messages":
			fmt.Fprint(w, `<Messages><Message><MessageId>M1</MessageId><ReceiptHandle>H1</ReceiptHandle><MessageBody>hi</MessageBody>`+
				`<MessageBodyMD5>49F68A5C8493EC2C0BF489821C21FC3B</MessageBodyMD5><Priority>8</Priority></Message></Messages>`)
		case "POST /queues/to/messages":
			w.WriteHeader(201)
			fmt.Fprint(w, `<Messages><Message><MessageId>C1</MessageId><MessageBodyMD5>49F68A5C8493EC2C0BF489821C21FC3B</MessageBodyMD5></Message></Messages>`)
		case "DELETE /queues/dead/messages":
			w.WriteHeader(404)
			fmt.Fprint(w, `<Errors><Error><ErrorCode>MessageNotExist</ErrorCode><ErrorMessage>the receipt handle has expired</ErrorMessage>`+
				`<ReceiptHandle>H1</ReceiptHandle></Error></Errors>`)
		default:
			http.Error(w, key, 400)
		}
	}))
	defer srv.Close()
	c := ctlAt(t, srv.URL)
	r := c.fail(ExitError, "queue", "redrive", "dead", "--to", "to", "--json")
	res := decodeJSON[redriveResult](t, r.stdout)
	if res.Moved != 0 || res.Copied != 1 || len(res.Left) != 0 {
		t.Errorf("redrive: %+v", res)
	}
	if !strings.Contains(r.stderr, "1 message(s) copied whose original stays in dead") {
		t.Errorf("stderr: %s", r.stderr)
	}
}

// TestQueueRedriveRetriesA503: a receive, a send and a delete each
// answered 503 once (a shard electing its leader) are tried again, and
// the run moves the message.
func TestQueueRedriveRetriesA503(t *testing.T) {
	var mu sync.Mutex
	failed := map[string]bool{}
	var deletes atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Method + " " + r.URL.Path
		mu.Lock()
		first := !failed[key] && key != "GET /queues/dead"
		failed[key] = true
		mu.Unlock()
		if first {
			w.WriteHeader(503)
			fmt.Fprint(w, `<Error><Code>ServiceUnavailable</Code><Message>no leader</Message><RequestId>1</RequestId></Error>`)
			return
		}
		switch key {
		case "GET /queues/dead":
			fmt.Fprint(w, `<Queue><QueueName>dead</QueueName><ActiveMessages>1</ActiveMessages></Queue>`)
		case "GET /queues/dead/messages":
			fmt.Fprint(w, `<Messages><Message><MessageId>M1</MessageId><ReceiptHandle>H1</ReceiptHandle><MessageBody>hi</MessageBody>`+
				`<MessageBodyMD5>49F68A5C8493EC2C0BF489821C21FC3B</MessageBodyMD5><Priority>8</Priority></Message></Messages>`)
		case "POST /queues/to/messages":
			w.WriteHeader(201)
			fmt.Fprint(w, `<Messages><Message><MessageId>C1</MessageId><MessageBodyMD5>49F68A5C8493EC2C0BF489821C21FC3B</MessageBodyMD5></Message></Messages>`)
		case "DELETE /queues/dead/messages":
			deletes.Add(1)
			w.WriteHeader(204)
		default:
			http.Error(w, key, 400)
		}
	}))
	defer srv.Close()
	c := ctlAt(t, srv.URL)
	if res := decodeJSON[redriveResult](t, c.ok("queue", "redrive", "dead", "--to", "to", "--json")); res.Moved != 1 || deletes.Load() != 1 {
		t.Errorf("redrive: %+v, %d deletes", res, deletes.Load())
	}
}

// TestQueueRedriveSlowRate: a rate far below the dead-letter queue's
// visibility timeout moves every message once. Each batch used to be
// received whole and then held back by the rate past the timeout, so
// that its delete missed: every message copied and none deleted, and a
// second run copied them all again.
func TestQueueRedriveSlowRate(t *testing.T) {
	d := startDaemon(t)
	c := d.ctl(t)
	dead := d.queueWith(t, "slow-dead", func(cfg *engine.QueueConfig) { cfg.VisibilityTimeout = time.Second })
	back := d.queueWith(t, "slow-back", nil)
	for k := range 8 {
		sendEntries(t, dead, engine.SendEntry{Body: []byte(fmt.Sprint("m", k))})
	}
	res := decodeJSON[redriveResult](t, c.ok("queue", "redrive", "slow-dead", "--to", "slow-back", "--rate", "4", "--parallel", "2", "--json"))
	if res.Moved != 8 || res.Copied != 0 || len(res.Left) != 0 {
		t.Fatalf("redrive at 4 a second of a queue whose visibility timeout is 1 s: %+v", res)
	}
	if got := all(t, back); len(got) != 8 {
		t.Fatalf("%d copies, want 8", len(got))
	}
	if info := d.info(t, "slow-dead"); info.Active+info.Inactive != 0 {
		t.Fatalf("the dead-letter queue after: %+v", info)
	}
}

// TestQueueRedriveSlowCopyKeepsOriginalsInvisible: the copies' send
// outlasts the dead-letter queue's visibility timeout 2.5 times. The
// originals are kept invisible meanwhile (keep.go), so each delete finds
// its message (moved, not copied twice), and the one the target refused
// is made visible again with its latest receipt handle (the release).
// With the keeping disabled both deletes missed (Copied 2).
func TestQueueRedriveSlowCopyKeepsOriginalsInvisible(t *testing.T) {
	d := startDaemon(t)
	dead := d.queueWith(t, "dead", func(cfg *engine.QueueConfig) { cfg.VisibilityTimeout = time.Second })
	small := d.queueWith(t, "small", func(cfg *engine.QueueConfig) { cfg.MaxMessageBytes = 1024 })
	big := strings.Repeat("x", 2000)
	sendEntries(t, dead, engine.SendEntry{Body: []byte("one")}, engine.SendEntry{Body: []byte(big)}, engine.SendEntry{Body: []byte("two")})
	g := d.holdFirstSend(t)
	// In front of that gate, one that sees every change of visibility to
	// 1 s: the keeping's (the queue's timeout is 1 s) and the release's.
	released := (&daemon{addr: g.addr}).gateMatching(t, func(r *http.Request) bool {
		return r.Method == "PUT" && r.URL.Query().Get("VisibilityTimeout") == "1"
	}, func(int) (time.Duration, bool) { return 0, false })
	c := d.ctl(t)
	c.env["SMQ_ENDPOINT"] = "http://" + released.addr
	r := c.fail(ExitError, "queue", "redrive", "dead", "--to", "small", "--json")
	if got := released.answers(1); len(got) == 0 || slices.ContainsFunc(got, func(s int) bool { return s != 200 }) {
		t.Errorf("changes of visibility answered %v, want 200 each (the release with the latest receipt handle)", got)
	}
	res := decodeJSON[redriveResult](t, r.stdout)
	if res.Moved != 2 || res.Copied != 0 || len(res.Left) != 1 {
		t.Errorf("redrive: %+v\nstderr: %s", res, r.stderr)
	}
	if got := all(t, small); len(got) != 2 {
		t.Errorf("small holds %d messages, want 2", len(got))
	}
	waitVisible(t, dead)
	if ms := all(t, dead); len(ms) != 1 || string(ms[0].Body) != big {
		t.Errorf("dead holds %d messages, want the big one", len(ms))
	}
}
