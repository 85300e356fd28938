package server

// docs/console.md, Security, CSRF: with --no-auth smqd "refuses with 403
// AccessDenied ... every request a browser makes to it under a host name
// other than localhost (a page whose name was rebound to the server's
// address, DNS rebinding, is same-origin to the browser)".
//
// DNS rebinding, in a real Chromium: the name evil.test is mapped to
// 127.0.0.1 by the browser's resolver (--host-resolver-rules), which is
// what a rebound name looks like to the browser: a page at
// http://evil.test:PORT whose requests reach smqd. The page's own
// requests are same-origin to the browser; over plain HTTP to a name that
// is not localhost the origin is not potentially trustworthy, so the
// browser sends no Sec-Fetch-* headers, and a same-origin GET carries no
// Origin either. Every one of those requests must still be refused.

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

func TestConsoleNoAuthDNSRebindingInBrowser(t *testing.T) {
	env := startEnv(t, envConfig{serverOpts: func(o *Options) { o.Console = true; o.NoAuth = true }})
	c := env.client()
	c.mustCreate("victim")
	wantStatus(t, c.post("/queues/victim/messages", sendBody("secret-payload", "")), 201)
	_, port, _ := net.SplitHostPort(env.addr)
	// The rebound name: evil.test now resolves to smqd's address.
	ctx := browser(t, chromedp.Flag("host-resolver-rules", "MAP evil.test 127.0.0.1"))
	// Any document of that origin will do: the attacker's page was served
	// under this name before it was rebound; here smqd serves one.
	origin := "http://evil.test:" + port
	step(t, ctx, "open a page of the rebound name", chromedp.Navigate(origin+"/console/"))

	// fetch runs a same-origin request in the page and returns its status
	// and body.
	fetch := func(method, path string) (int, string) {
		t.Helper()
		type result struct {
			Status int    `json:"status"`
			Body   string `json:"body"`
		}
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		r, err := chromedp.Run(sctx, chromedp.Evaluate[result](fmt.Sprintf(
			`fetch(%q, {method: %q}).then(async r => ({status: r.status, body: await r.text()}))`, path, method),
			chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("%s %s from the page: %v", method, path, err)
		}
		return r.Status, r.Body
	}
	q, _ := env.broker.Queue("victim")

	// A peek (GET): must be refused; it read the message's body.
	status, body := fetch("GET", "/queues/victim/messages?peekonly=true")
	if status != 403 {
		t.Errorf("a GET peek from a page of a rebound name answered %d, want 403 AccessDenied:\n%s", status, body)
	}
	// A receive (GET): must be refused; it took the message (invisible,
	// its receive count up, one step nearer a dead-letter queue).
	status, body = fetch("GET", "/queues/victim/messages?numOfMessages=16")
	if status != 403 {
		t.Errorf("a GET receive from a page of a rebound name answered %d, want 403 AccessDenied:\n%s", status, body)
	}
	if info, _ := q.Attributes(); info.Inactive != 0 {
		t.Errorf("the rebound page's receive took %d message(s)", info.Inactive)
	}
	// A listing (GET /queues).
	if status, body = fetch("GET", "/queues"); status != 403 {
		t.Errorf("a GET ListQueue from a page of a rebound name answered %d, want 403:\n%s", status, body)
	}
	// A change (not a GET) carries Origin and was refused already.
	if status, _ = fetch("DELETE", "/queues/victim"); status != 403 {
		t.Errorf("a DELETE from a page of a rebound name answered %d, want 403", status)
	}
	if _, err := env.broker.Queue("victim"); err != nil {
		t.Errorf("the rebound page deleted the queue: %v", err)
	}
}

// The same without a browser: a --no-auth request under a rebound name
// with neither Sec-Fetch-Site nor Origin, as Chromium sends a same-origin
// GET to a plain-HTTP name, is refused; under an address or localhost it
// is served.
func TestNoAuthRebindingWithoutBrowserHeaders(t *testing.T) {
	env := startEnv(t, envConfig{serverOpts: func(o *Options) { o.NoAuth = true }})
	c := env.client()
	c.mustCreate("q")
	wantStatus(t, c.post("/queues/q/messages", sendBody("secret", "")), 201)
	_, port, _ := net.SplitHostPort(env.addr)
	peekAs := func(host string) *response {
		return c.raw("GET /queues/q/messages?peekonly=true HTTP/1.1\r\nHost: " + host + "\r\nx-mns-version: 2015-06-06\r\n\r\n")
	}
	for _, host := range []string{"attacker.example:" + port, "smqd.internal:" + port} {
		wantError(t, peekAs(host), 403, "AccessDenied")
	}
	for _, host := range []string{"localhost:" + port, "127.0.0.1:" + port, "[::1]:" + port} {
		wantStatus(t, peekAs(host), 200)
	}
}

// docs/console.md: "On plain HTTP to another address the console says so
// instead of signing in" (WebCrypto is off outside a secure context).
func TestConsoleInsecureContextSaysSo(t *testing.T) {
	env := startEnv(t, envConfig{serverOpts: func(o *Options) { o.Console = true }})
	_, port, _ := net.SplitHostPort(env.addr)
	ctx := browser(t, chromedp.Flag("host-resolver-rules", "MAP smqd.example 127.0.0.1"))
	step(t, ctx, "open the console at a name over plain HTTP",
		chromedp.Navigate("http://smqd.example:"+port+"/console/"), chromedp.WaitVisible(chromedp.CSS("#signin")))
	step(t, ctx, "sign in",
		chromedp.SendKeys(chromedp.CSS("#access-key-id"), testKeyID),
		chromedp.SendKeys(chromedp.CSS("#access-key-secret"), testSecret),
		chromedp.Click(chromedp.CSS("#signin-button")),
		until(`(document.querySelector('#signin-error')||{}).textContent.includes('not a secure context')`))
	t.Logf("the page says: %s", pageText(t, ctx, "#signin-error"))
}
