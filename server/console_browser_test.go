package server

// The web console in a real browser: Debian's Chromium, headless, driven
// over the DevTools protocol (chromedp). `make test` installs Chromium
// (the Makefile's browser target) when it is missing; without it the test
// fails when run as root (CI) and is skipped otherwise, saying why.
//
// Screenshots go to $SMQD_CONSOLE_SCREENSHOTS when it is set (docs/img
// holds the ones docs/console.md shows), else to a temporary directory.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/smqd/smqd/engine"
)

// chromiumPath finds Debian's chromium, or ends the test.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	if os.Geteuid() == 0 {
		t.Fatal("chromium is not installed: `make test` installs it (make browser: apt-get install chromium)")
	}
	t.Skip("chromium is not installed and this user cannot install it: `sudo apt-get install chromium`, or run make test as root")
	return ""
}

// browser starts a headless Chromium with the flags this machine needs
// (no sandbox as root, no GPU, no network of its own), a fresh profile,
// and any extra flags.
func browser(t *testing.T, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	exe := chromiumPath(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1100, 820),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-features", "Translate,OptimizationHints,MediaRouter"),
	}
	opts = append(opts, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// Start the browser without a deadline (a deadline on the first Run
	// would bound the browser's life).
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// consoleLog collects every error the page writes to its console:
// console.error calls, uncaught exceptions, browser log errors (failed
// loads, CSP violations).
type consoleLog struct {
	mu   sync.Mutex
	errs []string
}

func (l *consoleLog) start(ctx context.Context) {
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() || m.Type == chromedp.ConsoleWarning && m.Source == "security" {
				l.mu.Lock()
				l.errs = append(l.errs, fmt.Sprintf("%s (%s:%d)", m, m.URL, m.Line))
				l.mu.Unlock()
			}
		}
	}()
}

func (l *consoleLog) errors() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.errs...)
}

// errorsBut is errors without the browser's note of each request that a
// test made fail on purpose: one 400 answer per URL of refused, which
// must each be there once (a missing one is reported too).
func (l *consoleLog) errorsBut(refused ...string) []string {
	const note = "Failed to load resource: the server responded with a status of 400 (Bad Request)"
	errs := l.errors()
	for _, u := range refused {
		i := slices.Index(errs, fmt.Sprintf("error: %s (%s:0)", note, u))
		if i < 0 {
			errs = append(errs, "no 400 answer logged for "+u)
			continue
		}
		errs = slices.Delete(errs, i, i+1)
	}
	return errs
}

// step runs browser actions with a deadline and fails the test with what
// the step was for.
func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// until waits for a JavaScript expression to become true in the page; the
// step's deadline bounds the wait.
//
// It is not chromedp.Poll. Poll calls into the execution context that
// chromedp last recorded for the frame, and chromedp records contexts on a
// goroutine of its own, which can lag behind the load event that ends
// Navigate (it may be waiting on a DOM.getDocument reply). Right after a
// navigation to another site, which swaps the renderer process, Poll could
// name the previous document's context, gone by then: "Cannot find context
// with specified id". Runtime.evaluate without a context id runs in the
// document the frame holds when the browser receives it, which after the
// load event is the new one.
func until(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`new Promise((resolve, reject) => {
	const check = () => {
		let ok;
		try { ok = (%s); } catch (e) { reject(e); return; }
		if (ok) resolve(true); else setTimeout(check, 50);
	};
	check();
})`, expr), chromedp.EvalAwaitPromise)
}

// press clicks the first element sel selects, once it is there and shown,
// within one task of the page. A view's poll (every 1.5 s) redraws its
// tables with new elements: chromedp.Click's node, looked up before its
// mouse events, may be gone by then ("Could not find node with given id"),
// or be replaced between the press and the release (no click at all).
func press(sel string) chromedp.Action[chromedp.Void] {
	return until(fmt.Sprintf(`(e => e !== null && e.offsetParent !== null && (e.click(), true))(document.querySelector(%q))`, sel))
}

func textIs(sel, want string) chromedp.Action[chromedp.Void] {
	return until(fmt.Sprintf(`(document.querySelector(%q)||{}).textContent === %q`, sel, want))
}

