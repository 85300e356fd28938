package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
)

// Unknown paths and methods: 400 InvalidRequestURL error XML, never a
// redirect, also for paths a router would "clean".
func TestUnknownPathsAndMethods(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	c.mustCreate("q")
	for _, tc := range []struct{ method, target string }{
		{"GET", "/"},
		{"GET", "/foo"},
		{"POST", "/queues"},
		{"PATCH", "/queues/q"},
		{"POST", "/queues/q"},
		{"GET", "/queues/q/other"},
		{"GET", "/queues/q/messages/x"},
		{"GET", "/queues//q"},
		{"GET", "/queues/q/../q"},
		{"POST", "/topics/t"},
		{"GET", "/topics/t/messages"},
		{"POST", "/healthz"},
	} {
		r := c.do(req{method: tc.method, target: tc.target})
		e := wantError(t, r, 400, "InvalidRequestURL")
		if !strings.Contains(e.Message, tc.method) {
			t.Errorf("%s %s: message %q", tc.method, tc.target, e.Message)
		}
	}
	// A trailing slash is tolerated.
	wantStatus(t, c.do(req{method: "GET", target: "/queues/q/"}), 200)
}

// Absolute-form request targets (ali-mns through HTTP_PROXY): the
// scheme://authority prefix is stripped for routing and signing.
func TestAbsoluteFormTarget(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	c.mustCreate("q")
	c.mustSend("q", "via proxy", "")
	r := c.do(req{method: "GET", target: "http://acct.mns.cn-hangzhou.aliyuncs.com/queues/q/messages?numOfMessages=16"})
	wantStatus(t, r, 200)
	var ms xMessages
	decode(t, r, &ms)
	if len(ms.Messages) != 1 || ms.Messages[0].MessageBody != "via proxy" {
		t.Fatalf("%s", r.body)
	}
	r = c.do(req{method: "PUT", target: "HTTPS://acct.mns.cn-hangzhou.aliyuncs.com/queues/created-via-proxy"})
	wantStatus(t, r, 201)
}

func TestRequestIDs(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	seen := map[string]bool{}
	for i := 0; i < 50; i++ {
		var r *response
		if i%2 == 0 {
			r = c.get("/queues/none") // error
		} else {
			r = c.get("/queues") // success
		}
		id := r.header.Get("x-mns-request-id")
		checkCommonHeaders(t, r)
		secs, err := strconv.ParseInt(id[:8], 16, 64)
		if err != nil || secs < time.Now().Unix()-5 || secs > time.Now().Unix()+5 {
			t.Fatalf("request id %s does not start with the Unix time", id)
		}
		if seen[id] {
			t.Fatalf("duplicate request id %s", id)
		}
		seen[id] = true
	}
	// Header names on the wire are lower-case like the real service's.
	raw := rawExchange(t, env.addr, "GET /queues HTTP/1.1\r\nHost: x\r\n\r\n")
	if !strings.Contains(raw, "\r\nx-mns-request-id: ") || !strings.Contains(raw, "\r\nx-mns-version: 2015-06-06\r\n") {
		t.Fatalf("raw response headers:\n%s", raw)
	}
}

// rawExchange sends one request on a fresh connection and returns the raw
// response head and body.
func rawExchange(t testing.TB, addr, request string) string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	var sb strings.Builder
	length := 0
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("read: %v (so far %q)", err, sb.String())
		}
		sb.WriteString(line)
		if strings.HasPrefix(strings.ToLower(line), "content-length:") {
			length, _ = strconv.Atoi(strings.TrimSpace(line[len("content-length:"):]))
		}
		if line == "\r\n" {
			break
		}
	}
	body := make([]byte, length)
	if _, err := io.ReadFull(br, body); err != nil {
		t.Fatal(err)
	}
	sb.Write(body)
	return sb.String()
}

