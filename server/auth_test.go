package server

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// The captured @alicloud/mns DELETE of vector 2, replayed byte for byte
// (origin form and absolute form): it authenticates, and the old-style
// handle with raw + / = is then a ReceiptHandleError, not a signature error.
func TestSignatureVectorOverTheWire(t *testing.T) {
	env := startEnv(t, envConfig{fakeClock: true}) // the fake clock starts at the vector's date
	c := env.client()
	c.mustCreate("q1")
	for _, target := range []string{
		"/queues/q1/messages?ReceiptHandle=1-ODU4+/OTk==",
		"http://acct.mns.cn-hangzhou.aliyuncs.com/queues/q1/messages?ReceiptHandle=1-ODU4+/OTk==",
	} {
		r := c.raw("DELETE " + target + " HTTP/1.1\r\n" +
			"Host: acct.mns.cn-hangzhou.aliyuncs.com\r\n" +
			"Content-MD5: ZDQxZDhjZDk4ZjAwYjIwNGU5ODAwOTk4ZWNmODQyN2U=\r\n" +
			"Content-Type: text/xml\r\n" +
			"Date: Mon, 30 Nov 2026 04:10:03 GMT\r\n" +
			"x-mns-date: Mon, 30 Nov 2026 04:10:03 GMT\r\n" +
			"x-mns-version: 2015-06-06\r\n" +
			"Authorization: MNS testid:/WdZqJfpqlgZoHuU0sIT3tMQKQE=\r\n" +
			"Content-Length: 0\r\n\r\n")
		e := wantError(t, r, 400, "ReceiptHandleError")
		if e.HostId != "http://acct.mns.cn-hangzhou.aliyuncs.com" {
			t.Fatalf("HostId %q", e.HostId)
		}
	}
}

func TestAuthErrors(t *testing.T) {
	env := startEnv(t, envConfig{fakeClock: true})
	c := env.client()
	c.mustCreate("q")
	now := env.now()
	const del = "\x00"
	cases := []struct {
		name   string
		r      req
		status int
		code   string
	}{
		{"no Authorization", req{method: "GET", target: "/queues/q", noSign: true}, 400, "MissingAuthorizationHeader"},
		{"not MNS scheme", req{method: "GET", target: "/queues/q", noSign: true, headers: map[string]string{"Authorization": "Basic dGVzdDp0ZXN0"}}, 400, "InvalidAuthorizationHeader"},
		{"no colon", req{method: "GET", target: "/queues/q", noSign: true, headers: map[string]string{"Authorization": "MNS testid"}}, 400, "InvalidAuthorizationHeader"},
		{"signature version 4 (not supported)", req{method: "GET", target: "/queues/q", noSign: true, headers: map[string]string{"Authorization": "MNS4-HMAC-SHA256 Credential=testid/20261130/cn-hangzhou/mns/aliyun_v4_request,Signature=00"}}, 400, "InvalidAuthorizationHeader"},
		{"empty signature", req{method: "GET", target: "/queues/q", noSign: true, headers: map[string]string{"Authorization": "MNS testid:"}}, 400, "InvalidAuthorizationHeader"},
		{"unknown key", req{method: "GET", target: "/queues/q", noSign: true, headers: map[string]string{"Authorization": "MNS nobody:AAAAAAAAAAAAAAAAAAAAAAAAAAA="}}, 403, "InvalidAccessKeyId"},
		{"bad signature", req{method: "GET", target: "/queues/q", noSign: true, headers: map[string]string{"Authorization": "MNS testid:AAAAAAAAAAAAAAAAAAAAAAAAAAA="}}, 403, "SignatureDoesNotMatch"},
		{"signed other resource", req{method: "GET", target: "/queues/q", resource: "/queues/r"}, 403, "SignatureDoesNotMatch"},
		{"no date", req{method: "GET", target: "/queues/q", headers: map[string]string{"Date": del}}, 400, "MissingDateHeader"},
		{"bad date", req{method: "GET", target: "/queues/q", headers: map[string]string{"Date": "yesterday"}}, 400, "InvalidDateHeader"},
		{"date 16 min late", req{method: "GET", target: "/queues/q", date: ptr(now.Add(-16 * time.Minute))}, 408, "TimeExpired"},
		{"date 16 min early", req{method: "GET", target: "/queues/q", date: ptr(now.Add(16 * time.Minute))}, 408, "TimeExpired"},
		{"no version", req{method: "GET", target: "/queues/q", headers: map[string]string{"x-mns-version": del}}, 400, "MissingVersionHeader"},
		{"other version", req{method: "GET", target: "/queues/q", headers: map[string]string{"x-mns-version": "2014-01-01"}}, 400, "InvalidVersionHeader"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, c.do(tc.r), tc.status, tc.code)
		})
	}
	// The other key works too; 14 minutes of skew are fine; x-mns-date alone
	// stands in for Date; x-mns-* headers other than the version are signed.
	other := env.client()
	other.id, other.secret = "other", "othersecret"
	wantStatus(t, other.get("/queues/q"), 200)
	wantStatus(t, c.do(req{method: "GET", target: "/queues/q", date: ptr(now.Add(14 * time.Minute))}), 200)
	ds := now.UTC().Format(http.TimeFormat)
	wantStatus(t, c.do(req{method: "GET", target: "/queues/q", headers: map[string]string{"Date": del, "x-mns-date": ds}}), 200)
	wantStatus(t, c.do(req{method: "GET", target: "/queues", headers: map[string]string{"x-mns-prefix": "q", "x-mns-marker": "a", "x-mns-ret-number": "10"}}), 200)
}

func ptr[T any](v T) *T { return &v }

