package server

import (
	"bufio"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/server/mnsauth"
)

const (
	testKeyID  = "testid"
	testSecret = "testsecret"
)

// testEnv is a running server on 127.0.0.1:0 over an in-memory broker.
type testEnv struct {
	t      testing.TB
	broker *engine.Broker
	srv    *Server
	addr   string
	clock  *engine.FakeClock // nil: system clock
	now    func() time.Time
	served chan error
}

type envConfig struct {
	fakeClock    bool
	serverOpts   func(*Options)
	engineOpts   func(*engine.Options)
	skipShutdown bool
}

// testLogger routes slog to t.Log (STYLE §8).
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func startEnv(t testing.TB, cfg envConfig) *testEnv {
	t.Helper()
	env := &testEnv{t: t, served: make(chan error, 1)}
	eo := engine.Options{Logger: testLogger(t)}
	if cfg.fakeClock {
		env.clock = engine.NewFakeClock(time.Date(2026, 11, 30, 4, 10, 3, 0, time.UTC))
		eo.Clock = env.clock
		env.now = env.clock.Now
	} else {
		env.now = time.Now
	}
	if cfg.engineOpts != nil {
		cfg.engineOpts(&eo)
	}
	b, err := engine.Open(eo)
	if err != nil {
		t.Fatalf("engine.Open: %v", err)
	}
	env.broker = b
	so := Options{
		Credentials: map[string]string{testKeyID: testSecret, "other": "othersecret"},
		Now:         env.now,
		Logger:      testLogger(t),
	}
	if cfg.serverOpts != nil {
		cfg.serverOpts(&so)
	}
	srv, err := New(b, so)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	env.srv = srv
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	env.addr = ln.Addr().String()
	go func() { env.served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		if !cfg.skipShutdown {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := srv.Shutdown(ctx); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
		}
		b.Close()
		if cur := srv.Broker(); cur != nil && cur != b {
			cur.Close() // reopened in place (reopen.go)
		}
	})
	return env
}

// client signs requests exactly like the SDKs (spec §2.2).
type client struct {
	env      *testEnv
	id       string
	secret   string
	rawMD5   bool   // ali-mns form: base64 of the raw digest
	ctype    string // Content-Type sent with bodies
	xmnsDate bool   // send x-mns-date too (like @alicloud/mns)
	conn     net.Conn
	br       *bufio.Reader
}

func (env *testEnv) client() *client {
	return &client{env: env, id: testKeyID, secret: testSecret, ctype: "text/xml;charset=utf-8"}
}

// response is a parsed HTTP response.
type response struct {
	status int
	header http.Header
	body   []byte
	close  bool // the server said Connection: close
}

func (r *response) String() string {
	return fmt.Sprintf("%d %s", r.status, r.body)
}

// hexMD5b64 is the Content-MD5 of Go, Python and @alicloud/mns.
func hexMD5b64(body string) string {
	sum := md5.Sum([]byte(body))
	return base64.StdEncoding.EncodeToString([]byte(hex.EncodeToString(sum[:])))
}