// The body cap refuses an oversized signed request from its
// Content-Length, with error XML, and a chunked one as soon as it passes
// the cap; Expect: 100-continue within the cap works.
func TestRequestBodyCap(t *testing.T) {
	const limit = 80 << 10
	env := startEnv(t, envConfig{serverOpts: func(o *Options) { o.MaxRequestBodyBytes = limit }})
	c := env.client()
	c.mustCreate("q")
	r := c.do(req{method: "POST", target: "/queues/q/messages", body: sendBody(strings.Repeat("a", limit), "")})
	e := wantError(t, r, 400, "InvalidArgument")
	if !strings.Contains(e.Message, fmt.Sprint(limit)) || !r.close {
		t.Fatalf("message %q, headers %v", e.Message, r.header)
	}
	// Chunked bodies are cut off too (signed: the size is what is refused).
	var sb strings.Builder
	ds := env.now().UTC().Format(http.TimeFormat)
	h := map[string]string{"Date": ds, "x-mns-version": apiVersion}
	fmt.Fprintf(&sb, "POST /queues/q/messages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nDate: %s\r\nx-mns-version: %s\r\nAuthorization: %s\r\n\r\n",
		ds, apiVersion, sign(testKeyID, testSecret, "POST", "", "", ds, h, "/queues/q/messages"))
	chunk := strings.Repeat("a", 32<<10)
	for i := 0; i < 3; i++ {
		fmt.Fprintf(&sb, "%x\r\n%s\r\n", len(chunk), chunk)
	}
	sb.WriteString("0\r\n\r\n")
	c2 := env.client()
	e = wantError(t, c2.raw(sb.String()), 400, "InvalidArgument")
	if !strings.Contains(e.Message, fmt.Sprint(limit)) {
		t.Fatalf("chunked: message %q", e.Message)
	}
	// Expect: 100-continue (the Java SDK) with a body within the cap works.
	c3 := env.client()
	body := sendBody("java", "")
	r = c3.do(req{method: "POST", target: "/queues/q/messages", body: body, headers: map[string]string{"Expect": "100-continue"}})
	wantStatus(t, r, 201)
}

// With the default cap a batch of 16 bodies of 64 KiB reaches validation
// (the engine's batch limit answers, not the transport), a batch of 16
// entity-escaped bodies within the batch limit is stored, and the cap fits
// the worst case of its doc comment.
func TestDefaultCapFitsLargestBatch(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	c.mustCreate("q")
	big := strings.Repeat("b", 65536)
	r := c.post("/queues/q/messages", batchBody(16, func(int) string { return "<MessageBody>" + big + "</MessageBody>" }))
	e := wantError(t, r, 400, "InvalidArgument")
	if !strings.Contains(e.Message, "Messages") {
		t.Fatalf("message %q", e.Message)
	}
	// 16 messages of 64 KiB, base64-encoded by the client, with markup.
	b64 := (65536 + 2) / 3 * 4
	if worst := 16*(b64+len("<Message><MessageBody></MessageBody><DelaySeconds>604800</DelaySeconds><Priority>16</Priority></Message>")) + 256; DefaultMaxRequestBodyBytes < worst {
		t.Fatalf("default cap %d below the worst case %d", DefaultMaxRequestBodyBytes, worst)
	}
	// The batch limit's worth of body, every byte written as &quot; (6
	// bytes each): 384 KiB on the wire, stored.
	quoted := strings.Repeat("&quot;", 4096)
	r = c.post("/queues/q/messages", batchBody(16, func(int) string { return "<MessageBody>" + quoted + "</MessageBody>" }))
	wantStatus(t, r, 201)
	// A single message of exactly 64 KiB is fine.
	c.mustSend("q", big, "")
}

// A panicking handler answers 500 InternalError XML and the server keeps
// serving.
func TestPanicRecovery(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	hook := func(o op) {
		if o == opGetQueueAttributes {
			panic("boom")
		}
	}
	env.srv.testHook.Store(&hook)
	wantError(t, c.get("/queues/q"), 500, "InternalError")
	c.mustCreate("q")
	env.srv.testHook.Store(nil)
	wantStatus(t, c.get("/queues/q"), 200)
}

