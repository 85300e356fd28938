package server

// authaudit (2026-12-07): claims of docs/operations.md "Access policies"
// checked on the wire.

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A request refused by policy before its body is sent (Expect:
// 100-continue, as the Java SDK sends) is logged ("request refused by
// policy") with its own request id, the one its answer carries. The
// expect handler gave the id only after the check, so the line carried
// the id a pooled request state held from an earlier request (another
// key's, as often as not) or none.
func TestAuthzExpectRefusalLogsItsRequestID(t *testing.T) {
	p, err := ParsePolicies([]byte(`{"Policies": {"p": {"Statement": [{"Effect": "Allow", "Action": "mns:SendMessage", "Resource": "acs:mns:*:*:/queues/q/messages"}]}},
	 "Keys": {"testid": ["AliyunMNSFullAccess"], "other": ["p"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	env := startEnv(t, envConfig{serverOpts: func(o *Options) {
		o.Policies = p
		o.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(&logs, tWriter{t}), nil))
	}})
	admin := env.client()
	defer admin.close()
	admin.mustCreate("q")
	admin.mustCreate("r")
	// Requests that leave their ids in the pooled request states.
	for range 20 {
		wantStatus(t, admin.get("/queues/r"), 200)
	}

	other := env.client()
	other.id, other.secret = "other", "othersecret"
	body := sendBody("java", "")
	raw := other.build(req{method: "POST", target: "/queues/r/messages", body: body, headers: map[string]string{"Expect": "100-continue"}})
	head := raw[:strings.Index(raw, "\r\n\r\n")+4]
	conn, err := net.Dial("tcp", env.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	io.WriteString(conn, head) // the body waits for 100 Continue, which never comes
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	wantError(t, &response{status: resp.StatusCode, header: resp.Header, body: b, close: resp.Close}, 403, "AccessDenied")
	id := resp.Header.Get("x-mns-request-id")
	if id == "" || !strings.Contains(string(b), "<RequestId>"+id+"</RequestId>") {
		t.Fatalf("request id %q, body %s", id, b)
	}

	deadline := time.Now().Add(10 * time.Second)
	var line string
	for line == "" && time.Now().Before(deadline) {
		if ls := logs.lines(`"request refused by policy"`); len(ls) > 0 {
			line = ls[0]
		}
		if line == "" {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if line == "" {
		t.Fatal(`no "request refused by policy" line`)
	}
	if !strings.Contains(line, "request_id="+id) {
		t.Fatalf("the refusal's log line does not carry its request id %s:\n%s", id, line)
	}
}
