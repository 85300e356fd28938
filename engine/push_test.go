package engine

// Tests of HTTP push delivery (push.go, push_queue.go). The receiver is a
// raw HTTP/1.1 server on 127.0.0.1 that keeps header names exactly as
// sent (spec §0.8) and verifies each push's signature the way the official
// receiver samples do (spec §3.6).

import (
	"bufio"
	"crypto"
	"crypto/md5"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// pushReq is one push as the receiver read it.
type pushReq struct {
	path    string
	headers map[string]string // names exactly as sent
	order   []string
	body    []byte
	at      time.Time // the broker clock when it arrived
}

// receiver is a minimal HTTP/1.1 server that answers every request with
// status (settable) and reports each request.
type receiver struct {
	ln     net.Listener
	mu     sync.Mutex
	status int
	hang   bool // never answer (until the connection closes)
	got    chan pushReq
	clk    *FakeClock
}

func newReceiver(t *testing.T, clk *FakeClock) *receiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &receiver{ln: ln, status: 204, got: make(chan pushReq, 1000), clk: clk}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go r.serve(c)
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return r
}

func (r *receiver) url(path string) string { return "http://" + r.ln.Addr().String() + path }

func (r *receiver) setStatus(code int) {
	r.mu.Lock()
	r.status = code
	r.mu.Unlock()
}

func (r *receiver) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		parts := strings.Fields(line)
		if len(parts) != 3 {
			return
		}
		req := pushReq{path: parts[1], headers: map[string]string{}}
		for {
			h, err := br.ReadString('\n')
			if err != nil {
				return
			}
			h = strings.TrimRight(h, "\r\n")
			if h == "" {
				break
			}
			name, val, _ := strings.Cut(h, ":")
			req.headers[name] = strings.TrimSpace(val)
			req.order = append(req.order, name)
		}
		n, _ := strconv.Atoi(req.headers["Content-Length"])
		req.body = make([]byte, n)
		if _, err := io.ReadFull(br, req.body); err != nil {
			return
		}
		if r.clk != nil {
			req.at = r.clk.Now()
		}
		r.mu.Lock()
		status, hang := r.status, r.hang
		r.mu.Unlock()
		r.got <- req
		if hang {
			_, _ = io.Copy(io.Discard, br) // until the client gives up
			return
		}
		fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Length: 0\r\n\r\n", status, http.StatusText(status))
	}
}

func (r *receiver) next(t *testing.T) pushReq {
	t.Helper()
	select {
	case req := <-r.got:
		return req
	case <-time.After(30 * time.Second):
		t.Fatal("no push arrived within 30 s")
	}
	return pushReq{}
}

// verifyPush rebuilds the string to sign from the headers as received and
// checks the signature with key (spec §3.6).
func verifyPush(t *testing.T, req pushReq, key *rsa.PublicKey, certURL string) {
	t.Helper()
	h := req.headers
	u, err := base64.StdEncoding.DecodeString(h["x-mns-signing-cert-url"])
	if err != nil || string(u) != certURL {
		t.Fatalf("x-mns-signing-cert-url %q: %q %v", h["x-mns-signing-cert-url"], u, err)
	}
	var mns []string
	for name := range h {
		if strings.HasPrefix(name, "x-mns-") {
			mns = append(mns, name)
		}
	}
	sort.Strings(mns)
	var sb strings.Builder
	sb.WriteString("POST\n" + h["Content-md5"] + "\n" + h["Content-Type"] + "\n" + h["Date"] + "\n")
	for _, n := range mns {
		sb.WriteString(n + ":" + h[n] + "\n")
	}
	sb.WriteString(req.path)
	sig, err := base64.StdEncoding.DecodeString(h["Authorization"])
	if err != nil {
		t.Fatalf("Authorization %q: %v", h["Authorization"], err)
	}
	d := sha1.Sum([]byte(sb.String()))
	if err := rsa.VerifyPKCS1v15(key, crypto.SHA1, d[:], sig); err != nil {
		t.Fatalf("signature does not verify: %v\nstring to sign:\n%s", err, sb.String())
	}
}

var testPushKey = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
})

const testCertURL = "http://127.0.0.1:1/x509_public_certificate-test.pem"

// attempts returns a channel told after every settled push attempt.
func attempts(b *Broker) chan struct{} {
	ch := make(chan struct{}, 1000)
	b.pusher.onAttempt = func() { ch <- struct{}{} }
	return ch
}