func TestHealthzAndMetrics(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	// Not signed.
	r := c.send("GET", "/healthz", "", map[string]string{})
	if r.status != 200 || string(r.body) != "ok" {
		t.Fatalf("healthz: %s", r)
	}
	c.mustCreate("q")
	c.mustSend("q", "a", "")
	c.mustSend("q", "b", "")
	c.mustReceive("q")
	wantError(t, c.get("/queues/nope"), 404, "QueueNotExist")
	r = c.send("GET", "/metrics", "", map[string]string{})
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("metrics: %d %v", r.status, r.header)
	}
	text := string(r.body)
	for _, want := range []string{
		"# TYPE smqd_http_request_duration_seconds histogram\n",
		`smqd_http_request_duration_seconds_bucket{op="SendMessage",le="+Inf"} 2` + "\n",
		`smqd_http_request_duration_seconds_count{op="ReceiveMessage"} 1` + "\n",
		`smqd_http_request_duration_seconds_bucket{op="CreateQueue",le="0.0001"} `,
		`smqd_http_responses_total{class="2xx",op="SendMessage"} 2` + "\n",
		`smqd_http_responses_total{class="4xx",op="GetQueueAttributes"} 1` + "\n",
		`smqd_http_errors_total{code="QueueNotExist"} 1` + "\n",
		`smqd_queue_messages{queue="q",state="active"} 1` + "\n",
		`smqd_queue_messages{queue="q",state="inactive"} 1` + "\n",
		`smqd_queue_sent_total{queue="q"} 2` + "\n",
		`smqd_queue_received_total{queue="q"} 1` + "\n",
		`smqd_queue_deleted_total{queue="q"} 0` + "\n",
		"smqd_long_polls_waiting 0\n",
		"smqd_queues 1\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	// The whole text is well-formed (families, series, histograms); the
	// library writes labels in name order (class before op).
	parseProm(t, text)
	_ = http.StatusOK
}

// Shutdown racing a Serve that has not reached its accept loop still stops
// it, and Serve after Shutdown returns at once.
func TestShutdownBeforeServe(t *testing.T) {
	b, err := engine.Open(engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for i := 0; i < 20; i++ {
		s, err := New(b, Options{NoAuth: true, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		served := make(chan error, 1)
		go func() { served <- s.Serve(ln) }()
		if err := s.Shutdown(context.Background()); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		select {
		case err := <-served:
			if err != nil {
				t.Fatalf("Serve: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Serve did not return after Shutdown")
		}
		ln2, _ := net.Listen("tcp", "127.0.0.1:0")
		if err := s.Serve(ln2); err != nil {
			t.Fatalf("Serve after Shutdown: %v", err)
		}
	}
}

// A malformed request is logged (at debug level) without its bytes:
// fasthttp's error text used to carry the whole buffer it had read, the
// Authorization signature and the body included, enough to replay the
// request within the clock-skew window.
func TestMalformedRequestNotDumpedToTheLog(t *testing.T) {
	var mu sync.Mutex
	var logged bytes.Buffer
	env := startEnv(t, envConfig{serverOpts: func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(lockedWriter{&mu, &logged}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}})
	for _, raw := range []string{
		"POST /queues/q/messages HTTP/1.1\r\nHost: x\r\nAuthorization: MNS id:SIGSECRETSIG=\r\nBroken header line\r\nContent-Length: 20\r\n\r\nBODYSECRET0123456789",
		"POST /queues/q/messages HTTP/1.1\r\nHost: x\r\nAuthorization: MNS id:SIGSECRETSIG=\r\nContent-Length: x20\r\n\r\nBODYSECRET0123456789",
	} {
		c, err := net.Dial("tcp", env.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		c.Write([]byte(raw))
		io.ReadAll(c) // the server answers 400 and closes
		c.Close()
	}
	loggedNow := func() string {
		mu.Lock()
		defer mu.Unlock()
		return logged.String()
	}
	deadline := time.Now().Add(10 * time.Second) // a bound: the error is logged after the answer
	for !strings.Contains(loggedNow(), "fasthttp") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	out := loggedNow()
	if !strings.Contains(out, "fasthttp") {
		t.Fatalf("the malformed requests were not logged at all:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "fasthttp") && (strings.Count(line, "component=") > 1 || !strings.Contains(line, "library=fasthttp")) {
			t.Fatalf("a fasthttp line with its key twice, or no library: %s", line)
		}
	}
	for _, secret := range []string{"SIGSECRET", "BODYSECRET"} {
		if strings.Contains(out, secret) {
			t.Fatalf("the log holds %s:\n%s", secret, out)
		}
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
