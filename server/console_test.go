package server

import (
	"regexp"
	"strings"
	"testing"
)

// Every console file is sent with a strict CSP (nothing inline, no
// framing) and X-Frame-Options: DENY; HEAD works, unknown files are 404,
// /console redirects to /console/.
func TestConsoleHeaders(t *testing.T) {
	env := startEnv(t, envConfig{serverOpts: func(o *Options) { o.Console = true }})
	c := env.client()
	for _, p := range []string{"/console/", "/console/index.html", "/console/app.js", "/console/mns.js", "/console/views/queue.js", "/console/views/topics.js", "/console/views/topic.js", "/console/style.css", "/console/features.json", "/console/nope.js", "/console"} {
		r := c.send("GET", p, "", map[string]string{})
		csp := r.header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'", "form-action 'none'", "base-uri 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: CSP %q lacks %q", p, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-") {
			t.Errorf("%s: CSP %q allows unsafe sources", p, csp)
		}
		if r.header.Get("X-Frame-Options") != "DENY" || r.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: X-Frame-Options %q, X-Content-Type-Options %q", p, r.header.Get("X-Frame-Options"), r.header.Get("X-Content-Type-Options"))
		}
		switch want := 200; p {
		case "/console/nope.js":
			want = 404
			fallthrough
		default:
			if r.status != want {
				t.Errorf("%s: %s", p, r)
			}
		case "/console":
			if r.status != 301 || r.header.Get("Location") != "/console/" {
				t.Errorf("/console: %s", r)
			}
		}
	}
	r := c.send("GET", "/console/app.js", "", map[string]string{})
	if ct := r.header.Get("Content-Type"); ct != "text/javascript; charset=utf-8" {
		t.Errorf("app.js Content-Type %q", ct)
	}
	if r2 := c.send("GET", "/console/app.js", "", map[string]string{"If-None-Match": r.header.Get("ETag")}); r2.status != 304 {
		t.Errorf("If-None-Match: %s", r2)
	}
	// Nothing inline that the CSP would have to allow: no script element
	// without src, no event handler attributes, no style attributes.
	page := string(c.send("GET", "/console/", "", map[string]string{}).body)
	if m := regexp.MustCompile(`<script(?:\s+[^>]*)?>[^<]`).FindString(page); m != "" {
		t.Errorf("inline script in index.html: %q", m)
	}
	if m := regexp.MustCompile(`(?i)\s(on[a-z]+|style)\s*=`).FindString(page); m != "" {
		t.Errorf("inline handler or style in index.html: %q", m)
	}
	// Another site may not load the console's scripts into its pages.
	r = c.send("GET", "/console/app.js", "", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "script"})
	if r.status != 403 {
		t.Errorf("a cross-site script load: %s", r)
	}
	r = c.send("GET", "/console/", "", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"})
	if r.status != 200 {
		t.Errorf("a link from another site: %s", r) // opens the console
	}
}

// features.json offers the topics page wherever the topic API is served:
// on a single node here, and on a cluster node, which also has the cluster
// page (TestConsoleClusterPageInBrowser sees both links).
func TestConsoleFeatures(t *testing.T) {
	env := startEnv(t, envConfig{serverOpts: func(o *Options) { o.Console = true }})
	r := env.client().send("GET", "/console/features.json", "", map[string]string{})
	if ct := r.header.Get("Content-Type"); r.status != 200 || ct != "application/json" {
		t.Errorf("features.json: status %d, Content-Type %q", r.status, ct)
	}
	if got, want := string(r.body), `{"topics":true,"cluster":false}`; got != want {
		t.Errorf("a single node's features.json %s, want %s", got, want)
	}
}

// --console=false: nothing is served at /console/.
func TestConsoleOff(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	wantError(t, c.send("GET", "/console/", "", map[string]string{}), 400, "InvalidRequestURL")
	wantError(t, c.send("GET", "/console/app.js", "", map[string]string{}), 400, "InvalidRequestURL")
}

