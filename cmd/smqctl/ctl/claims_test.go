package ctl

// Tests of docs/operations.md's smqctl claims (## smqctl, and "Moving to
// another smqd") that no other test held (smqctl audit, 2026-12-07).

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
)

// gate is a proxy in front of a daemon's API: each request it matches (a
// POST of messages, a send or a batch send, for gate) is first shown to
// hook, which may hold it back, or answer it by closing the connection (a
// destination that went down: no answer at all).
type gate struct {
	addr string
	hook func(n int) (hold time.Duration, drop bool) // n: 1 for the first request matched
	mu   sync.Mutex
	n    int
	// statuses: the answers to the requests matched and passed on.
	statuses []int
}

// answers waits (at most 20 s: the recording of an answer the client
// already read may lag behind it on a loaded machine) until n requests
// matched were answered, and returns their statuses.
func (g *gate) answers(n int) []int {
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		g.mu.Lock()
		got := slices.Clone(g.statuses)
		g.mu.Unlock()
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
	}
}

// statusRecorder keeps the status a handler answered with.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// gate puts a gate in front of the daemon for its sends (POST of messages).
func (d *daemon) gate(t *testing.T, hook func(n int) (time.Duration, bool)) *gate {
	t.Helper()
	return d.gateMatching(t, func(r *http.Request) bool {
		return r.Method == "POST" && strings.HasSuffix(r.URL.Path, "/messages")
	}, hook)
}

// gateMatching puts a gate in front of the daemon for the requests match
// picks.
func (d *daemon) gateMatching(t *testing.T, match func(*http.Request) bool, hook func(n int) (time.Duration, bool)) *gate {
	t.Helper()
	g := &gate{hook: hook}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: d.addr})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if match(r) {
			g.mu.Lock()
			g.n++
			n := g.n
			g.mu.Unlock()
			hold, drop := g.hook(n)
			if hold > 0 {
				t := time.NewTimer(hold)
				select {
				case <-t.C:
				case <-r.Context().Done():
					t.Stop()
				}
			}
			if drop {
				if hj, ok := w.(http.Hijacker); ok {
					if c, _, err := hj.Hijack(); err == nil {
						c.Close()
						return
					}
				}
				panic(http.ErrAbortHandler)
			}
		}
		if !match(r) {
			rp.ServeHTTP(w, r)
			return
		}
		rec := &statusRecorder{ResponseWriter: w, status: 200}
		rp.ServeHTTP(rec, r)
		g.mu.Lock()
		g.statuses = append(g.statuses, rec.status)
		g.mu.Unlock()
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	g.addr = ln.Addr().String()
	return g
}

// bodies is the sorted bodies of every visible message of q.
func bodies(t *testing.T, q *engine.Queue) []string {
	t.Helper()
	var out []string
	for _, m := range all(t, q) {
		out = append(out, string(m.Body))
	}
	sort.Strings(out)
	return out
}

// waitVisible waits (bounded) until nothing of q is invisible: what an
// interrupted run left invisible comes back with its visibility timeout.
func waitVisible(t *testing.T, q *engine.Queue) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := q.Attributes()
		if err != nil {
			t.Fatal(err)
		}
		if info.Inactive+info.Delayed == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: messages still invisible: %+v", q.Name(), info)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// manyToMove starts a source and a destination, the source's queue work
// (visibility timeout vis) holding n messages whose bodies are prefix
// written 1 to n times; it returns those bodies sorted.
func manyToMove(t *testing.T, vis time.Duration, n int, prefix string) (src, dst *daemon, q *engine.Queue, want []string) {
	src, dst = startDaemon(t), startDaemon(t)
	q = src.queueWith(t, "work", func(cfg *engine.QueueConfig) { cfg.VisibilityTimeout = vis })
	for i := range n {
		b := strings.Repeat(prefix, 1+i)
		want = append(want, b)
		sendEntries(t, q, engine.SendEntry{Body: []byte(b)})
	}
	sort.Strings(want)
	return src, dst, q, want
}