func waitAttempt(t *testing.T, ch chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatal("no push attempt settled within 30 s")
	}
}

// pushedMessage returns the one message of a subscription's push queue:
// its next visible time and dequeue count.
func pushedMessage(t *testing.T, b *Broker, subID uint64) (visible int64, found bool) {
	t.Helper()
	q := b.internalQueue(pushQueueName(subID))
	if q == nil {
		t.Fatalf("no push queue for subscription %d", subID)
	}
	for i := range q.stripes {
		st := &q.stripes[i]
		st.mu.Lock()
		for j := uint32(0); st.slab.valid(j); j++ {
			if s := st.slab.at(j); s.state() == stInactive || s.state() == stActive || s.state() == stDelayed {
				visible, found = s.visibleMs(), true
			}
		}
		st.mu.Unlock()
	}
	return visible, found
}

func subID(t *testing.T, b *Broker, topic, sub string) uint64 {
	t.Helper()
	tp, err := b.topicByName(topic)
	if err != nil {
		t.Fatal(err)
	}
	s, err := b.subByName(tp, sub)
	if err != nil {
		t.Fatal(err)
	}
	return s.id
}

// failRetries lets a failing receiver take a BACKOFF_RETRY
// subscription's first attempt and its retries, moving the clock to each
// retry: the next attempt is the last.
func failRetries(t *testing.T, b *Broker, clk *FakeClock, rcv *receiver, done chan struct{}, id uint64) {
	t.Helper()
	for i := 1; i <= backoffRetries; i++ {
		rcv.next(t)
		waitAttempt(t, done)
		vis, _ := pushedMessage(t, b, id)
		clk.Set(time.UnixMilli(vis))
	}
}

