package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/server"
)

const (
	keyID     = "ctlid"
	keySecret = "ctlsecret"
)

// daemon is a freshly started smqd (the engine and server smqd runs) on
// 127.0.0.1:0.
type daemon struct {
	b    *engine.Broker
	addr string
}

func startDaemon(t *testing.T) *daemon { return startDaemonWith(t, engine.Options{}) }

// startDaemonWith starts smqd's engine with eo (Dir: durable).
func startDaemonWith(t testing.TB, eo engine.Options) *daemon {
	t.Helper()
	b, err := engine.Open(eo)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(b, server.Options{Credentials: map[string]string{keyID: keySecret}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		b.Close()
	})
	return &daemon{b: b, addr: ln.Addr().String()}
}

// result is one smqctl run.
type result struct {
	code           int
	stdout, stderr string
}

// ctl runs smqctl with the daemon's endpoint and key in the environment.
type ctl struct {
	t     testing.TB
	env   map[string]string
	dir   string
	stdin string
	tty   bool
}

func (d *daemon) ctl(t testing.TB) *ctl { return ctlAt(t, "http://"+d.addr) }

// ctlAt runs smqctl against endpoint (a daemon, or a test's fake server)
// with the test key.
func ctlAt(t testing.TB, endpoint string) *ctl {
	return &ctl{t: t, dir: t.TempDir(), env: map[string]string{
		"SMQ_ENDPOINT":                    endpoint,
		"ALIBABA_CLOUD_ACCESS_KEY_ID":     keyID,
		"ALIBABA_CLOUD_ACCESS_KEY_SECRET": keySecret,
	}}
}

func (c *ctl) run(args ...string) result {
	c.t.Helper()
	var out, errb bytes.Buffer
	code := Run(context.Background(), args, Env{
		Getenv: func(k string) string { return c.env[k] },
		Stdin:  strings.NewReader(c.stdin),
		Stdout: &out,
		Stderr: &errb,
		TTY:    c.tty,
		Dir:    c.dir,
	})
	return result{code, out.String(), errb.String()}
}