// shotsDir is where screenshots go: $SMQD_CONSOLE_SCREENSHOTS, else a
// temporary directory.
func shotsDir(t *testing.T) string {
	if d := os.Getenv("SMQD_CONSOLE_SCREENSHOTS"); d != "" {
		return d
	}
	return t.TempDir()
}

// signIn opens the console at base and signs in with the test key.
func signIn(t *testing.T, ctx context.Context, base string) {
	t.Helper()
	step(t, ctx, "open the console", chromedp.Navigate(base+"/console/"), chromedp.WaitVisible(chromedp.CSS("#signin")))
	step(t, ctx, "sign in",
		chromedp.SendKeys(chromedp.CSS("#access-key-id"), testKeyID),
		chromedp.SendKeys(chromedp.CSS("#access-key-secret"), testSecret),
		chromedp.Click(chromedp.CSS("#signin-button")),
		chromedp.WaitVisible(chromedp.CSS("#create-queue")))
}

// pageText returns the text of the first element sel selects ("" if none).
func pageText(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q)||{}).textContent || ''`, sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// choose picks a select's option as a user does: the value, then a
// change event.
func choose(sel, value string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const s = document.querySelector(%q); s.value = %q; s.dispatchEvent(new Event('change')); })()`, sel, value))
}

func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The console, end to end: sign in, create a queue, send a message through
// the page, see the count change, peek it, receive and delete it, look at
// the metrics page. Any error in the page's console fails the test.
func TestConsoleInBrowser(t *testing.T) {
	env := startEnv(t, envConfig{serverOpts: func(o *Options) { o.Console = true }})
	ctx := browser(t)
	var log consoleLog
	log.start(ctx)
	shots := shotsDir(t)
	base := "http://" + env.addr

	step(t, ctx, "open the console", chromedp.Navigate(base+"/console/"), chromedp.WaitVisible(chromedp.CSS("#signin")))
	step(t, ctx, "type the access key",
		chromedp.SendKeys(chromedp.CSS("#access-key-id"), testKeyID),
		chromedp.SendKeys(chromedp.CSS("#access-key-secret"), testSecret))
	screenshot(t, ctx, shots, "console-signin.png")
	step(t, ctx, "sign in", chromedp.Click(chromedp.CSS("#signin-button")), chromedp.WaitVisible(chromedp.CSS("#create-queue")))

	// The session is in sessionStorage, never in a cookie.
	cookies, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.cookie`))
	if err != nil || cookies != "" {
		t.Errorf("cookies %q (%v)", cookies, err)
	}
	kept, err := chromedp.Run(ctx, chromedp.Evaluate[string](`sessionStorage.getItem('smqd.session') || ''`))
	if err != nil || !strings.Contains(kept, testSecret) {
		t.Errorf("session not in sessionStorage: %q (%v)", kept, err)
	}

	for _, q := range []string{"orders", "emails"} {
		step(t, ctx, "create queue "+q,
			chromedp.SendKeys(chromedp.CSS("#new-queue-name"), q),
			chromedp.Click(chromedp.CSS("#create-queue-button")),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-queue="`+q+`"]`)))
	}
	if _, err := env.broker.Queue("orders"); err != nil {
		t.Fatalf("the console's CreateQueue did not create the queue: %v", err)
	}
	// Some backlog on the other queue, so that the list shows counts.
	eq, _ := env.broker.Queue("emails")
	for i := range 5 {
		if _, err := eq.Send([]engine.SendEntry{{Body: []byte(fmt.Sprintf("mail %d", i))}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	step(t, ctx, "the list shows the backlog", textIs(`tr[data-queue="emails"] td.active`, "5"))
	screenshot(t, ctx, shots, "console-queues.png")

	step(t, ctx, "open the queue page",
		press(`tr[data-queue="orders"] a`),
		chromedp.WaitVisible(chromedp.CSS("#send-form")),
		textIs("#count-active", "0"))
	const body = "hello from the console <&>"
	step(t, ctx, "send a message",
		chromedp.SendKeys(chromedp.CSS("#send-body"), body),
		chromedp.SendKeys(chromedp.CSS("#send-priority"), "2"),
		chromedp.Click(chromedp.CSS("#send")),
		until(`document.querySelector('#send-result').className === 'note'`))
	step(t, ctx, "the count changes", textIs("#count-active", "1"))
	q, _ := env.broker.Queue("orders")
	if info, _ := q.Attributes(); info.Active != 1 {
		t.Fatalf("the broker holds %d active messages after the console's send", info.Active)
	}
	step(t, ctx, "peek the message",
		chromedp.Click(chromedp.CSS("#peek")),
		textIs("#peek-rows td.body", body))
	step(t, ctx, "receive it",
		chromedp.Click(chromedp.CSS("#receive")),
		textIs("#received-rows td.body", body),
		textIs("#count-inactive", "1"),
		textIs("#count-active", "0"))
	screenshot(t, ctx, shots, "console-queue.png")
	step(t, ctx, "delete it",
		chromedp.Click(chromedp.CSS("#received-rows button.delete-message")),
		until(`document.querySelector('#received-rows tr') === null`),
		textIs("#count-inactive", "0"))
	if info, _ := q.Attributes(); info.Active+info.Inactive+info.Delayed != 0 {
		t.Fatalf("the broker still holds the message: %+v", info)
	}

	step(t, ctx, "change an attribute",
		chromedp.SetValue(chromedp.CSS("#attr-VisibilityTimeout"), "45"),
		chromedp.Click(chromedp.CSS("#save-attrs")),
		until(`document.querySelector('#attrs-result').className === 'note'`))
	if info, _ := q.Attributes(); info.Config.VisibilityTimeout != 45*time.Second {
		t.Errorf("visibility timeout %v after the console's save", info.Config.VisibilityTimeout)
	}

	step(t, ctx, "the metrics page", chromedp.Navigate(base+"/console/#/metrics"),
		chromedp.WaitVisible(chromedp.CSS("#metric-queues")),
		until(`document.querySelector('#metric-active .v').textContent === '5'`),
		until(`document.querySelectorAll('#metrics-chart path').length === 2`)) // two polls drawn
	screenshot(t, ctx, shots, "console-metrics.png")
	// The topics page is offered (a single node serves the topic API);
	// the cluster page is not.
	hidden, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('a[data-view="topics"]').hidden`))
	if err != nil || hidden {
		t.Errorf("a single node hides the topics page (%v)", err)
	}
	hidden, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('a[data-view="cluster"]').hidden`))
	if err != nil || !hidden {
		t.Errorf("a single node offers the cluster page (%v)", err)
	}

	if errs := log.errors(); len(errs) > 0 {
		t.Errorf("the page logged %d error(s):\n%s", len(errs), strings.Join(errs, "\n"))
	}
}