// openPushDurable opens a durable broker in dir with pushOptions (mod
// changes them), its pusher disabled or not.
func openPushDurable(t *testing.T, dir string, clk *FakeClock, stripes int, disabled bool, mod func(*PushOptions)) *Broker {
	t.Helper()
	o := Options{Dir: dir, Clock: clk, Stripes: stripes, Logger: testLogger(t), Push: pushOptions()}
	o.Push.Disabled = disabled
	if mod != nil {
		mod(&o.Push)
	}
	b, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func pushOptions() PushOptions {
	return PushOptions{Signer: testPushKey(), CertURL: testCertURL, Concurrency: 2}
}

func TestPushDelivers(t *testing.T) {
	b, clk := openTest(t, Options{Push: pushOptions()})
	rcv := newReceiver(t, clk)
	if _, err := b.CreateTopic("orders", DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		f    NotifyContentFormat
		path string
	}{{"simple", FormatSimplified, "/"}, {"xml", FormatXML, "/hook?x=1"}, {"json", FormatJSON, ""}} {
		if _, err := b.Subscribe("orders", c.name, SubscriptionConfig{Endpoint: rcv.url(c.path), Format: c.f, FilterTag: ""}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := b.Publish("orders", PublishInput{Body: []byte("hello <topic> & co"), Tag: "important", Owner: "1234"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Pushes != 3 || res.Delivered != 0 {
		t.Fatalf("publish result %+v", res)
	}
	got := map[string]pushReq{}
	for range 3 {
		req := rcv.next(t)
		got[req.headers["Content-Type"]] = req
		verifyPush(t, req, &testPushKey().PublicKey, testCertURL)
	}
	id := res.ID.String()
	simple := got["text/plain;charset=utf-8"]
	if simple.path != "/notifications" || string(simple.body) != "hello <topic> & co" {
		t.Fatalf("simplified push: %s %q", simple.path, simple.body)
	}
	for name, want := range map[string]string{
		"x-mns-message-id": id, "x-mns-message-tag": "important", "x-mns-topic-name": "orders", "x-mns-subscription-name": "simple",
		"x-mns-topic-owner": "1234", "x-mns-subscriber": "1234", "x-mns-version": "2015-06-06",
		"x-mns-publish-time": strconv.FormatInt(t0.UnixMilli(), 10), "User-Agent": "Aliyun Notification Service Agent",
		"Content-md5": MD5String([]byte("hello <topic> & co")), "Date": t0.UTC().Format(http.TimeFormat),
	} {
		if simple.headers[name] != want {
			t.Errorf("simplified push header %s = %q, want %q (headers %v)", name, simple.headers[name], want, simple.order)
		}
	}
	xml := got["text/xml;charset=utf-8"]
	wantXML := `<?xml version="1.0" encoding="utf-8"?><Notification xmlns="http://mns.aliyuncs.com/doc/v1/"><TopicOwner>1234</TopicOwner><TopicName>orders</TopicName>` +
		`<Subscriber>1234</Subscriber><SubscriptionName>xml</SubscriptionName><MessageId>` + id + `</MessageId><Message>hello &lt;topic&gt; &amp; co</Message>` +
		`<MessageMD5>` + MD5String([]byte("hello <topic> & co")) + `</MessageMD5><MessageTag>important</MessageTag><PublishTime>` + strconv.FormatInt(t0.UnixMilli(), 10) + `</PublishTime></Notification>`
	if xml.path != "/hook?x=1" || string(xml.body) != wantXML {
		t.Fatalf("xml push to %s:\n%s\nwant\n%s", xml.path, xml.body, wantXML)
	}
	if _, ok := xml.headers["x-mns-message-id"]; ok {
		t.Error("XML push carries x-mns-message-id (SIMPLIFIED only)")
	}
	js := got["application/json;charset=utf-8"]
	if js.path != "/notifications" || !strings.HasPrefix(string(js.body), `{"TopicOwner":"1234","TopicName":"orders","Subscriber":"1234","SubscriptionName":"json","MessageId":"`+id) {
		t.Fatalf("json push to %s: %s", js.path, js.body)
	}
	for name := range simple.headers {
		if strings.HasPrefix(strings.ToLower(name), "x-mns-") && name != strings.ToLower(name) {
			t.Errorf("header %q is not lower case (spec §0.8)", name)
		}
	}
	// Every push settled: nothing is left in the push queues.
	for b.PushStats().Delivered < 3 || b.PushStats().Backlog != 0 {
		time.Sleep(time.Millisecond)
	}
	if st := b.PushStats(); st.Failed != 0 || st.Subscriptions != 3 {
		t.Fatalf("push stats %+v", st)
	}
	// Push queues are not visible as queues.
	if names, _, _ := b.ListQueues("", "", 0); len(names) != 0 {
		t.Fatalf("ListQueues shows %v", names)
	}
	if _, err := b.Queue(pushQueueName(subID(t, b, "orders", "xml"))); !errors.Is(err, ErrQueueNotExist) {
		t.Fatalf("a push queue is addressable: %v", err)
	}
}

// MD5String is the upper-case hex MD5 of b.
func MD5String(b []byte) string { return string(MD5Hex(nil, md5.Sum(b))) }

// TestPushRetrySchedule drives a failing endpoint through the schedules
// of spec §3.3 on the fake clock: each retry is due exactly (exponential)
// or within 10-20 s (backoff) after the attempt before it.
func TestPushRetrySchedule(t *testing.T) {
	for _, c := range []struct {
		strategy NotifyStrategy
		retries  int
	}{{ExponentialDecayRetry, 12}, {BackoffRetry, 3}} {
		t.Run(c.strategy.String(), func(t *testing.T) {
			b, clk := openTest(t, Options{Push: pushOptions()})
			done := attempts(b)
			rcv := newReceiver(t, clk)
			rcv.setStatus(500)
			if _, err := b.CreateTopic("t", DefaultTopicConfig()); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Subscribe("t", "s", SubscriptionConfig{Endpoint: rcv.url("/"), Strategy: c.strategy}); err != nil {
				t.Fatal(err)
			}
			id := subID(t, b, "t", "s")
			if _, err := b.Publish("t", PublishInput{Body: []byte("x")}); err != nil {
				t.Fatal(err)
			}
			for i := 1; i <= c.retries; i++ {
				req := rcv.next(t)
				waitAttempt(t, done)
				vis, ok := pushedMessage(t, b, id)
				if !ok {
					t.Fatalf("attempt %d: the notification left its push queue", i)
				}
				now := clk.Now()
				if !req.at.Equal(now) {
					t.Fatalf("attempt %d arrived at %v, the clock says %v", i, req.at, now)
				}
				delay := time.Duration(vis-now.UnixMilli()) * time.Millisecond
				switch c.strategy {
				case ExponentialDecayRetry:
					want := time.Duration(1<<min(i-1, 9)) * time.Second
					if delay != want {
						t.Fatalf("exponential: retry %d after %v, want %v", i, delay, want)
					}
				case BackoffRetry:
					if delay < 10*time.Second || delay > 20*time.Second {
						t.Fatalf("backoff: retry %d after %v, want 10-20 s", i, delay)
					}
				}
				clk.Advance(delay)
			}
			if c.strategy == BackoffRetry {
				// The fourth attempt is the last: discarded (no dead-letter queue).
				rcv.next(t)
				waitAttempt(t, done)
				if _, ok := pushedMessage(t, b, id); ok {
					t.Fatal("after the last retry the notification is still queued")
				}
				if st := b.PushStats(); st.Discarded != 1 || st.Failed != 4 {
					t.Fatalf("push stats %+v", st)
				}
			}
		})
	}
}

func TestRetryDelayTable(t *testing.T) {
	total := time.Duration(0)
	for i := 1; ; i++ {
		d, ok := retryDelay(ExponentialDecayRetry, i, func() float64 { return 0 })
		if !ok {
			if i != 177 {
				t.Fatalf("exponential: %d retries, want 176", i-1)
			}
			break
		}
		total += d
	}
	if total != 86015*time.Second {
		t.Fatalf("exponential total %v, want 86015 s (spec §3.3)", total)
	}
	for i, r := range []float64{0, 0.5, 0.999} {
		d, ok := retryDelay(BackoffRetry, i+1, func() float64 { return r })
		if !ok || d < 10*time.Second || d >= 20*time.Second {
			t.Fatalf("backoff retry %d: %v %v", i+1, d, ok)
		}
	}
	if _, ok := retryDelay(BackoffRetry, 4, func() float64 { return 0 }); ok {
		t.Fatal("backoff: a fourth retry")
	}
}

// TestPushDeadLetter: a notification whose retries are exhausted moves to
// the subscription's dead-letter queue with the DLQ properties of spec
// §3.8 and the publish's own properties, and leaves its push queue.
func TestPushDeadLetter(t *testing.T) {
	b, clk := openTest(t, Options{Push: pushOptions()})
	done := attempts(b)
	rcv := newReceiver(t, clk)
	rcv.setStatus(503)
	dlq := mustQueue(t, b, "dead", DefaultQueueConfig())
	if _, err := b.CreateTopic("t", DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Subscribe("t", "s", SubscriptionConfig{Endpoint: rcv.url("/"), DeadLetterQueue: "nope"}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("missing dead-letter queue: %v", err)
	}
	if _, err := b.Subscribe("t", "s", SubscriptionConfig{Endpoint: rcv.url("/"), Format: FormatJSON, DeadLetterQueue: "dead"}); err != nil {
		t.Fatal(err)
	}
	id := subID(t, b, "t", "s")
	props := []Property{{Name: []byte("k"), Value: []byte("v"), Type: PropString}}
	res, err := b.Publish("t", PublishInput{Body: []byte("payload"), Owner: "9", Properties: props})
	if err != nil {
		t.Fatal(err)
	}
	failRetries(t, b, clk, rcv, done, id)
	rcv.next(t)
	waitAttempt(t, done)
	if _, ok := pushedMessage(t, b, id); ok {
		t.Fatal("the exhausted notification is still in its push queue")
	}
	msgs := receiveAll(t, dlq)
	if len(msgs) != 1 {
		t.Fatalf("dead-letter queue holds %d messages", len(msgs))
	}
	m := msgs[0]
	if !strings.HasPrefix(string(m.Body), `{"TopicOwner":"9","TopicName":"t","Subscriber":"9","SubscriptionName":"s","MessageId":"`+res.ID.String()) {
		t.Fatalf("dead-lettered body %s", m.Body)
	}
	if m.MD5 != md5.Sum(m.Body) {
		t.Fatal("dead-lettered MD5 is not its body's")
	}
	want := map[string]string{"k": "v", SysDLQMessageType: "TOPIC", SysDLQSourceArn: b.SubscriptionArn("t", "s"), SysDLQOriginMessageID: res.ID.String()}
	if len(m.Properties) != len(want) {
		t.Fatalf("properties %v", m.Properties)
	}
	for _, p := range m.Properties {
		if want[string(p.Name)] != string(p.Value) {
			t.Fatalf("property %s = %q, want %q", p.Name, p.Value, want[string(p.Name)])
		}
	}
	if st := b.PushStats(); st.DeadLettered != 1 || st.Discarded != 0 || st.Backlog != 0 {
		t.Fatalf("push stats %+v", st)
	}
}

// TestPushAllowList: endpoints outside the allow list are refused at
// Subscribe, and a restored subscription whose address the operator no
// longer allows is refused at connect time (invariant 2).
func TestPushAllowList(t *testing.T) {
	dir := t.TempDir()
	clk := NewFakeClock(t0)
	o := Options{Dir: dir, Clock: clk, Logger: testLogger(t), Push: pushOptions()}
	b, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	rcv := newReceiver(t, clk)
	if _, err := b.CreateTopic("t", DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	for _, ep := range []string{"http://10.1.2.3/x", "http://[fe80::1]:80/", "https://metadata.internal/", "http://127.0.0.1.nip.io/"} {
		if _, err := b.Subscribe("t", "s", SubscriptionConfig{Endpoint: ep}); !errors.Is(err, ErrEndpointInvalid) {
			t.Fatalf("subscribe %s: %v, want EndpointInvalid", ep, err)
		}
	}
	if _, err := b.Subscribe("t", "s", SubscriptionConfig{Endpoint: rcv.url("/")}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Subscribe("t", "local", SubscriptionConfig{Endpoint: "http://localhost:1/"}); err != nil {
		t.Fatalf("localhost with loopback allowed: %v", err)
	}
	if err := b.Unsubscribe("t", "local"); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	// Reopened with loopback no longer allowed: the push is refused at
	// connect time, and the receiver never hears of it.
	o.Push.Allow = []string{"10.0.0.0/8"}
	b, err = Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	done := attempts(b)
	if _, err := b.Publish("t", PublishInput{Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	waitAttempt(t, done)
	if st := b.PushStats(); st.Failed != 1 || st.Delivered != 0 {
		t.Fatalf("push stats %+v", st)
	}
	select {
	case req := <-rcv.got:
		t.Fatalf("a push reached a refused address: %v", req.path)
	default:
	}
}

// TestPushCrash: an acknowledged publish is pushed after a crash, whether
// the crash came before its first attempt or during it (at least once).
func TestPushCrash(t *testing.T) {
	dir := t.TempDir()
	clk := NewFakeClock(t0)
	rcv := newReceiver(t, clk)
	open := func(disabled bool) *Broker { return openPushDurable(t, dir, clk, 2, disabled, nil) }
	b := open(true)
	if _, err := b.CreateTopic("t", DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Subscribe("t", "s", SubscriptionConfig{Endpoint: rcv.url("/"), Format: FormatSimplified}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Publish("t", PublishInput{Body: []byte("before the crash")}); err != nil {
		t.Fatal(err)
	}
	crashBroker(b)

	// Restarted: pushed. The receiver hangs, and the broker crashes
	// during the attempt.
	rcv.mu.Lock()
	rcv.hang = true
	rcv.mu.Unlock()
	b = open(false)
	if req := rcv.next(t); string(req.body) != "before the crash" {
		t.Fatalf("pushed %q", req.body)
	}
	crashBroker(b)

	rcv.mu.Lock()
	rcv.hang = false
	rcv.mu.Unlock()
	b = open(false)
	defer b.Close()
	clk.Advance(pushLease) // the interrupted attempt's lease ends
	if req := rcv.next(t); string(req.body) != "before the crash" {
		t.Fatalf("pushed %q", req.body)
	}
	for b.PushStats().Backlog != 0 {
		time.Sleep(time.Millisecond)
	}
}

// TestPushQueuesFollowSubscriptions: push queues exist exactly while their
// subscriptions do, also across a crash between the two records
// (push_queue.go invariant 2).
func TestPushQueuesFollowSubscriptions(t *testing.T) {
	dir := t.TempDir()
	clk := NewFakeClock(t0)
	b := openPubDurable(t, dir, clk)
	if _, err := b.CreateTopic("t", DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"a", "b", "c"} {
		if _, err := b.Subscribe("t", s, SubscriptionConfig{Endpoint: "http://127.0.0.1:1/" + s}); err != nil {
			t.Fatal(err)
		}
	}
	idA, idB, idC := subID(t, b, "t", "a"), subID(t, b, "t", "b"), subID(t, b, "t", "c")
	if err := b.Unsubscribe("t", "a"); err != nil {
		t.Fatal(err)
	}
	// A crash between the records: b's subscription is gone but its push
	// queue's delete was never logged; c's push queue is gone but not its
	// subscription.
	b.adminMu.Lock()
	if err := b.logQueueRecord(recUnsubscribe, encodeID(idB)); err != nil {
		t.Fatal(err)
	}
	if err := b.deletePushQueueLocked(idC); err != nil {
		t.Fatal(err)
	}
	b.adminMu.Unlock()
	crashBroker(b)

	b = openPubDurable(t, dir, clk)
	defer b.Close()
	if q := b.internalQueue(pushQueueName(idA)); q != nil {
		t.Fatal("an unsubscribed subscription's push queue survived")
	}
	if q := b.internalQueue(pushQueueName(idB)); q != nil {
		t.Fatal("an orphan push queue survived the restart")
	}
	if q := b.internalQueue(pushQueueName(idC)); q == nil {
		t.Fatal("a subscription's lost push queue was not restored")
	}
	if err := b.DeleteTopic("t"); err != nil {
		t.Fatal(err)
	}
	if q := b.internalQueue(pushQueueName(idC)); q != nil {
		t.Fatal("DeleteTopic left a push queue")
	}
}

// TestPushTagAsSent: a SIMPLIFIED push's x-mns-message-tag is signed as
// it is sent. HTTP trims a header value's surrounding blanks, so a tag
// with blanks around it was pushed trimmed but signed whole, and every
// receiver that checks signatures refused it.
func TestPushTagAsSent(t *testing.T) {
	b, clk := openTest(t, Options{Push: pushOptions()})
	rcv := newReceiver(t, clk)
	if _, err := b.CreateTopic("t", DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Subscribe("t", "s", SubscriptionConfig{Endpoint: rcv.url("/"), Format: FormatSimplified}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Publish("t", PublishInput{Body: []byte("x"), Tag: " sp "}); err != nil {
		t.Fatal(err)
	}
	req := rcv.next(t)
	if got := req.headers["x-mns-message-tag"]; got != "sp" {
		t.Errorf("x-mns-message-tag %q, want the tag as HTTP sends it, %q", got, "sp")
	}
	verifyPush(t, req, &testPushKey().PublicKey, testCertURL)
}

// Unsubscribe and DeleteTopic count the notifications still waiting for
// their endpoint as discarded (and log them). They were dropped with
// their push queue without a trace: not dead-lettered, and Discarded
// stayed 0 (embedding audit 2, 2026-12-06).
func TestPushUnsubscribeCountsWhatItDiscards(t *testing.T) {
	for _, drop := range []string{"unsubscribe", "delete topic"} {
		t.Run(drop, func(t *testing.T) {
			b, _ := openTest(t, Options{Push: PushOptions{Timeout: time.Second}})
			done := attempts(b)
			failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) }))
			defer failing.Close()
			pushTopic(t, b, "t", failing.URL+"/")
			publishTimes(t, b, "t", 3)
			for range 3 {
				waitAttempt(t, done) // each failed once: the rest of their retries wait
			}
			var err error
			if drop == "unsubscribe" {
				err = b.Unsubscribe("t", "s")
			} else {
				err = b.DeleteTopic("t")
			}
			if err != nil {
				t.Fatal(err)
			}
			if st := b.PushStats(); st.Discarded != 3 || st.Backlog != 0 {
				t.Fatalf("after the %s: %+v, want 3 discarded", drop, st)
			}
		})
	}
}

// TestPushPauseAfterSlowFailures: a worker whose attempts fail slowly
// pauses for the push timeout, doubling with each slow failure since the
// last delivery, at most a minute (push_pause.go); a delivery starts the
// doubling again. Nothing pinned the schedule the architecture describes.
func TestPushPauseAfterSlowFailures(t *testing.T) {
	ps := &pushSub{p: &pusher{opts: PushOptions{Timeout: 5 * time.Second}}}
	for i, want := range []time.Duration{5, 10, 20, 40, 60, 60, 60, 60, 60, 60} {
		if got := ps.pauseAfterSlowFailure(); got != want*time.Second {
			t.Fatalf("slow failure %d: paused %v, want %v", i+1, got, want*time.Second)
		}
	}
	ps.slow.Store(0) // a delivery (push.go work)
	if got := ps.pauseAfterSlowFailure(); got != 5*time.Second {
		t.Fatalf("the first slow failure after a delivery: paused %v, want 5s", got)
	}
}
