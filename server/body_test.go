package server

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// A refused request whose client writes the whole body before reading
// (as Node's http and the SDKs do) gets the MNS error, not a reset: the
// server drains the body (12 MiB here, far more than the socket buffers
// hold) before it answers and closes.
func TestRefusedBodyIsAnswered(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	c.mustCreate("q")
	big := sendBody(strings.Repeat("x", 12<<20), "")
	cases := []struct {
		name   string
		r      req
		status int
		code   string
	}{
		{"unauthenticated", req{method: "POST", target: "/queues/q/messages", body: big, noSign: true}, 400, "MissingAuthorizationHeader"},
		{"bad signature", req{method: "POST", target: "/queues/q/messages", body: big, resource: "/queues/other/messages"}, 403, "SignatureDoesNotMatch"},
		{"over the cap", req{method: "POST", target: "/queues/q/messages", body: big}, 400, "InvalidArgument"},
		{"unknown path", req{method: "POST", target: "/nowhere", body: big}, 400, "InvalidRequestURL"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl := env.client()
			defer cl.close()
			r, err := cl.rawOnce(cl.build(tc.r))
			if err != nil {
				t.Fatalf("the client saw %v instead of the error answer", err)
			}
			wantError(t, r, tc.status, tc.code)
			if !r.close {
				t.Fatal("a refused body does not close the connection")
			}
		})
	}
	// Nothing was stored.
	if r := c.get("/queues/q"); !contains(r.body, "<ActiveMessages>0</ActiveMessages>") {
		t.Fatalf("queue after refused sends: %s", r.body)
	}
}

// rawOnce writes a request on a fresh connection, like a client that writes
// the whole body before reading, and reads one response; it does not retry.
func (c *client) rawOnce(request string) (*response, error) {
	c.close()
	r, err := c.rawErrNoRetry(request)
	return r, err
}