// ok runs and wants exit 0.
func (c *ctl) ok(args ...string) string {
	c.t.Helper()
	r := c.run(args...)
	if r.code != ExitOK {
		c.t.Fatalf("smqctl %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// fail runs and wants the exit code, and something on stderr.
func (c *ctl) fail(code int, args ...string) result {
	c.t.Helper()
	r := c.run(args...)
	if r.code != code {
		c.t.Fatalf("smqctl %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, code, r.stdout, r.stderr)
	}
	if r.stderr == "" {
		c.t.Errorf("smqctl %s: exit %d without a message", strings.Join(args, " "), code)
	}
	return r
}

func decodeJSON[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, s)
	}
	return v
}

func (d *daemon) info(t *testing.T, name string) engine.QueueInfo {
	t.Helper()
	q, err := d.b.Queue(name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := q.Attributes()
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func TestQueueCommands(t *testing.T) {
	d := startDaemon(t)
	c := d.ctl(t)
	if out := c.ok("queue", "create", "demo", "--visibility-timeout", "60", "--delay", "0", "--polling-wait", "2s",
		"--retention", "1h", "--max-message-size", "2048", "--logging"); !strings.Contains(out, "created queue demo") {
		t.Errorf("create: %q", out)
	}
	info := d.info(t, "demo")
	if cfg := info.Config; cfg.VisibilityTimeout != time.Minute || cfg.PollingWait != 2*time.Second || cfg.Retention != time.Hour || cfg.MaxMessageBytes != 2048 || !cfg.LoggingEnabled {
		t.Errorf("attributes after create: %+v", cfg)
	}
	// Flags before the name work too; an identical create is not an error.
	if out := c.ok("queue", "create", "--visibility-timeout", "1m", "--polling-wait", "2", "--retention", "3600", "--max-message-size", "2048", "--logging=true", "demo"); !strings.Contains(out, "exists") {
		t.Errorf("second create: %q", out)
	}
	c.fail(ExitError, "queue", "create", "demo", "--visibility-timeout", "5") // QueueAlreadyExist, 409
	c.ok("queue", "create", "other")

	out := c.ok("queue", "ls")
	if !strings.Contains(out, "QUEUE") || !strings.Contains(out, "demo") || !strings.Contains(out, "other") {
		t.Errorf("ls:\n%s", out)
	}
	qs := decodeJSON[[]Queue](t, c.ok("queue", "ls", "--json"))
	if len(qs) != 2 || qs[0].Name != "demo" || qs[0].VisibilityTimeout != 60 {
		t.Errorf("ls --json: %+v", qs)
	}
	if out := c.ok("queue", "ls", "--quiet", "--prefix", "ot"); out != "other\n" {
		t.Errorf("ls --quiet --prefix ot: %q", out)
	}
	if out := c.ok("queue", "get", "demo"); !strings.Contains(out, "VisibilityTimeout") || !strings.Contains(out, "1m0s") {
		t.Errorf("get:\n%s", out)
	}
	q := decodeJSON[Queue](t, c.ok("--json", "queue", "get", "demo"))
	if q.Name != "demo" || q.PollingWaitSeconds != 2 || !q.LoggingEnabled {
		t.Errorf("get --json: %+v", q)
	}
	c.fail(ExitNotFound, "queue", "get", "missing")

	c.ok("queue", "set", "demo", "--visibility-timeout", "90s", "--logging=false")
	if cfg := d.info(t, "demo").Config; cfg.VisibilityTimeout != 90*time.Second || cfg.LoggingEnabled || cfg.PollingWait != 2*time.Second {
		t.Errorf("attributes after set: %+v", cfg)
	}
	// The dead-letter policy: set, shown, refused when bad, turned off.
	c.ok("queue", "set", "demo", "--dead-letter-queue", "other", "--max-receive-count", "4")
	if cfg := d.info(t, "demo").Config; cfg.DeadLetterQueue != "other" || cfg.MaxReceiveCount != 4 {
		t.Errorf("dead-letter policy after set: %+v", cfg)
	}
	if out := c.ok("queue", "get", "demo"); !strings.Contains(out, "DeadLetterTargetQueue") || !strings.Contains(out, "other") {
		t.Errorf("get with a dead-letter policy:\n%s", out)
	}
	if q := decodeJSON[Queue](t, c.ok("--json", "queue", "get", "demo")); q.DeadLetterTargetQueue != "other" || q.MaxReceiveCount != 4 {
		t.Errorf("get --json with a dead-letter policy: %+v", q)
	}
	c.fail(ExitError, "queue", "set", "demo", "--dead-letter-queue", "demo", "--max-receive-count", "4") // InvalidArgument: itself
	c.fail(ExitError, "queue", "create", "dl2", "--dead-letter-queue", "missing", "--max-receive-count", "4")
	c.ok("queue", "set", "demo", "--dead-letter-queue", "")
	if cfg := d.info(t, "demo").Config; cfg.DeadLetterQueue != "" || cfg.MaxReceiveCount != 0 {
		t.Errorf("dead-letter policy after turning it off: %+v", cfg)
	}
	c.fail(ExitUsage, "queue", "set", "demo")
	c.fail(ExitNotFound, "queue", "set", "missing", "--delay", "1")
	c.fail(ExitError, "queue", "set", "demo", "--visibility-timeout", "0") // InvalidArgument from the server
	c.fail(ExitUsage, "queue", "set", "demo", "--visibility-timeout", "1.5s")
	c.fail(ExitUsage, "queue", "create", "bad", "--max-message-size", "big")

	c.ok("queue", "rm", "other")
	if _, err := d.b.Queue("other"); err == nil {
		t.Error("rm left the queue")
	}
	c.fail(ExitNotFound, "queue", "rm", "other")
	c.fail(ExitUsage, "queue", "rm")
	c.fail(ExitUsage, "queue")
	c.fail(ExitUsage, "queue", "frobnicate")
}

func TestMessageCommands(t *testing.T) {
	d := startDaemon(t)
	c := d.ctl(t)
	c.ok("queue", "create", "q")

	id := strings.TrimSpace(c.ok("send", "q", "from an argument", "--priority", "1"))
	if len(id) != 32 {
		t.Errorf("send printed %q", id)
	}
	file := filepath.Join(t.TempDir(), "body.txt")
	os.WriteFile(file, []byte("from a file"), 0o600)
	c.ok("message", "send", "q", "--file", file)
	c.stdin = "from stdin"
	sent := decodeJSON[map[string]string](t, c.ok("send", "q", "--json"))
	if sent["message_id"] == "" || sent["body_md5"] == "" {
		t.Errorf("send --json: %v", sent)
	}
	c.stdin = ""
	c.ok("send", "q", "later", "--delay", "1h")
	if info := d.info(t, "q"); info.Active != 3 || info.Delayed != 1 {
		t.Fatalf("after sends: %+v", info)
	}
	c.fail(ExitUsage, "send", "q", "x", "--priority", "17")
	c.fail(ExitUsage, "send", "q", "x", "--file", file)
	c.fail(ExitUsage, "send", "q") // empty stdin
	c.fail(ExitUsage, "send", "q", "x", "--file", "/nonexistent/file")
	c.fail(ExitNotFound, "send", "missing", "x")

	peeked := decodeJSON[[]Message](t, c.ok("peek", "q", "--count", "16", "--json"))
	if len(peeked) != 3 || peeked[0].MessageBody != "from an argument" || peeked[0].Priority != 1 || peeked[0].ReceiptHandle != "" {
		t.Errorf("peek --json: %+v", peeked)
	}
	if out := c.ok("message", "peek", "q", "--raw"); out != "from an argument\n" {
		t.Errorf("peek --raw: %q", out)
	}
	if out := c.ok("peek", "q", "--count", "3"); !strings.Contains(out, "from a file") || !strings.Contains(out, "MESSAGE ID") {
		t.Errorf("peek:\n%s", out)
	}
	c.fail(ExitUsage, "peek", "q", "--count", "0")
	c.fail(ExitNotFound, "peek", "missing")

	got := decodeJSON[[]Message](t, c.ok("receive", "q", "--count", "2", "--json"))
	if len(got) != 2 || got[0].ReceiptHandle == "" || got[0].DequeueCount != 1 {
		t.Fatalf("receive --json: %+v", got)
	}
	vis := decodeJSON[map[string]any](t, c.ok("message", "visibility", "q", got[0].ReceiptHandle, "2m", "--json"))
	newHandle, _ := vis["receipt_handle"].(string)
	if newHandle == "" || newHandle == got[0].ReceiptHandle {
		t.Fatalf("visibility: %v", vis)
	}
	if out := c.ok("message", "visibility", "q", newHandle, "90"); !strings.Contains(out, "RECEIPT HANDLE") {
		t.Errorf("visibility:\n%s", out)
	}
	c.fail(ExitUsage, "message", "visibility", "q", newHandle, "13h")
	c.fail(ExitUsage, "message", "visibility", "q", newHandle)
	// The first handle died with the visibility change.
	if r := c.run("message", "delete", "q", got[0].ReceiptHandle); r.code == ExitOK {
		t.Errorf("delete with a dead handle: %+v", r)
	}
	if out := c.ok("message", "delete", "q", got[1].ReceiptHandle); !strings.Contains(out, "deleted 1") {
		t.Errorf("delete: %q", out)
	}
	c.fail(ExitNotFound, "message", "delete", "q", got[1].ReceiptHandle) // used: MessageNotExist
	c.fail(ExitUsage, "message", "delete", "q")

	// receive --delete takes the last active one and deletes it.
	if out := c.ok("receive", "q", "--delete", "--raw"); out != "from stdin\n" {
		t.Errorf("receive --delete --raw: %q", out)
	}
	if info := d.info(t, "q"); info.Active != 0 || info.Inactive != 1 || info.Delayed != 1 {
		t.Errorf("after receive --delete: %+v", info)
	}
	// An empty queue is not an error.
	if r := c.run("receive", "q"); r.code != ExitOK || r.stdout != "" {
		t.Errorf("empty receive: %+v", r)
	}
	if out := c.ok("receive", "q", "--wait", "1s", "--json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("empty receive --json: %q", out)
	}
	c.fail(ExitUsage, "receive", "q", "--wait", "31s")
	c.fail(ExitUsage, "receive", "q", "--count", "17")
	c.fail(ExitNotFound, "message", "receive", "missing")
	c.fail(ExitUsage, "message", "frob", "q")
}

func TestStats(t *testing.T) {
	d := startDaemon(t)
	c := d.ctl(t)
	c.ok("queue", "create", "a")
	c.ok("queue", "create", "b")
	c.ok("send", "a", "x")
	// Not a terminal: plain tables, one per refresh.
	out := c.ok("stats", "--count", "2", "--interval", "100ms")
	if strings.Count(out, "QUEUE") != 2 || strings.Contains(out, "\x1b[") {
		t.Errorf("stats (plain):\n%q", out)
	}
	if !strings.Contains(out, "SENT/s") || !strings.Contains(out, "OLDEST") {
		t.Errorf("stats:\n%s", out)
	}
	// JSON: one object a line; rates from the second on.
	lines := strings.Split(strings.TrimSpace(c.ok("stats", "a", "--count", "2", "--interval", "100ms", "--json")), "\n")
	if len(lines) != 2 {
		t.Fatalf("stats --json: %q", lines)
	}
	var last struct {
		Queues []queueRates `json:"queues"`
	}
	if err := json.Unmarshal([]byte(lines[1]), &last); err != nil {
		t.Fatal(err)
	}
	if len(last.Queues) != 1 || last.Queues[0].Name != "a" || last.Queues[0].Active != 1 || last.Queues[0].Sent == nil || last.Queues[0].BacklogChange == nil ||
		last.Queues[0].OldestWaiting == nil {
		t.Errorf("stats --json: %+v", last)
	}
	// A terminal: the table is redrawn in place.
	c.tty = true
	if out := c.ok("stats", "--count", "2", "--interval", "100ms"); !strings.Contains(out, "\x1b[") || strings.Count(out, "QUEUE") != 2 {
		t.Errorf("stats on a terminal: %q", out)
	}
	c.tty = false
	// /metrics elsewhere (or not readable): the backlog's change only.
	r := c.run("stats", "--count", "2", "--interval", "100ms", "--metrics-url", "http://"+d.addr+"/nope")
	if r.code != ExitOK || !strings.Contains(r.stderr, "no send/receive/delete rates") {
		t.Errorf("stats without metrics: %+v", r)
	}
	// Several (a cluster's members on --metrics-listen): the rates of those
	// that answer, and a word about the others.
	r = c.run("stats", "a", "--count", "2", "--interval", "100ms", "--json", "--metrics-url", " http://"+d.addr+"/metrics, http://"+d.addr+"/nope")
	if r.code != ExitOK || !strings.Contains(r.stdout, `"sent_per_s":0`) {
		t.Errorf("stats with two metrics URLs, one readable: %+v", r)
	}
	c.fail(ExitNotFound, "stats", "missing")
	c.fail(ExitUsage, "stats", "--interval", "1ms")
	// A negative --count is a mistake, not the default: 0 refreshes until
	// interrupted, and nothing else below 1 means anything.
	c.fail(ExitUsage, "stats", "--count", "-1")
}

func TestCredentialsAndErrors(t *testing.T) {
	d := startDaemon(t)
	c := d.ctl(t)
	c.ok("queue", "create", "q")

	// Flags win over the environment.
	c.fail(ExitAuth, "queue", "ls", "--access-key-id", keyID, "--access-key-secret", "wrong")
	c.fail(ExitAuth, "queue", "ls", "--access-key-id", "nobody", "--access-key-secret", keySecret)
	c.fail(ExitUsage, "queue", "ls", "--access-key-id", keyID)

	// smqd's credentials file: by flag, and by default in ./smqd-data.
	noKeys := &ctl{t: t, dir: t.TempDir(), env: map[string]string{"SMQ_ENDPOINT": d.addr}}
	r := noKeys.fail(ExitUsage, "queue", "ls")
	if !strings.Contains(r.stderr, "no access key") {
		t.Errorf("no credentials: %q", r.stderr)
	}
	file := filepath.Join(t.TempDir(), "credentials")
	os.WriteFile(file, []byte("# smqd access key\n"+keyID+" "+keySecret+"\n"), 0o600)
	if out := noKeys.ok("queue", "ls", "--quiet", "--credentials-file", file); out != "q\n" {
		t.Errorf("--credentials-file: %q", out)
	}
	noKeys.fail(ExitUsage, "queue", "ls", "--credentials-file", filepath.Join(t.TempDir(), "none"))
	os.MkdirAll(filepath.Join(noKeys.dir, "smqd-data"), 0o700)
	os.WriteFile(filepath.Join(noKeys.dir, "smqd-data", "credentials"), []byte(keyID+" "+keySecret+"\n"), 0o600)
	if out := noKeys.ok("queue", "ls", "--quiet"); out != "q\n" {
		t.Errorf("default credentials file: %q", out)
	}
	bad := filepath.Join(t.TempDir(), "bad")
	os.WriteFile(bad, []byte("just-one-field\n"), 0o600)
	noKeys.fail(ExitUsage, "queue", "ls", "--credentials-file", bad)

	// The endpoint: flag over environment; nobody listening is exit 1.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := ln.Addr().String()
	ln.Close()
	c.fail(ExitError, "queue", "ls", "--endpoint", "http://"+closed)
	c.fail(ExitUsage, "queue", "ls", "--endpoint", "ftp://"+d.addr)
	c.fail(ExitUsage, "queue", "ls", "--endpoint", "http://")
	if out := c.ok("--endpoint", d.addr, "queue", "ls", "--quiet"); out != "q\n" {
		t.Errorf("--endpoint host:port: %q", out)
	}

	// A body XML cannot carry is refused, not sent altered (U+FFFD).
	for _, bad := range []string{"ctl\x01\x02end", "bad \xff utf-8", "\xef\xbf\xbe"} {
		f := filepath.Join(t.TempDir(), "body")
		if err := os.WriteFile(f, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if r := c.fail(ExitUsage, "send", "q", "--file", f); !strings.Contains(r.stderr, "XML cannot carry") {
			t.Errorf("send of %q: %s", bad, r.stderr)
		}
		c.fail(ExitUsage, "topic", "publish", "t", "--file", f)
	}

	// Usage errors.
	c.fail(ExitUsage)
	c.fail(ExitUsage, "frobnicate")
	c.fail(ExitUsage, "queue", "ls", "--no-such-flag")
	c.fail(ExitUsage, "queue", "get")
	c.fail(ExitUsage, "queue", "get", "a", "b")
	// An empty name (an unset variable) is not the list endpoint: these
	// printed a record of zeros, exit 0; a negative delay sent with the
	// queue's delay; durations took no whole seconds, and a zero timeout
	// failed every request (console audit, 2026-12-06).
	for _, args := range [][]string{{"queue", "get", ""}, {"topic", "get", ""}, {"subscription", "get", "t", ""},
		{"queue", "redrive", ""}, {"send", "q", "x", "--delay", "-5"}, {"queue", "ls", "--timeout", "0"},
		{"receive", "q", "--wait", "-1"}} {
		if r := c.fail(ExitUsage, args...); r.stdout != "" {
			t.Errorf("%q printed %q", args, r.stdout)
		}
	}
	if out := c.ok("queue", "ls", "--quiet", "--timeout", "10"); out != "q\n" {
		t.Errorf("--timeout 10 (whole seconds): %q", out)
	}
	c.ok("receive", "q", "--wait", "1", "--json")
	if r := c.fail(ExitUsage, "queue", "create", "lg", "--logging", "false"); !strings.Contains(r.stderr, "--logging=false") {
		t.Errorf("a boolean flag's separate value: %q", r.stderr)
	}
	if out := c.ok("help"); !strings.Contains(out, "queue create") || !strings.Contains(out, "topic publish") || !strings.Contains(out, "subscription create") || !strings.Contains(out, "Exit status") {
		t.Errorf("help:\n%s", out)
	}
	for _, group := range []string{"queue", "cluster", "topic"} {
		for _, h := range []string{"-h", "--help", "help"} {
			if out := c.ok(group, h); !strings.Contains(out, group+" ls") && !strings.Contains(out, group+" status") {
				t.Errorf("smqctl %s %s: %q", group, h, out)
			}
		}
	}
	if out := c.ok("queue", "create", "-h"); !strings.Contains(out, "-visibility-timeout") {
		t.Errorf("queue create -h:\n%s", out)
	}
	// "--" ends the flags: a body that looks like a flag.
	c.ok("send", "q", "--", "--not-a-flag")
	if out := c.ok("peek", "q", "--raw"); out != "--not-a-flag\n" {
		t.Errorf("body after --: %q", out)
	}
}

func TestCompletion(t *testing.T) {
	c := &ctl{t: t, dir: t.TempDir(), env: map[string]string{}}
	if out := c.ok("completion", "bash"); !strings.Contains(out, "complete -F _smqctl smqctl") || !strings.Contains(out, "create get ls rm set") ||
		!strings.Contains(out, "create get ls publish rm set") || !strings.Contains(out, `subscription ls "${args[0]}"`) {
		t.Errorf("bash completion:\n%s", out)
	}
	if out := c.ok("completion", "zsh"); !strings.HasPrefix(out, "#compdef smqctl") || !strings.Contains(out, "delete peek receive send visibility") ||
		!strings.Contains(out, "topic=(create get ls publish rm set)") || !strings.Contains(out, "subscription=(create get ls rm set)") {
		t.Errorf("zsh completion:\n%s", out)
	}
	c.fail(ExitUsage, "completion", "fish")
}

// smqctl queue purge: every message goes, the queue and the others stay;
// a queue that is not there exits 3.
func TestQueuePurge(t *testing.T) {
	d := startDaemon(t)
	c := d.ctl(t)
	c.ok("queue", "create", "a")
	c.ok("queue", "create", "b")
	for _, q := range []string{"a", "a", "a", "b"} {
		c.ok("send", q, "m")
	}
	c.ok("receive", "a")
	if out := c.ok("queue", "purge", "a"); out != "purged 3 message(s) from a\n" {
		t.Errorf("purge: %q", out)
	}
	if info := d.info(t, "a"); info.Active+info.Inactive+info.Delayed != 0 {
		t.Errorf("a after the purge: %+v", info)
	}
	if info := d.info(t, "b"); info.Active != 1 {
		t.Errorf("b after a's purge: %+v", info)
	}
	if got := decodeJSON[map[string]map[string]int](t, c.ok("queue", "purge", "a", "b", "--json")); got["purged"]["a"] != 0 || got["purged"]["b"] != 1 {
		t.Errorf("purge --json: %v", got)
	}
	c.fail(ExitNotFound, "queue", "purge", "missing")
	c.fail(ExitUsage, "queue", "purge")
}

// Properties on send and publish: NAME=VALUE, NAME:TYPE=VALUE, system
// ones; receive --json shows them; bad ones are refused.
func TestSendProperties(t *testing.T) {
	d := startDaemon(t)
	c := d.ctl(t)
	c.ok("queue", "create", "q")
	c.ok("send", "q", "hi", "--property", "k=v=w", "--property", "n:number=3", "--property", "b:BINARY=AAE=",
		"--system-property", "traceparent=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	ms := decodeJSON[[]Message](t, c.ok("receive", "q", "--json", "--delete"))
	if len(ms) != 1 {
		t.Fatalf("receive: %+v", ms)
	}
	want := []Property{{"k", "v=w", "STRING"}, {"n", "3", "NUMBER"}, {"b", "AAE=", "BINARY"}}
	if fmt.Sprint(ms[0].UserProperties) != fmt.Sprint(want) || len(ms[0].SystemProperties) != 1 || ms[0].SystemProperties[0].Name != "traceparent" {
		t.Errorf("properties: %+v / %+v", ms[0].UserProperties, ms[0].SystemProperties)
	}
	c.fail(ExitUsage, "send", "q", "x", "--property", "novalue")
	c.fail(ExitUsage, "send", "q", "x", "--property", "k:FLOAT=1")
	c.fail(ExitUsage, "send", "q", "x", "--property", "b:BINARY=@@@")
	c.fail(ExitUsage, "topic", "publish", "t", "x", "--property", "b:BINARY=not base64")
	c.fail(ExitError, "send", "q", "x", "--system-property", "madeup=1")
	if info := d.info(t, "q"); info.Active != 0 {
		t.Errorf("a refused send stored something: %+v", info)
	}
	// A publish's properties reach its queue subscriptions.
	c.ok("topic", "create", "t")
	c.ok("subscription", "create", "t", "s", "acs:mns:local:0:queues/q")
	c.ok("topic", "publish", "t", "news", "--property", "k=v")
	if ms := decodeJSON[[]Message](t, c.ok("receive", "q", "--json")); len(ms) != 1 || fmt.Sprint(ms[0].UserProperties) != fmt.Sprint([]Property{{"k", "v", "STRING"}}) {
		t.Errorf("published: %+v", ms)
	}
}

func TestVersion(t *testing.T) {
	c := &ctl{t: t, dir: t.TempDir(), env: map[string]string{}}
	if out := c.ok("version"); !strings.HasPrefix(out, "smqctl revision ") {
		t.Errorf("version: %q", out)
	}
	if v := decodeJSON[map[string]any](t, c.ok("version", "--json")); v["go_version"] == "" {
		t.Errorf("version --json: %v", v)
	}
}

// Durations: whole seconds, Go durations, and whole days before the rest,
// as the help writes the ranges (7d); anything else is refused.
func TestSecondsFlag(t *testing.T) {
	for in, want := range map[string]int{"60": 60, "60s": 60, "1m30s": 90, "4h": 14400, "4d": 345600, "1d12h": 129600, "7d": 604800, "0": 0, "0s": 0} {
		var f secondsFlag
		if err := f.Set(in); err != nil || f.v == nil || *f.v != want {
			t.Errorf("%q: %v %v, want %d", in, f, err, want)
		}
	}
	for _, in := range []string{"4dd", "d", "-1d", "1.5d", "1d-1h", "abc", "1500ms", "4days", ""} {
		var f secondsFlag
		if err := f.Set(in); err == nil {
			t.Errorf("%q accepted as %d", in, *f.v)
		}
	}
}