// rawMD5b64 is the Content-MD5 of ali-mns.
func rawMD5b64(body string) string {
	sum := md5.Sum([]byte(body))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// sign computes the Authorization value for the request parts.
func sign(id, secret, method, contentMD5, contentType, date string, headers map[string]string, resource string) string {
	var names []string
	for k := range headers {
		if strings.HasPrefix(strings.ToLower(k), "x-mns-") {
			names = append(names, strings.ToLower(k))
		}
	}
	sort.Strings(names)
	var sb strings.Builder
	sb.WriteString(method + "\n" + contentMD5 + "\n" + contentType + "\n" + date + "\n")
	for _, n := range names {
		for k, v := range headers {
			if strings.ToLower(k) == n {
				sb.WriteString(n + ":" + strings.TrimSpace(v) + "\n")
			}
		}
	}
	sb.WriteString(resource)
	return "MNS " + id + ":" + mnsauth.Sign(secret, []byte(sb.String()))
}

// req is one request to send.
type req struct {
	method   string
	target   string            // as on the request line
	body     string            // "" = none
	headers  map[string]string // extra headers (x-mns-* are signed)
	noSign   bool
	date     *time.Time // override the date
	resource string     // override the signed resource (default: target without absolute-form prefix)
}

// do signs and sends r.
func (c *client) do(r req) *response {
	c.env.t.Helper()
	return c.raw(c.build(r))
}

// doErr is do for goroutines other than the test's: it returns errors.
func (c *client) doErr(r req) (*response, error) { return c.rawErr(c.build(r)) }

// build signs r and returns the raw request.
func (c *client) build(r req) string {
	date := c.env.now()
	if r.date != nil {
		date = *r.date
	}
	h := map[string]string{"x-mns-version": apiVersion}
	ds := date.UTC().Format(http.TimeFormat)
	h["Date"] = ds
	if c.xmnsDate {
		h["x-mns-date"] = ds
	}
	md5v, ctype := "", ""
	if r.body != "" {
		ctype = c.ctype
		if c.rawMD5 {
			md5v = rawMD5b64(r.body)
		} else {
			md5v = hexMD5b64(r.body)
		}
		h["Content-Type"] = ctype
		h["Content-MD5"] = md5v
	}
	for k, v := range r.headers {
		h[k] = v
	}
	if v, ok := h["Content-MD5"]; ok && v != "\x00" {
		md5v = v
	}
	res := r.resource
	if res == "" {
		res = string(stripAbsoluteForm([]byte(r.target)))
	}
	if !r.noSign {
		h["Authorization"] = sign(c.id, c.secret, r.method, md5v, ctype, ds, h, res)
	}
	return c.format(r.method, r.target, r.body, h)
}

// send writes a request with exactly these headers.
func (c *client) send(method, target, body string, h map[string]string) *response {
	c.env.t.Helper()
	return c.raw(c.format(method, target, body, h))
}

func (c *client) format(method, target, body string, h map[string]string) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, target, c.env.addr)
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if h[k] == "\x00" { // deleted
			continue
		}
		fmt.Fprintf(&sb, "%s: %s\r\n", k, h[k])
	}
	if body != "" || method == "PUT" || method == "POST" || method == "DELETE" {
		fmt.Fprintf(&sb, "Content-Length: %d\r\n", len(body))
	}
	sb.WriteString("\r\n")
	sb.WriteString(body)
	return sb.String()
}

// raw sends raw request bytes on the client's connection and reads one
// response.
func (c *client) raw(request string) *response {
	c.env.t.Helper()
	r, err := c.rawErr(request)
	if err != nil {
		c.env.t.Fatal(err)
	}
	return r
}

func (c *client) rawErr(request string) (*response, error) {
	for attempt := 0; ; attempt++ {
		if c.conn == nil {
			conn, err := net.Dial("tcp", c.env.addr)
			if err != nil {
				return nil, fmt.Errorf("dial: %w", err)
			}
			c.conn, c.br = conn, bufio.NewReader(conn)
		}
		c.conn.SetDeadline(time.Now().Add(60 * time.Second))
		if _, err := io.WriteString(c.conn, request); err != nil {
			c.close()
			if attempt == 0 {
				continue // a kept-alive connection the server closed
			}
			return nil, fmt.Errorf("write: %w", err)
		}
		resp, err := http.ReadResponse(c.br, nil)
		for err == nil && resp.StatusCode == http.StatusContinue {
			resp, err = http.ReadResponse(c.br, nil) // after 100 Continue
		}
		if err != nil {
			c.close()
			if attempt == 0 {
				continue
			}
			return nil, fmt.Errorf("read response: %w", err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("read body: %w", err)
		}
		if resp.Close {
			c.close()
		}
		return &response{status: resp.StatusCode, header: resp.Header, body: body, close: resp.Close}, nil
	}
}

func (c *client) close() {
	if c.conn != nil {
		c.conn.Close()
		c.conn, c.br = nil, nil
	}
}

// Shortcuts.
func (c *client) get(target string) *response { return c.do(req{method: "GET", target: target}) }
func (c *client) put(target, body string) *response {
	return c.do(req{method: "PUT", target: target, body: body})
}
func (c *client) post(target, body string) *response {
	return c.do(req{method: "POST", target: target, body: body})
}
func (c *client) del(target, body string) *response {
	return c.do(req{method: "DELETE", target: target, body: body})
}

// Decoded response documents (tests may use encoding/xml; the server does not).
type xError struct {
	XMLName   xml.Name `xml:"Error"`
	Code      string
	Message   string
	RequestId string
	HostId    string
}

type xMessage struct {
	MessageId        string
	ReceiptHandle    string
	MessageBodyMD5   string
	MessageBody      string
	EnqueueTime      int64
	NextVisibleTime  int64
	FirstDequeueTime int64
	DequeueCount     int
	Priority         int
	ErrorCode        string
	ErrorMessage     string
}

type xMessages struct {
	XMLName  xml.Name   `xml:"Messages"`
	Messages []xMessage `xml:"Message"`
}

type xQueue struct {
	QueueURL               string
	QueueName              string
	CreateTime             int64
	LastModifyTime         int64
	DelaySeconds           int
	MaximumMessageSize     int
	MessageRetentionPeriod int
	VisibilityTimeout      int
	PollingWaitSeconds     int
	ActiveMessages         int
	InactiveMessages       int
	DelayMessages          int
	LoggingEnabled         string
}

type xQueues struct {
	XMLName    xml.Name `xml:"Queues"`
	Queues     []xQueue `xml:"Queue"`
	NextMarker *string
}

type xErrors struct {
	XMLName xml.Name `xml:"Errors"`
	Errors  []struct {
		ErrorCode     string
		ErrorMessage  string
		ReceiptHandle string
	} `xml:"Error"`
}

type xChangeVisibility struct {
	XMLName         xml.Name `xml:"ChangeVisibility"`
	ReceiptHandle   string
	NextVisibleTime int64
}

func decode(t testing.TB, r *response, v any) {
	t.Helper()
	if err := xml.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %T from %s: %v", v, r, err)
	}
}