func (c *client) rawErrNoRetry(request string) (*response, error) {
	conn, err := net.Dial("tcp", c.env.addr)
	if err != nil {
		return nil, err
	}
	c.conn, c.br = conn, bufio.NewReader(conn)
	conn.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := io.WriteString(conn, request); err != nil {
		return nil, fmt.Errorf("write: %w", err)
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return nil, fmt.Errorf("read response: %w", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: body, close: resp.Close}, nil
}

// A client that declares a body and sends nothing is answered with error
// XML when HeaderTimeout runs out, and its connection is closed.
func TestSilentBodyAnswered(t *testing.T) {
	env := startEnv(t, envConfig{serverOpts: func(o *Options) { o.HeaderTimeout = 200 * time.Millisecond }})
	conn, err := net.Dial("tcp", env.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(conn, "POST /queues/q/messages HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", DefaultMaxRequestBodyBytes)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	r := &response{status: resp.StatusCode, header: resp.Header, body: body, close: resp.Close}
	wantError(t, r, 400, "InvalidArgument")
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("connection still open after the answer: %v", err)
	}
}

// Expect: 100-continue: a request that fails its headers is answered at
// once, without 100 Continue, so its body is never sent; one that passes
// gets 100 Continue.
func TestExpectContinueChecksHeadersFirst(t *testing.T) {
	// "other" may send to q alone (and never delete it).
	p, err := ParsePolicies([]byte(`{"Policies": {"p": {"Statement": [{"Effect": "Allow", "Action": "mns:SendMessage", "Resource": "acs:mns:*:*:/queues/q/messages"}]}},
	 "Keys": {"testid": ["AliyunMNSFullAccess"], "other": ["p"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	env := startEnv(t, envConfig{serverOpts: func(o *Options) { o.Policies = p }})
	c := env.client()
	c.mustCreate("q")
	c.mustCreate("r")
	body := sendBody("java", "")
	bigLen := fmt.Sprint(DefaultMaxRequestBodyBytes + 1)
	for _, tc := range []struct {
		name   string
		r      req
		other  bool // signed by "other"
		status int
		code   string
	}{
		{"unauthenticated", req{method: "POST", target: "/queues/q/messages", body: body, noSign: true}, false, 400, "MissingAuthorizationHeader"},
		{"over the cap", req{method: "POST", target: "/queues/q/messages", body: body, headers: map[string]string{"Content-Length": bigLen}}, false, 400, "InvalidArgument"},
		{"within the cap", req{method: "POST", target: "/queues/q/messages", body: body}, false, 100, ""},
		{"refused by policy", req{method: "POST", target: "/queues/r/messages", body: body}, true, 403, "AccessDenied"},
		{"refused by policy, not a send", req{method: "PUT", target: "/queues/q?metaoverride=true", body: "<Queue><DelaySeconds>1</DelaySeconds></Queue>"}, true, 403, "AccessDenied"},
		{"allowed by policy", req{method: "POST", target: "/queues/q/messages", body: body}, true, 100, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := env.client()
			if tc.other {
				c.id, c.secret = "other", "othersecret"
			}
			h := map[string]string{"Expect": "100-continue"}
			for k, v := range tc.r.headers {
				h[k] = v
			}
			tc.r.headers = h
			raw := c.build(tc.r)
			head := raw[:strings.Index(raw, "\r\n\r\n")+4]
			if strings.Count(head, "Content-Length") > 1 { // the override replaces the computed one
				head = strings.Replace(head, fmt.Sprintf("Content-Length: %d\r\n", len(body)), "", 1)
			}
			conn, err := net.Dial("tcp", env.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(30 * time.Second))
			io.WriteString(conn, head) // headers only: the body waits for 100 Continue
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.status == 100 {
				if resp.StatusCode != 100 {
					t.Fatalf("status %d, want 100 Continue", resp.StatusCode)
				}
				io.WriteString(conn, body)
				resp, err = http.ReadResponse(br, nil)
				if err != nil || resp.StatusCode != 201 {
					t.Fatalf("after the body: %v %v", resp, err)
				}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			wantError(t, &response{status: resp.StatusCode, header: resp.Header, body: b, close: resp.Close}, tc.status, tc.code)
			if !resp.Close {
				t.Fatal("a refused Expect request does not close the connection")
			}
		})
	}
}

// Before authentication a connection costs memory independent of the
// Content-Length it declares and of the body bytes it sends: n
// unauthenticated connections declaring the largest body stay under 64 KiB
// each (measured: docs/benchmarks.md, "Pre-auth memory"), whether they send
// none of the body or half of it; buffering the declared bodies would cost
// 2 MiB (or 1 MiB) each.
func TestPreAuthMemory(t *testing.T) {
	const n = 200
	const perConn = 64 << 10
	head := fmt.Sprintf("POST /queues/q/messages HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", DefaultMaxRequestBodyBytes)
	half := strings.Repeat("x", DefaultMaxRequestBodyBytes/2)
	for _, tc := range []struct {
		name string
		sent string // body bytes sent after the headers
		// waitIn is a function the server's connection goroutines sit in
		// once they hold whatever the connection costs: fasthttp's body
		// read for a silent client, our handler (draining) for the other.
		waitIn string
	}{
		{"silent", "", "fasthttp.appendBodyFixedSize"},
		{"half the body sent", half, "server.(*Server).handle"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := startEnv(t, envConfig{serverOpts: func(o *Options) { o.HeaderTimeout = 5 * time.Minute }})
			before := liveHeap()
			conns := make([]net.Conn, 0, n)
			defer func() {
				for _, c := range conns {
					c.Close()
				}
			}()
			for i := 0; i < n; i++ {
				c, err := net.Dial("tcp", env.addr)
				if err != nil {
					t.Fatal(err)
				}
				conns = append(conns, c)
				c.SetDeadline(time.Now().Add(time.Minute))
				if _, err := io.WriteString(c, head+tc.sent); err != nil {
					t.Fatal(err)
				}
			}
			deadline := time.Now().Add(time.Minute)
			for waiting := 0; waiting < n; waiting = goroutinesIn(tc.waitIn) {
				if time.Now().After(deadline) {
					t.Fatalf("only %d of %d connections reached %s; heap grew by %d bytes", waiting, n, tc.waitIn, liveHeap()-before)
				}
				time.Sleep(10 * time.Millisecond)
			}
			grown := liveHeap() - before
			t.Logf("%d unauthenticated connections declaring %d bytes, %d sent: heap +%d bytes (%d per connection)",
				n, DefaultMaxRequestBodyBytes, len(tc.sent), grown, grown/n)
			if grown > n*perConn {
				t.Fatalf("heap grew by %d bytes for %d connections: more than %d per connection", grown, n, perConn)
			}
		})
	}
}

// liveHeap returns the bytes of live heap objects after a collection.
func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// goroutinesIn counts the goroutines with fn on their stack.
func goroutinesIn(fn string) int {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte(fn+"(")) {
			n++
		}
	}
	return n
}

// A document of more elements than any request has is refused with
// InvalidArgument once the cap is reached, however many more it holds.
func TestXMLElementCap(t *testing.T) {
	var d xmlDoc
	many := "<Messages>" + strings.Repeat("<a/>", 400000) + "</Messages>"
	if err := d.parse([]byte(many)); err != errTooManyElements {
		t.Fatalf("parse of 400,001 elements: %v", err)
	}
	if cap(d.nodes) > 2*maxXMLElements {
		t.Fatalf("the parser grew %d nodes for a refused document", cap(d.nodes))
	}
	// Exactly the cap parses.
	exact := "<Messages><Message><MessageBody>x</MessageBody>" + strings.Repeat("<Pad/>", maxXMLElements-3) + "</Message></Messages>"
	if err := d.parse([]byte(exact)); err != nil {
		t.Fatalf("parse of %d elements: %v", maxXMLElements, err)
	}

	env := startEnv(t, envConfig{})
	c := env.client()
	c.mustCreate("q")
	wantStatus(t, c.post("/queues/q/messages", exact), 201)
	e := wantError(t, c.post("/queues/q/messages", many), 400, "InvalidArgument")
	if !strings.Contains(e.Message, fmt.Sprint(maxXMLElements)) {
		t.Fatalf("message %q", e.Message)
	}
	wantError(t, c.del("/queues/q/messages", "<ReceiptHandles>"+strings.Repeat("<ReceiptHandle>h</ReceiptHandle>", maxXMLElements)+"</ReceiptHandles>"), 400, "InvalidArgument")
}

// At MaxConns the server stops accepting; a waiting connection is served
// once another closes, and no more than MaxConns are ever held.
func TestMaxConns(t *testing.T) {
	const max = 2
	env := startEnv(t, envConfig{serverOpts: func(o *Options) { o.MaxConns = max }})
	held := make([]*client, max)
	for i := range held {
		held[i] = env.client()
		wantStatus(t, held[i].get("/queues"), 200) // kept alive: holds a slot
		defer held[i].close()
	}
	deadline := time.Now().Add(30 * time.Second)
	for env.srv.conns.waits.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("Accept never waited with %d of %d connections open", env.srv.conns.open(), max)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if open := env.srv.conns.open(); open != max {
		t.Fatalf("%d connections held, want %d", open, max)
	}
	third := env.client()
	defer third.close()
	done := make(chan *response, 1)
	go func() {
		r, err := third.doErr(req{method: "GET", target: "/queues"})
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	if open := env.srv.conns.open(); open > max {
		t.Fatalf("%d connections held, cap %d", open, max)
	}
	held[0].close() // frees a slot: the third is accepted
	if r := <-done; r == nil || r.status != 200 {
		t.Fatalf("third connection: %v", r)
	}
	if open := env.srv.conns.open(); open > max {
		t.Fatalf("%d connections held, cap %d", open, max)
	}
}

// A request whose line and headers pass the read buffer gets its 400 in
// MNS XML, not a connection reset: the server lingers on the close and
// reads the rest away. A client still writing its request when the answer
// came (headers beyond the buffer, then more) got ECONNRESET on its write
// and reported that instead of the answer (hostile-client audit).
func TestHeadersTooLargeAnswered(t *testing.T) {
	env := startEnv(t, envConfig{})
	conn, err := net.Dial("tcp", env.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, "GET /queues/q HTTP/1.1\r\nHost: x\r\nX-Pad: "+strings.Repeat("p", 2*readBufferBytes)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the server answers and closes meanwhile
	if _, err := io.WriteString(conn, strings.Repeat("q", 2000)+"\r\n\r\n"); err != nil {
		t.Fatalf("the rest of the request: %v", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || !strings.Contains(string(body), "<Code>InvalidArgument</Code>") || !strings.Contains(string(body), "headers are larger than") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}