// oneMessageToMove starts a source and a destination, each with a queue
// work whose visibility timeout is 1 s, the source's holding one message.
func oneMessageToMove(t *testing.T) (src, dst *daemon) {
	src, dst = startDaemon(t), startDaemon(t)
	q := src.queueWith(t, "work", func(cfg *engine.QueueConfig) { cfg.VisibilityTimeout = time.Second })
	sendEntries(t, q, engine.SendEntry{Body: []byte("once")})
	dst.queueWith(t, "work", func(cfg *engine.QueueConfig) { cfg.VisibilityTimeout = time.Second })
	return src, dst
}

// holdFirstSend gates the daemon's sends, holding back the first for
// 2.5 s: 2.5 visibility timeouts of 1 s.
func (d *daemon) holdFirstSend(t *testing.T) *gate {
	return d.gate(t, func(n int) (time.Duration, bool) {
		if n == 1 {
			return 2500 * time.Millisecond, false
		}
		return 0, false
	})
}

// A copy whose send outlasts the source queue's visibility timeout: the
// original is kept invisible meanwhile (keep.go), so its delete finds it
// and the destination holds it once. Until 2026-12-07 it became visible
// again, the delete missed, and a later round copied it a second time
// (seen again with the keeping disabled: 2 copies, exit 1).
func TestMigrateCopyOutlastingVisibilityIsMovedOnce(t *testing.T) {
	src, dst := oneMessageToMove(t)
	g := dst.holdFirstSend(t)
	r := src.ctl(t).run("migrate", "--to", g.addr, "--wait", "10s")
	dq, _ := dst.b.Queue("work")
	if got := bodies(t, dq); len(got) != 1 {
		t.Fatalf("the destination holds %q, want the one message once", got)
	}
	if info := src.info(t, "work"); info.Active+info.Inactive+info.Delayed != 0 {
		t.Fatalf("the source still holds %+v", info)
	}
	if r.code != ExitOK || strings.Contains(r.stdout, "twice") {
		t.Errorf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
}

// A migration whose copy was stored but whose delete at the source missed
// (the copy's send outlasted the source queue's visibility timeout, and
// the source refused to keep the original invisible) has put, or will
// put, that message twice at the destination. The run said so in a line
// ("still at the source ... a later run moves them again") that was false
// (its next round had moved the original already) and exited 0; a
// redrive in the same case exits 1, "which a script must see". (Seen:
// exit 0, the destination holding 2 copies of 1 message.)
func TestMigrateCopiedNotDeletedExits1(t *testing.T) {
	src, dst := oneMessageToMove(t)
	// The first copy's answer comes after the original's receive expired.
	g := dst.holdFirstSend(t)
	// And the source drops every change of visibility (keep.go's).
	sg := src.gateMatching(t, func(r *http.Request) bool {
		return r.Method == "PUT" && r.URL.Query().Has("VisibilityTimeout")
	}, func(int) (time.Duration, bool) { return 0, true })
	c := src.ctl(t)
	c.env["SMQ_ENDPOINT"] = "http://" + sg.addr
	r := c.run("migrate", "--to", g.addr, "--wait", "10s")
	dq, _ := dst.b.Queue("work")
	if got := bodies(t, dq); len(got) != 2 {
		t.Fatalf("the destination holds %q (this test wants the duplicate made)", got)
	}
	if info := src.info(t, "work"); info.Active+info.Inactive+info.Delayed != 0 {
		t.Fatalf("the source still holds %+v (this test wants the original moved again)", info)
	}
	if r.code != ExitError || strings.Contains(r.stdout, "still at the source") || !strings.Contains(r.stdout, "twice") {
		t.Errorf("a migration that made a duplicate: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
}

// "A message is never lost; an interrupted run leaves some in both
// places (at least once) ... Run it again later; a second run ... moves
// only what is left." Interrupted (Ctrl-C: its context ends) while a
// batch's copy is on its way, then run again: every message is at the
// destination, none at the source.
func TestMigrateInterruptedThenAgain(t *testing.T) {
	src, dst, q, want := manyToMove(t, 5*time.Second, 64, "m")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := dst.gate(t, func(n int) (time.Duration, bool) {
		if n == 2 { // the second batch: interrupted while it is sent, and not stored
			cancel()
			return 0, true
		}
		return 0, false
	})
	c := src.ctl(t)
	var out, errb bytes.Buffer
	code := Run(ctx, []string{"migrate", "--to", g.addr, "--parallel", "1", "--json"}, Env{
		Getenv: func(k string) string { return c.env[k] }, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Dir: c.dir,
	})
	if code != ExitError {
		t.Fatalf("interrupted migrate: exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	decodeJSON[migration](t, out.String()) // what was done is printed
	waitVisible(t, q)
	c.ok("migrate", "--to", g.addr, "--wait", "10s")
	movedAll(t, src, dst, want)
}

// The destination goes down midway (no answer at all, past the retries):
// the run exits 1 having printed what it did; run again once it is back,
// every message is there and none at the source.
func TestMigrateDestinationDownThenAgain(t *testing.T) {
	src, dst, q, want := manyToMove(t, 12*time.Second, 48, "d") // the timeout outlasts the retries (7.75 s)
	var down atomic.Bool
	g := dst.gate(t, func(n int) (time.Duration, bool) {
		if n == 2 {
			down.Store(true) // from the second batch on
		}
		return 0, down.Load()
	})
	c := src.ctl(t)
	r := c.fail(ExitError, "migrate", "--to", g.addr, "--parallel", "1", "--json")
	if m := decodeJSON[migration](t, r.stdout); m.Moved["work"] != 16 {
		t.Errorf("the run cut short: %+v", m)
	}
	down.Store(false)
	waitVisible(t, q)
	c.ok("migrate", "--to", g.addr, "--wait", "10s")
	movedAll(t, src, dst, want)
}

// A copy keeps its body byte for byte (carriage returns, '%', '+',
// spaces, non-ASCII, XML's own characters) and its properties of every
// type, the system ones too.
func TestMigrateOddBodiesAndProperties(t *testing.T) {
	src, dst := startDaemon(t), startDaemon(t)
	c := src.ctl(t)
	c.ok("queue", "create", "odd")
	odd := []string{"a\r\nb\rc", "100% + 1 = ü ✓", "<x a=\"1\">&amp;</x>]]>", "  spaced\t "}
	for _, b := range odd {
		c.stdin = b
		c.ok("send", "odd", "--priority", "2", "--property", "sp ace=v %+ü", "--property", "n:NUMBER=3",
			"--property", "ok:BOOLEAN=true", "--property", "bin:BINARY=AAEC/w==",
			"--system-property", "traceparent=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	}
	c.stdin = ""
	before := decodeJSON[[]Message](t, c.ok("peek", "odd", "--count", "16", "--json"))
	m := decodeJSON[migration](t, c.ok("migrate", "--to", dst.addr, "--json"))
	if m.Moved["odd"] != len(odd) {
		t.Fatalf("migrate: %+v", m)
	}
	after := decodeJSON[[]Message](t, dst.ctl(t).ok("peek", "odd", "--count", "16", "--json"))
	key := func(ms []Message) []string {
		var out []string
		for _, m := range ms {
			out = append(out, strings.Join([]string{m.MessageBody, m.MessageBodyMD5, string(rune('0' + m.Priority)),
				propsString(m.UserProperties), propsString(m.SystemProperties)}, "|"))
		}
		sort.Strings(out)
		return out
	}
	if b, a := key(before), key(after); strings.Join(a, "\n") != strings.Join(b, "\n") || len(a) != len(odd) {
		t.Errorf("at the source:\n%q\nat the destination:\n%q", b, a)
	}
}

func propsString(ps []Property) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.Name + "=" + p.Value + ":" + p.Type + ";")
	}
	return b.String()
}

// "Flags win over the environment; --credentials-file wins over the
// environment's keys." (TestCredentialsAndErrors gave --endpoint the
// address $SMQ_ENDPOINT held already, and no environment keys beside
// --credentials-file.)
func TestConnectionSettingsPrecedence(t *testing.T) {
	d := startDaemon(t)
	c := d.ctl(t)
	c.ok("queue", "create", "q")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()

	far := &ctl{t: t, dir: t.TempDir(), env: map[string]string{"SMQ_ENDPOINT": "http://" + closed,
		"ALIBABA_CLOUD_ACCESS_KEY_ID": keyID, "ALIBABA_CLOUD_ACCESS_KEY_SECRET": keySecret}}
	far.fail(ExitError, "queue", "ls")
	if out := far.ok("queue", "ls", "--quiet", "--endpoint", d.addr); out != "q\n" {
		t.Errorf("--endpoint over $SMQ_ENDPOINT: %q", out)
	}
	// A key refused by the server in the file, a good one in the
	// environment: the file's is used, and refused.
	file := filepath.Join(t.TempDir(), "credentials")
	if err := os.WriteFile(file, []byte(keyID+" wrong-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.fail(ExitAuth, "queue", "ls", "--credentials-file", file)
	// And the flags over both.
	if out := c.ok("queue", "ls", "--quiet", "--credentials-file", file, "--access-key-id", keyID, "--access-key-secret", keySecret); out != "q\n" {
		t.Errorf("the key flags over --credentials-file: %q", out)
	}
}

// "Both complete commands": every command of smqctl (the groups, the
// top-level verbs and the shortcuts) is in both scripts' command list,
// which completion.go writes out by hand.
func TestCompletionNamesEveryCommand(t *testing.T) {
	c := &ctl{t: t, dir: t.TempDir(), env: map[string]string{}}
	var names []string
	for g, vs := range groups() {
		if g != "" {
			names = append(names, g)
			continue
		}
		for v := range vs {
			names = append(names, v)
		}
	}
	for s := range shortcuts {
		names = append(names, s)
	}
	sort.Strings(names)
	bash := c.ok("completion", "bash")
	_, rest, _ := strings.Cut(bash, `"") COMPREPLY=($(compgen -W "`)
	bashTop, _, _ := strings.Cut(rest, `"`)
	zsh := c.ok("completion", "zsh")
	_, rest, _ = strings.Cut(zsh, "top=(")
	zshTop, _, _ := strings.Cut(rest, ")")
	for _, top := range []struct{ shell, list string }{{"bash", bashTop}, {"zsh", zshTop}} {
		have := map[string]bool{}
		for _, w := range strings.Fields(top.list) {
			have[w] = true
		}
		for _, n := range names {
			if !have[n] {
				t.Errorf("%s completion: command %q missing from %q", top.shell, n, top.list)
			}
		}
	}
}

// A queue deleted at the source while the migration runs (after its
// definitions were made) is skipped, as one deleted before is ("deleted
// at the source meanwhile"): the other queues' messages still move.
func TestMigrateSkipsAQueueDeletedMeanwhile(t *testing.T) {
	src, dst := startDaemon(t), startDaemon(t)
	a := src.queueWith(t, "a", nil)
	b := src.queueWith(t, "b", nil)
	c3 := src.queueWith(t, "c", nil)
	for _, q := range []*engine.Queue{a, b, c3} {
		sendEntries(t, q, engine.SendEntry{Body: []byte(q.Name())})
	}
	g := dst.gate(t, func(n int) (time.Duration, bool) {
		if n == 1 { // a's messages: b goes meanwhile
			if err := src.b.DeleteQueue("b"); err != nil {
				t.Error(err)
			}
		}
		return 0, false
	})
	r := src.ctl(t).run("migrate", "--to", g.addr, "--json")
	if r.code != ExitOK {
		t.Fatalf("migrate: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if m := decodeJSON[migration](t, r.stdout); m.Moved["a"] != 1 || m.Moved["c"] != 1 || len(m.Left) != 0 {
		t.Errorf("migrate: %+v", m)
	}
}

// movedAll checks that queue "work" is empty at src and that dst's holds
// every body of want.
func movedAll(t *testing.T, src, dst *daemon, want []string) {
	t.Helper()
	if info := src.info(t, "work"); info.Active+info.Inactive+info.Delayed != 0 {
		t.Fatalf("the source still holds %+v", info)
	}
	dq, _ := dst.b.Queue("work")
	got := bodies(t, dq)
	seen := map[string]bool{}
	for _, b := range got {
		seen[b] = true
	}
	for _, b := range want {
		if !seen[b] {
			t.Fatalf("message %q lost: the destination holds %d messages", b, len(got))
		}
	}
}