// wantStatus checks the status and, for errors, the error code and the
// full error document shape (spec §3.11, §0.1, §0.3).
func wantStatus(t testing.TB, r *response, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	checkCommonHeaders(t, r)
}

func checkCommonHeaders(t testing.TB, r *response) {
	t.Helper()
	id := r.header.Get("x-mns-request-id")
	if len(id) != 24 || strings.ToUpper(id) != id {
		t.Fatalf("x-mns-request-id %q is not 24 upper-case hex digits", id)
	}
	if _, err := hex.DecodeString(id); err != nil {
		t.Fatalf("x-mns-request-id %q: %v", id, err)
	}
	if v := r.header.Get("x-mns-version"); v != apiVersion {
		t.Fatalf("x-mns-version %q", v)
	}
	if len(r.body) > 0 {
		if ct := r.header.Get("Content-Type"); ct != "text/xml;charset=utf-8" {
			t.Fatalf("Content-Type %q", ct)
		}
	}
}

// wantError checks an error answer: status, code, the four elements, the
// namespace without a trailing slash, text/xml, RequestId = header.
func wantError(t testing.TB, r *response, status int, code string) *xError {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d (%s): %s", r.status, status, code, r.body)
	}
	checkCommonHeaders(t, r)
	if !strings.Contains(string(r.body), `<Error xmlns="http://mns.aliyuncs.com/doc/v1">`) {
		t.Fatalf("error root/namespace wrong: %s", r.body)
	}
	e := errorDocument(t, r)
	if e.Code != code {
		t.Fatalf("code %q, want %q: %s", e.Code, code, r.body)
	}
	return e
}

// errorDocument decodes an Error document and checks that it has all four
// elements, its RequestId the answer's x-mns-request-id.
func errorDocument(t testing.TB, r *response) *xError {
	t.Helper()
	var e xError
	decode(t, r, &e)
	if e.Code == "" || e.Message == "" || e.RequestId == "" || !strings.HasPrefix(e.HostId, "http://") {
		t.Fatalf("error lacks an element: %s", r.body)
	}
	if e.RequestId != r.header.Get("x-mns-request-id") {
		t.Fatalf("RequestId %q != header %q", e.RequestId, r.header.Get("x-mns-request-id"))
	}
	return &e
}

// Helpers for common steps.

func (c *client) mustCreate(name string) {
	c.env.t.Helper()
	r := c.put("/queues/"+name, "")
	if r.status != 201 {
		c.env.t.Fatalf("create %s: %s", name, r)
	}
}

func sendBody(body string, extra string) string {
	return `<?xml version="1.0" encoding="UTF-8"?><Message xmlns="http://mns.aliyuncs.com/doc/v1/"><MessageBody>` + body + `</MessageBody>` + extra + `</Message>`
}

func (c *client) mustSend(queue, body string, extra string) xMessage {
	c.env.t.Helper()
	r := c.post("/queues/"+queue+"/messages", sendBody(body, extra))
	wantStatus(c.env.t, r, 201)
	var m xMessage
	decode(c.env.t, r, &m)
	return m
}

func (c *client) mustReceive(queue string) xMessage {
	c.env.t.Helper()
	r := c.get("/queues/" + queue + "/messages")
	wantStatus(c.env.t, r, 200)
	var m xMessage
	decode(c.env.t, r, &m)
	return m
}

func md5Upper(s string) string {
	sum := md5.Sum([]byte(s))
	return strings.ToUpper(hex.EncodeToString(sum[:]))
}

func xmlUnmarshal(b []byte, v any) error { return xml.Unmarshal(b, v) }

func contains(b []byte, s string) bool { return strings.Contains(string(b), s) }