// A page of another site cannot make a signed-in user's browser change
// anything: its form post and its fetch reach smqd without a signature.
// The server runs with --no-auth, where no signature would be needed: the
// browser's Sec-Fetch-Site (or Origin) is what refuses them, and the
// requests are seen to arrive (403 AccessDenied counted) and to change
// nothing.
func TestConsoleCrossSiteInBrowser(t *testing.T) {
	env := startEnv(t, envConfig{serverOpts: func(o *Options) { o.Console = true; o.NoAuth = true }})
	c := env.client()
	c.mustCreate("victim")
	api := "http://" + env.addr
	// The attacker's site: another host name (localhost, not 127.0.0.1),
	// so the browser calls its requests cross-site.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	evil := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/form":
			// enctype text/plain makes the body
			// <Message><MessageBody>csrf</MessageBody></Message><!--=-->
			// The test submits the form (as the page's own script
			// would) once the page has loaded, so that it can wait for
			// the navigation the submission starts.
			fmt.Fprintf(w, `<form id=f method=POST enctype="text/plain" action="%s/queues/victim/messages">
<input type=hidden name="<Message><MessageBody>csrf</MessageBody></Message><!--" value="-->"></form>`, api)
		case "/fetch":
			fmt.Fprintf(w, `<script>
fetch(%q, {method: 'POST', mode: 'no-cors', body: '<Message><MessageBody>csrf</MessageBody></Message>'})
  .finally(() => { document.title = 'sent' })</script>`, api+"/queues/victim/messages")
		}
	})}
	go evil.Serve(ln)
	t.Cleanup(func() { evil.Close() })
	ctx := browser(t)
	denied := func() float64 {
		return value(t, scrape(t, c), "smqd_http_errors_total", "code", "AccessDenied")
	}
	q, _ := env.broker.Queue("victim")
	sent := func() int64 {
		info, _ := q.Attributes()
		return info.Active
	}
	step(t, ctx, "open the attacker's form", chromedp.Navigate("http://localhost:"+port+"/form"))
	// Submitting the form navigates the tab to smqd's answer. RunResponse
	// returns once that document has loaded, so no navigation is in flight
	// when /fetch is opened (Navigate could take the form's load for its
	// own, and the wait after it would run in a document about to go).
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	resp, err := chromedp.RunResponse(sctx, chromedp.Evaluate[chromedp.Void](`document.getElementById('f').submit()`))
	cancel()
	if err != nil {
		t.Fatalf("the form post: %v", err)
	}
	if resp.URL != api+"/queues/victim/messages" || resp.Status != 403 {
		t.Errorf("the form post loaded %s with status %d, want smqd's 403", resp.URL, resp.Status)
	}
	// The browser has smqd's answer, so smqd has counted the refusal.
	if d := denied(); d != 1 {
		t.Errorf("%v cross-site requests refused after the form post, want 1", d)
	}
	if n := sent(); n != 0 {
		t.Fatalf("a cross-site form post sent %d message(s)", n)
	}
	step(t, ctx, "the fetch", chromedp.Navigate("http://localhost:"+port+"/fetch"), until(`document.title === 'sent'`))
	if d := denied(); d < 2 {
		t.Errorf("%v cross-site requests refused, want 2", d)
	}
	if n := sent(); n != 0 {
		t.Fatalf("a cross-site request sent %d message(s)", n)
	}
	// The same requests from a client (no browser headers) work: the
	// refusal is the browser check, not something else.
	wantStatus(t, c.post("/queues/victim/messages", sendBody("ok", "")), 201)
}