// Both Content-MD5 encodings are accepted (spec §0.4); one that matches
// the body in neither is 400 InvalidDegist and changes nothing, so a
// captured signed send cannot be replayed with another body.
func TestContentMD5Forms(t *testing.T) {
	env := startEnv(t, envConfig{})
	hexForm := env.client()
	hexForm.mustCreate("q")
	hexForm.mustSend("q", "a", "")
	rawForm := env.client()
	rawForm.rawMD5 = true
	rawForm.mustSend("q", "b", "")
	body := sendBody("c", "")
	r := hexForm.do(req{method: "POST", target: "/queues/q/messages", body: body, headers: map[string]string{"Content-MD5": "bm90IGFuIG1kNQ=="}})
	wantError(t, r, 400, "InvalidDegist")
	// A captured signed request replayed with another body of the same
	// length: the signature still matches, the digest does not.
	captured := hexForm.build(req{method: "POST", target: "/queues/q/messages", body: sendBody("pay alice", "")})
	forged := strings.Replace(captured, "pay alice", "pay mallo", 1)
	wantError(t, hexForm.raw(forged), 400, "InvalidDegist")
	wantStatus(t, hexForm.raw(captured), 201) // the original is fine
	// Go sends Content-Type application/xml and Content-MD5 on every request, GETs too.
	goClient := env.client()
	goClient.ctype = "application/xml"
	ds := env.now().UTC().Format(http.TimeFormat)
	h := map[string]string{"Date": ds, "x-mns-version": apiVersion, "Content-Type": "application/xml",
		"Content-MD5": "ZDQxZDhjZDk4ZjAwYjIwNGU5ODAwOTk4ZWNmODQyN2U=", "User-Agent": "aliyun-sdk-go/2.0.1"}
	h["Authorization"] = sign(testKeyID, testSecret, "GET", h["Content-MD5"], "application/xml", ds, h, "/queues/q/messages?numOfMessages=16&waitseconds=1")
	r = goClient.send("GET", "/queues/q/messages?numOfMessages=16&waitseconds=1", "", h)
	wantStatus(t, r, 200)
	var ms xMessages
	decode(t, r, &ms)
	if len(ms.Messages) != 3 {
		t.Fatalf("got %d messages, want the 3 sent with a matching digest", len(ms.Messages))
	}
	for _, m := range ms.Messages {
		if m.MessageBody == "c" || m.MessageBody == "pay mallo" {
			t.Fatalf("a send with a wrong digest was stored: %q", m.MessageBody)
		}
	}
	// An empty Content-MD5 header counts as absent (it is signed as empty).
	r = hexForm.do(req{method: "POST", target: "/queues/q/messages", body: body, headers: map[string]string{"Content-MD5": ""}})
	wantStatus(t, r, 201)
}

// @alicloud/mns with a trailing slash in its endpoint sends //queues/...
// while signing /queues/...: a signature error, never a redirect (spec §1.2).
func TestDoubleSlashPath(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	c.mustCreate("q")
	r := c.do(req{method: "GET", target: "//queues/q", resource: "/queues/q"})
	wantError(t, r, 403, "SignatureDoesNotMatch")
	// Signed as sent, it is served.
	wantStatus(t, c.do(req{method: "GET", target: "//queues/q"}), 200)
}

func TestNoAuth(t *testing.T) {
	env := startEnv(t, envConfig{serverOpts: func(o *Options) { o.NoAuth = true; o.Credentials = nil }})
	c := env.client()
	r := c.send("PUT", "/queues/open", "", map[string]string{})
	wantStatus(t, r, 201)
	r = c.send("POST", "/queues/open/messages", "<Message><MessageBody>x</MessageBody></Message>", map[string]string{})
	wantStatus(t, r, 201)
	// A wrong version is still refused.
	r = c.send("GET", "/queues/open", "", map[string]string{"x-mns-version": "1999-01-01"})
	wantError(t, r, 400, "InvalidVersionHeader")
	if _, err := New(env.broker, Options{}); err == nil || !strings.Contains(err.Error(), "credentials") {
		t.Fatalf("New without credentials or NoAuth: %v", err)
	}
}

// SetCredentials: the next request is checked against the new keys alone,
// on a connection already open; a bad set is refused and changes nothing.
func TestSetCredentials(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	defer c.close()
	wantStatus(t, c.get("/queues"), 200)
	for _, bad := range []map[string]string{nil, {}, {"": "s"}, {"id": ""}, {"a:b": "s"}, {"a b": "s"}} {
		if err := env.srv.SetCredentials(bad); err == nil {
			t.Fatalf("SetCredentials(%q) accepted", bad)
		}
	}
	wantStatus(t, c.get("/queues"), 200) // the refused sets changed nothing
	if err := env.srv.SetCredentials(map[string]string{"new": "newsecret", testKeyID: "rotated"}); err != nil {
		t.Fatal(err)
	}
	wantError(t, c.get("/queues"), 403, "SignatureDoesNotMatch")
	c.secret = "rotated"
	wantStatus(t, c.get("/queues"), 200)
	other := env.client()
	defer other.close()
	other.id, other.secret = "other", "othersecret"
	wantError(t, other.get("/queues"), 403, "InvalidAccessKeyId")
	other.id, other.secret = "new", "newsecret"
	wantStatus(t, other.get("/queues"), 200)

	noAuth := startEnv(t, envConfig{serverOpts: func(o *Options) { o.NoAuth, o.Credentials = true, nil }})
	if err := noAuth.srv.SetCredentials(map[string]string{"k": "s"}); err == nil {
		t.Fatal("SetCredentials on a server without authentication")
	}
}