// The console has no way in but the signed API: the requests it makes
// (x-mns-date, Content-MD5, browser headers of the same origin) are
// refused without a signature, or with a wrong secret or key, and change
// nothing.
func TestConsoleAPINeedsSignIn(t *testing.T) {
	env := startEnv(t, envConfig{serverOpts: func(o *Options) { o.Console = true }})
	c := env.client()
	c.xmnsDate = true
	browserHeaders := map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://" + env.addr, "Date": "\x00"}
	create := func(cl *client, noSign bool) *response {
		return cl.do(req{method: "PUT", target: "/queues/console-q", body: `<Queue/>`, headers: browserHeaders, noSign: noSign})
	}
	wantError(t, create(c, true), 400, "MissingAuthorizationHeader")
	bad := env.client()
	bad.xmnsDate = true
	bad.secret = "not-the-secret"
	wantError(t, create(bad, false), 403, "SignatureDoesNotMatch")
	bad.id, bad.secret = "nobody", testSecret
	wantError(t, create(bad, false), 403, "InvalidAccessKeyId")
	for _, m := range []string{"GET /queues", "GET /queues/console-q", "POST /queues/console-q/messages"} {
		method, target, _ := strings.Cut(m, " ")
		body := ""
		if method == "POST" {
			body = sendBody("x", "")
		}
		if r := c.do(req{method: method, target: target, body: body, headers: browserHeaders, noSign: true}); r.status < 400 {
			t.Errorf("unsigned %s: %s", m, r)
		}
	}
	if _, err := env.broker.Queue("console-q"); err == nil {
		t.Fatal("an unsigned request created a queue")
	}
	// Signed like the console signs (x-mns-date, no Date), it works.
	wantStatus(t, create(c, false), 201)
}

// Requests a browser marks as cross-site are refused before anything
// else, also with --no-auth; same-origin ones and requests without browser
// headers (SDKs) are not.
func TestCrossSiteRefused(t *testing.T) {
	env := startEnv(t, envConfig{serverOpts: func(o *Options) { o.NoAuth = true; o.Console = true }})
	c := env.client()
	c.mustCreate("q")
	self := "http://" + env.addr
	for _, tc := range []struct {
		headers map[string]string
		refused bool
	}{
		{map[string]string{"Sec-Fetch-Site": "cross-site"}, true},
		{map[string]string{"Sec-Fetch-Site": "same-site"}, true},
		{map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": self}, true},
		{map[string]string{"Origin": "http://evil.example"}, true},
		{map[string]string{"Origin": "null"}, true},
		{map[string]string{"Origin": "http://" + strings.Replace(env.addr, "127.0.0.1", "localhost", 1)}, true},
		{map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": self}, false},
		{map[string]string{"Origin": self}, false},
		{map[string]string{"Sec-Fetch-Site": "none"}, false},
		{map[string]string{}, false},
	} {
		r := c.do(req{method: "POST", target: "/queues/q/messages", body: sendBody("m", ""), headers: tc.headers})
		if tc.refused {
			wantError(t, r, 403, "AccessDenied")
		} else {
			wantStatus(t, r, 201)
		}
	}
	// DNS rebinding: a page of another site whose name now points at this
	// server is same-origin to the browser, with its own name as Host.
	_, port, _ := strings.Cut(env.addr, ":")
	sendAs := func(host string) *response {
		return c.raw(strings.Replace(c.format("POST", "/queues/q/messages", sendBody("m", ""), map[string]string{
			"Sec-Fetch-Site": "same-origin", "Origin": "http://" + host, "Content-Type": "text/xml"}), "Host: "+env.addr, "Host: "+host, 1))
	}
	for _, host := range []string{"attacker.example:" + port, "smqd.internal:" + port} {
		wantError(t, sendAs(host), 403, "AccessDenied")
	}
	// At localhost or an address, the console's own requests pass.
	for _, host := range []string{"localhost:" + port, "[::1]:" + port} {
		wantStatus(t, sendAs(host), 201)
	}
	q, _ := env.broker.Queue("q")
	if info, _ := q.Attributes(); info.Active != 6 {
		t.Errorf("%d messages, want the 6 allowed ones", info.Active)
	}
}

func TestSameHost(t *testing.T) {
	for _, tc := range []struct {
		origin, host string
		same         bool
	}{
		{"http://a:8080", "a:8080", true},
		{"http://a", "a:80", true},
		{"https://a", "a:443", true},
		{"https://a", "a", true},
		{"http://a", "a:8080", false},
		{"http://[::1]:8080", "[::1]:8080", true},
		{"http://[::1]", "[::1]:80", true},
		{"http://b:8080", "a:8080", false},
	} {
		scheme, host, _ := strings.Cut(tc.origin, "://")
		if got := sameHost([]byte(host), []byte(scheme), []byte(tc.host)); got != tc.same {
			t.Errorf("sameHost(%s, %s) = %v", tc.origin, tc.host, got)
		}
	}
}