// Topics in the browser, checked in the broker: bad input (an invalid
// topic name, a queue endpoint whose queue does not exist, an over-long
// tag) shows the API's error and changes nothing; a topic is created with
// its attributes, a queue made on the Queues page and an HTTP endpoint
// are subscribed, a message published on the page reaches both (the
// push carries the MessageId the page shows), then the queue is
// unsubscribed and the topics are deleted, one from the list and one from
// its page.
func TestConsoleTopicsInBrowser(t *testing.T) {
	env := startEnv(t, envConfig{serverOpts: func(o *Options) { o.Console = true }})
	b := env.broker
	// An HTTP endpoint on loopback, where pushes may go by default.
	pushes := make(chan string, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		select {
		case pushes <- r.URL.Path + " " + string(body):
		default:
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(hook.Close)
	ctx := browser(t)
	var log consoleLog
	log.start(ctx)
	shots := shotsDir(t)
	api := "http://" + env.addr
	signIn(t, ctx, api)

	step(t, ctx, "create the queue inbox",
		chromedp.SendKeys(chromedp.CSS("#new-queue-name"), "inbox"),
		chromedp.Click(chromedp.CSS("#create-queue-button")),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-queue="inbox"]`)))
	step(t, ctx, "the topics page is offered and opens",
		chromedp.Click(chromedp.CSS(`a[data-view="topics"]`)),
		chromedp.WaitVisible(chromedp.CSS("#create-topic")),
		textIs("#topic-rows td", "No topics yet."))

	// refused runs a form's actions, waits for its result line (result)
	// to turn into an error and checks that it is the API's answer.
	refused := func(what, result, code string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		step(t, ctx, what, append(actions, until(fmt.Sprintf(`document.querySelector(%q).className === 'error'`, result)))...)
		if got := pageText(t, ctx, result); !strings.Contains(got, code+":") || !strings.Contains(got, "(HTTP 400, request ") {
			t.Errorf("%s: the page says %q, want the API's %s (HTTP 400) with its request id", what, got, code)
		}
	}
	refused("an invalid topic name", "#create-result", "TopicNameInvalid",
		chromedp.SendKeys(chromedp.CSS("#new-topic-name"), "-orders"),
		chromedp.Click(chromedp.CSS("#create-topic-button")))
	if names, _, err := b.ListTopics("", "", 1000); err != nil || len(names) != 0 {
		t.Fatalf("topics %q after an invalid name (%v)", names, err)
	}

	// createTopic fills in the form (size "" leaves it out) and checks
	// the topic the broker then holds.
	createTopic := func(name, size string, logging bool, want engine.TopicConfig) engine.TopicInfo {
		t.Helper()
		step(t, ctx, "create topic "+name,
			chromedp.SetValue(chromedp.CSS("#new-topic-name"), name),
			chromedp.SetValue(chromedp.CSS("#new-topic-size"), size),
			choose("#new-topic-logging", fmt.Sprint(logging)),
			chromedp.Click(chromedp.CSS("#create-topic-button")),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-topic="`+name+`"]`)))
		info, err := b.GetTopicAttributes(name)
		if err != nil || info.Config != want {
			t.Fatalf("%s after the console's create: %+v (%v), want %+v", name, info, err, want)
		}
		return info
	}
	info := createTopic("orders", "4096", true, engine.TopicConfig{MaxMessageBytes: 4096, LoggingEnabled: true})
	createTopic("audit", "", false, engine.DefaultTopicConfig())

	step(t, ctx, "open the topic page",
		press(`tr[data-topic="orders"] a`),
		chromedp.WaitVisible(chromedp.CSS("#subscribe-form")),
		textIs("#topic-max-size", "4,096"),
		textIs("#topic-logging", "on"),
		textIs("#topic-retention", "86,400"),
		textIs("#topic-messages", "0"),
		textIs("#sub-rows td", "No subscriptions yet."))
	created := info.CreateTime.UTC().Format("2006-01-02 15:04:05Z")
	if got := pageText(t, ctx, "#topic-times"); !strings.Contains(got, "Created "+created) {
		t.Errorf("the page says %q, want the creation time %s", got, created)
	}

	refused("subscribe a queue that does not exist", "#subscribe-result", "EndpointInvalid",
		chromedp.SendKeys(chromedp.CSS("#sub-name"), "to-inbox"),
		chromedp.SendKeys(chromedp.CSS("#sub-queue"), "nosuch"),
		chromedp.Click(chromedp.CSS("#subscribe")))
	if names, _, err := b.ListSubscriptions("orders", "", "", 100); err != nil || len(names) != 0 {
		t.Fatalf("subscriptions %q after a bad endpoint (%v)", names, err)
	}
	step(t, ctx, "subscribe the queue",
		chromedp.SetValue(chromedp.CSS("#sub-queue"), "inbox"),
		choose("#sub-format", "SIMPLIFIED"),
		chromedp.Click(chromedp.CSS("#subscribe")),
		textIs(`tr[data-subscription="to-inbox"] td.endpoint`, "acs:mns:local:0:queues/inbox"))
	sub, err := b.GetSubscriptionAttributes("orders", "to-inbox")
	if err != nil || sub.Config.Endpoint != "acs:mns:local:0:queues/inbox" || sub.Config.Format.String() != "SIMPLIFIED" || sub.Config.FilterTag != "" {
		t.Fatalf("to-inbox after the console's subscribe: %+v (%v)", sub, err)
	}
	step(t, ctx, "subscribe the HTTP endpoint",
		chromedp.SetValue(chromedp.CSS("#sub-name"), "to-hook"),
		choose("#sub-kind", "http"),
		chromedp.WaitVisible(chromedp.CSS("#sub-url")),
		chromedp.WaitNotVisible(chromedp.CSS("#sub-queue")),
		chromedp.SendKeys(chromedp.CSS("#sub-url"), hook.URL+"/notify"),
		choose("#sub-strategy", "EXPONENTIAL_DECAY_RETRY"),
		choose("#sub-format", "JSON"),
		chromedp.SendKeys(chromedp.CSS("#sub-tag"), "news"),
		chromedp.Click(chromedp.CSS("#subscribe")),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-subscription="to-hook"]`)))
	sub, err = b.GetSubscriptionAttributes("orders", "to-hook")
	if err != nil || sub.Config.Endpoint != hook.URL+"/notify" || sub.Config.Strategy.String() != "EXPONENTIAL_DECAY_RETRY" ||
		sub.Config.Format.String() != "JSON" || sub.Config.FilterTag != "news" {
		t.Fatalf("to-hook after the console's subscribe: %+v (%v)", sub, err)
	}

	inbox, _ := b.Queue("inbox")
	refused("publish with an over-long tag", "#publish-result", "InvalidArgument",
		chromedp.SendKeys(chromedp.CSS("#publish-body"), "not sent"),
		chromedp.SendKeys(chromedp.CSS("#publish-tag"), "seventeen-chars!!"),
		chromedp.Click(chromedp.CSS("#publish")))
	if qi, _ := inbox.Attributes(); qi.Active != 0 {
		t.Fatalf("a refused publish put %d message(s) in the queue", qi.Active)
	}
	const body = "hello topic <&>"
	step(t, ctx, "publish",
		chromedp.SetValue(chromedp.CSS("#publish-body"), body),
		chromedp.SetValue(chromedp.CSS("#publish-tag"), "news"),
		chromedp.Click(chromedp.CSS("#publish")),
		until(`document.querySelector('#publish-result').className === 'note'`),
		textIs("#topic-messages", "1"))
	id := regexp.MustCompile(`message ([0-9A-F]{32}) `).FindStringSubmatch(pageText(t, ctx, "#publish-result"))
	if id == nil {
		t.Fatalf("no MessageId in %q", pageText(t, ctx, "#publish-result"))
	}
	step(t, ctx, "scroll to the top", chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
	screenshot(t, ctx, shots, "console-topic.png")
	// The queue has the message (SIMPLIFIED: the body alone).
	waitFor(t, "the message in the queue", 10*time.Second, func() bool {
		qi, _ := inbox.Attributes()
		return qi.Active == 1
	})
	m, err := inbox.ReceiveOne(context.Background(), 0)
	if err != nil || string(m.Body) != body {
		t.Fatalf("the queue's message %q (%v), want %q", m.Body, err, body)
	}
	// The endpoint has it, with the id the page showed.
	select {
	case p := <-pushes:
		if !strings.HasPrefix(p, "/notify {") || !strings.Contains(p, `"MessageId":"`+id[1]+`"`) || !strings.Contains(p, `"MessageTag":"news"`) {
			t.Errorf("push %s, want message %s tagged news", p, id[1])
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no push reached the HTTP endpoint")
	}

	step(t, ctx, "unsubscribe the queue",
		press(`tr[data-subscription="to-inbox"] button.unsubscribe`),
		press(`tr[data-subscription="to-inbox"] button.unsubscribe-confirm`),
		until(`document.querySelector('tr[data-subscription="to-inbox"]') === null`),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-subscription="to-hook"]`)))
	if _, err := b.GetSubscriptionAttributes("orders", "to-inbox"); !errors.Is(err, engine.ErrSubscriptionNotExist) {
		t.Fatalf("to-inbox after the console's unsubscribe: %v", err)
	}

	step(t, ctx, "the list shows the count",
		chromedp.Click(chromedp.CSS(`a[data-view="topics"]`)),
		textIs(`tr[data-topic="orders"] td.messages`, "1"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-topic="audit"]`)))
	screenshot(t, ctx, shots, "console-topics.png")
	step(t, ctx, "ask to delete audit",
		press(`tr[data-topic="audit"] button.delete-topic`),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-topic="audit"] button.delete-topic-confirm`)))
	if _, err := b.GetTopicAttributes("audit"); err != nil {
		t.Fatalf("the first click deleted audit: %v", err)
	}
	step(t, ctx, "delete audit from the list",
		press(`tr[data-topic="audit"] button.delete-topic-confirm`),
		until(`document.querySelector('tr[data-topic="audit"]') === null`))
	if _, err := b.GetTopicAttributes("audit"); !errors.Is(err, engine.ErrTopicNotExist) {
		t.Fatalf("audit after the console's delete: %v", err)
	}
	step(t, ctx, "delete orders from its page",
		press(`tr[data-topic="orders"] a`),
		press("#delete-topic"),
		press("#delete-topic-confirm"),
		until(`location.hash === '#/topics'`),
		textIs("#topic-rows td", "No topics yet."))
	if names, _, err := b.ListTopics("", "", 1000); err != nil || len(names) != 0 {
		t.Fatalf("topics %q after the console's deletes (%v)", names, err)
	}
	if _, err := b.Queue("inbox"); err != nil {
		t.Errorf("deleting the topic took its subscriber's queue: %v", err)
	}

	// The three refusals above, and nothing else.
	if errs := log.errorsBut(api+"/topics/-orders", api+"/topics/orders/subscriptions/to-inbox", api+"/topics/orders/messages"); len(errs) > 0 {
		t.Errorf("the page logged %d error(s):\n%s", len(errs), strings.Join(errs, "\n"))
	}
}
