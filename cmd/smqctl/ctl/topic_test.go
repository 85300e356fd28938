package ctl

import (
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/smqd/smqd/engine"
)

func (d *daemon) topic(t *testing.T, name string) engine.TopicInfo {
	t.Helper()
	info, err := d.b.GetTopicAttributes(name)
	if err != nil {
		t.Fatalf("topic %s: %v", name, err)
	}
	return info
}

func (d *daemon) sub(t *testing.T, topic, name string) engine.SubscriptionConfig {
	t.Helper()
	info, err := d.b.GetSubscriptionAttributes(topic, name)
	if err != nil {
		t.Fatalf("subscription %s of %s: %v", name, topic, err)
	}
	return info.Config
}

// wantCode runs a failing command and wants the exit code and the API's
// error code on stderr.
func (c *ctl) wantCode(exit int, code string, args ...string) {
	c.t.Helper()
	r := c.fail(exit, args...)
	if !strings.Contains(r.stderr, code+":") {
		c.t.Errorf("smqctl %s: stderr %q, want the code %s", strings.Join(args, " "), r.stderr, code)
	}
}

func TestTopicCommands(t *testing.T) {
	d := startDaemon(t)
	c := d.ctl(t)
	if out := c.ok("topic", "create", "news", "--max-message-size", "2048", "--logging"); out != "created topic news\n" {
		t.Errorf("create: %q", out)
	}
	if cfg := d.topic(t, "news").Config; cfg.MaxMessageBytes != 2048 || !cfg.LoggingEnabled {
		t.Errorf("attributes after create: %+v", cfg)
	}
	// Flags before the name; an identical create is not an error.
	if out := c.ok("topic", "create", "--max-message-size", "2048", "--logging=true", "news"); !strings.Contains(out, "exists") {
		t.Errorf("second create: %q", out)
	}
	if v := decodeJSON[map[string]any](t, c.ok("topic", "create", "news", "--max-message-size", "2048", "--logging", "--json")); v["created"] != false || v["name"] != "news" {
		t.Errorf("create --json of an existing topic: %v", v)
	}
	c.wantCode(ExitError, "TopicAlreadyExist", "topic", "create", "news")
	c.wantCode(ExitError, "InvalidArgument", "topic", "create", "small", "--max-message-size", "10")
	c.wantCode(ExitError, "TopicNameInvalid", "topic", "create", "bad_name")
	c.fail(ExitUsage, "topic", "create", "bad", "--max-message-size", "big")
	if v := decodeJSON[map[string]any](t, c.ok("--json", "topic", "create", "other")); v["created"] != true {
		t.Errorf("create --json: %v", v)
	}
	c.ok("topic", "create", "alerts")

	out := c.ok("topic", "ls")
	if !strings.Contains(out, "TOPIC") || !strings.Contains(out, "news") || !strings.Contains(out, "2048") || !strings.Contains(out, "other") {
		t.Errorf("ls:\n%s", out)
	}
	ts := decodeJSON[[]Topic](t, c.ok("topic", "ls", "--json"))
	if len(ts) != 3 || ts[0].Name != "alerts" || ts[1].Name != "news" || ts[1].MaximumMessageSize != 2048 || !ts[1].LoggingEnabled || ts[1].CreateTime == 0 {
		t.Errorf("ls --json: %+v", ts)
	}
	if out := c.ok("topic", "ls", "--quiet", "--prefix", "ot"); out != "other\n" {
		t.Errorf("ls --quiet --prefix ot: %q", out)
	}
	if out := c.ok("topic", "ls", "--json", "--prefix", "zzz"); strings.TrimSpace(out) != "[]" {
		t.Errorf("empty ls --json: %q", out)
	}
	if out := c.ok("topic", "get", "news"); !strings.Contains(out, "MaximumMessageSize") || !strings.Contains(out, "2048") || !strings.Contains(out, "24h0m0s") {
		t.Errorf("get:\n%s", out)
	}
	tp := decodeJSON[Topic](t, c.ok("--json", "topic", "get", "news"))
	if tp.Name != "news" || tp.MaximumMessageSize != 2048 || !tp.LoggingEnabled || tp.MessageRetentionPeriod != 86400 {
		t.Errorf("get --json: %+v", tp)
	}
	c.wantCode(ExitNotFound, "TopicNotExist", "topic", "get", "missing")

	if out := c.ok("topic", "set", "news", "--logging=false"); out != "updated topic news\n" {
		t.Errorf("set: %q", out)
	}
	if cfg := d.topic(t, "news").Config; cfg.LoggingEnabled || cfg.MaxMessageBytes != 2048 {
		t.Errorf("attributes after set --logging=false: %+v", cfg)
	}
	c.ok("topic", "set", "news", "--max-message-size", "4096")
	if cfg := d.topic(t, "news").Config; cfg.LoggingEnabled || cfg.MaxMessageBytes != 4096 {
		t.Errorf("attributes after set --max-message-size: %+v", cfg)
	}
	c.fail(ExitUsage, "topic", "set", "news")
	c.wantCode(ExitNotFound, "TopicNotExist", "topic", "set", "missing", "--logging")
	c.wantCode(ExitError, "InvalidArgument", "topic", "set", "news", "--max-message-size", "70000")
	if cfg := d.topic(t, "news").Config; cfg.MaxMessageBytes != 4096 {
		t.Errorf("a refused set changed the topic: %+v", cfg)
	}

	if out := c.ok("topic", "rm", "other", "alerts"); strings.Count(out, "deleted topic") != 2 {
		t.Errorf("rm: %q", out)
	}
	for _, n := range []string{"other", "alerts"} {
		if _, err := d.b.GetTopicAttributes(n); !errors.Is(err, engine.ErrTopicNotExist) {
			t.Errorf("rm left topic %s: %v", n, err)
		}
	}
	// The server answers 204 for a missing topic; smqctl exits 3, as
	// queue rm does, and deletes nothing after the typo.
	c.ok("topic", "create", "keep")
	c.wantCode(ExitNotFound, "TopicNotExist", "topic", "rm", "missing", "keep")
	d.topic(t, "keep")
	if v := decodeJSON[map[string][]string](t, c.ok("topic", "rm", "keep", "--json")); len(v["deleted"]) != 1 || v["deleted"][0] != "keep" {
		t.Errorf("rm --json: %v", v)
	}
	c.fail(ExitUsage, "topic", "rm")
	c.fail(ExitUsage, "topic")
	c.fail(ExitUsage, "topic", "frobnicate")
	c.fail(ExitUsage, "topic", "get", "a", "b")
}

func TestTopicPublish(t *testing.T) {
	d := startDaemon(t)
	c := d.ctl(t)
	c.ok("topic", "create", "news")
	c.ok("queue", "create", "all")
	c.ok("queue", "create", "tagged")
	c.ok("subscription", "create", "news", "to-all", "acs:mns:local:smqd:queues/all", "--format", "simplified")
	c.ok("subscription", "create", "news", "to-tagged", "acs:mns:local:smqd:queues/tagged", "--format", "SIMPLIFIED", "--filter-tag", "urgent")

	// The body is XML-escaped on the way and arrives byte for byte.
	body := `<b>a & b</b> "quoted" 'x'`
	out := c.ok("topic", "publish", "news", body)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "MESSAGE ID") || !strings.Contains(lines[0], "BODY MD5") {
		t.Fatalf("publish:\n%s", out)
	}
	f := strings.Fields(lines[1])
	if len(f) != 2 || len(f[0]) != 32 || len(f[1]) != 32 {
		t.Errorf("publish: id and MD5 %q", lines[1])
	}
	if got := c.ok("receive", "all", "--raw", "--delete"); got != body+"\n" {
		t.Errorf("the queue subscription got %q, want %q", got, body)
	}
	// --tag: both subscriptions get it.
	pub := decodeJSON[map[string]string](t, c.ok("topic", "publish", "news", "tagged one", "--tag", "urgent", "--json"))
	if sum := md5.Sum([]byte("tagged one")); len(pub["message_id"]) != 32 || !strings.EqualFold(pub["body_md5"], hex.EncodeToString(sum[:])) {
		t.Errorf("publish --json: %v", pub)
	}
	if got := c.ok("receive", "tagged", "--raw", "--delete"); got != "tagged one\n" {
		t.Errorf("the tagged subscription got %q", got)
	}
	if got := c.ok("receive", "all", "--raw", "--delete"); got != "tagged one\n" {
		t.Errorf("the untagged subscription got %q", got)
	}
	// A file and stdin.
	file := filepath.Join(t.TempDir(), "body")
	os.WriteFile(file, []byte("from a file"), 0o600)
	c.ok("topic", "publish", "news", "--file", file)
	c.stdin = "from stdin"
	c.ok("topic", "publish", "news")
	c.stdin = ""
	if got := c.ok("peek", "all", "--raw", "--count", "16"); len(got) != len("from a file\nfrom stdin\n") || !strings.Contains(got, "from a file\n") || !strings.Contains(got, "from stdin\n") {
		t.Errorf("after publishing a file and stdin: %q", got)
	}
	if info := d.info(t, "tagged"); info.Active != 0 {
		t.Errorf("the tagged subscription got untagged messages: %+v", info)
	}
	if n := d.topic(t, "news").MessageCount; n != 4 {
		t.Errorf("MessageCount %d, want 4", n)
	}

	c.wantCode(ExitNotFound, "TopicNotExist", "topic", "publish", "missing", "x")
	c.wantCode(ExitError, "InvalidArgument", "topic", "publish", "news", "x", "--tag", "a-tag-of-more-than-16")
	c.fail(ExitUsage, "topic", "publish", "news") // empty stdin
	c.fail(ExitUsage, "topic", "publish", "news", "x", "--file", file)
	c.fail(ExitUsage, "topic", "publish", "news", "--file", "/nonexistent/file")
	c.fail(ExitUsage, "topic", "publish")
	if n := d.topic(t, "news").MessageCount; n != 4 {
		t.Errorf("MessageCount %d after refused publishes, want 4", n)
	}
}

func TestSubscriptionCommands(t *testing.T) {
	d := startDaemon(t)
	c := d.ctl(t)
	c.ok("topic", "create", "news")
	c.ok("queue", "create", "inbox")
	c.ok("queue", "create", "dlq")

	if out := c.ok("subscription", "create", "news", "hook", "http://127.0.0.1:9/hook", "--strategy", "exponential_decay_retry",
		"--format", "JSON", "--filter-tag", "a", "--dead-letter-queue", "dlq"); out != "created subscription hook of topic news\n" {
		t.Errorf("create: %q", out)
	}
	want := engine.SubscriptionConfig{Endpoint: "http://127.0.0.1:9/hook", FilterTag: "a", Strategy: engine.ExponentialDecayRetry, Format: engine.FormatJSON, DeadLetterQueue: "dlq"}
	if cfg := d.sub(t, "news", "hook"); cfg != want {
		t.Errorf("after create: %+v, want %+v", cfg, want)
	}
	// The defaults; flags before the names; --dead-letter-queue "" is none.
	c.ok("subscription", "create", "--dead-letter-queue", "", "news", "to-inbox", "acs:mns:local:smqd:queues/inbox")
	want2 := engine.SubscriptionConfig{Endpoint: "acs:mns:local:smqd:queues/inbox", Strategy: engine.BackoffRetry, Format: engine.FormatXML}
	if cfg := d.sub(t, "news", "to-inbox"); cfg != want2 {
		t.Errorf("after create with defaults: %+v, want %+v", cfg, want2)
	}
	if out := c.ok("subscription", "create", "news", "to-inbox", "acs:mns:local:smqd:queues/inbox"); !strings.Contains(out, "exists") {
		t.Errorf("identical create: %q", out)
	}
	c.wantCode(ExitError, "SubscriptionAlreadyExist", "subscription", "create", "news", "to-inbox", "acs:mns:local:smqd:queues/inbox", "--format", "JSON")
	c.wantCode(ExitNotFound, "TopicNotExist", "subscription", "create", "missing", "s", "http://127.0.0.1:9/")
	c.wantCode(ExitError, "EndpointInvalid", "subscription", "create", "news", "s", "ftp://127.0.0.1/")
	c.wantCode(ExitError, "EndpointInvalid", "subscription", "create", "news", "s", "acs:mns:local:smqd:queues/nope")
	c.wantCode(ExitError, "EndpointInvalid", "subscription", "create", "news", "s", "http://192.0.2.1/") // not in the push allow list
	c.wantCode(ExitError, "InvalidArgument", "subscription", "create", "news", "s", "http://127.0.0.1:9/", "--dead-letter-queue", "nope")
	c.wantCode(ExitError, "InvalidArgument", "subscription", "create", "news", "s", "http://127.0.0.1:9/", "--filter-tag", "a-tag-of-more-than-16")
	c.wantCode(ExitError, "SubscriptionNameInvalid", "subscription", "create", "news", "s_1", "http://127.0.0.1:9/")
	c.fail(ExitUsage, "subscription", "create", "news", "s")                                               // no ENDPOINT
	c.fail(ExitUsage, "subscription", "create", "news", "s", "http://127.0.0.1:9/", "--strategy", "never") // not a strategy
	c.fail(ExitUsage, "subscription", "create", "news", "s", "http://127.0.0.1:9/", "--format", "STREAM")
	c.fail(ExitUsage, "subscription", "create", "news", "http://127.0.0.1:9/")
	c.fail(ExitUsage, "subscription", "create", "news", "s", "http://127.0.0.1:9/", "extra") // one ENDPOINT
	// --endpoint is smqd's address, before or after the command.
	elsewhere := d.ctl(t)
	elsewhere.env["SMQ_ENDPOINT"] = "http://127.0.0.1:1"
	elsewhere.ok("--endpoint", d.addr, "subscription", "create", "news", "global", "http://127.0.0.1:9/g")
	if cfg := d.sub(t, "news", "global"); cfg.Endpoint != "http://127.0.0.1:9/g" {
		t.Errorf("created with smqd's address before the command: %+v", cfg)
	}
	elsewhere.ok("subscription", "rm", "news", "global", "--endpoint", d.addr) // elsewhere, after the command
	if _, err := d.b.GetSubscriptionAttributes("news", "s"); !errors.Is(err, engine.ErrSubscriptionNotExist) {
		t.Errorf("a refused create left subscription s: %v", err)
	}

	out := c.ok("subscription", "ls", "news")
	if !strings.Contains(out, "SUBSCRIPTION") || !strings.Contains(out, "hook") || !strings.Contains(out, "http://127.0.0.1:9/hook") || !strings.Contains(out, "EXPONENTIAL_DECAY_RETRY") || !strings.Contains(out, "dlq") {
		t.Errorf("ls:\n%s", out)
	}
	ss := decodeJSON[[]Subscription](t, c.ok("subscription", "ls", "news", "--json"))
	if len(ss) != 2 || ss[0].Name != "hook" || ss[0].DeadLetterTargetQueue != "dlq" || ss[0].FilterTag != "a" || ss[0].Topic != "news" ||
		ss[1].Name != "to-inbox" || ss[1].NotifyStrategy != "BACKOFF_RETRY" || ss[1].NotifyContentFormat != "XML" {
		t.Errorf("ls --json: %+v", ss)
	}
	if out := c.ok("subscription", "ls", "news", "--quiet", "--prefix", "to"); out != "to-inbox\n" {
		t.Errorf("ls --quiet --prefix to: %q", out)
	}
	c.wantCode(ExitNotFound, "TopicNotExist", "subscription", "ls", "missing")
	c.fail(ExitUsage, "subscription", "ls")

	out = c.ok("subscription", "get", "news", "hook")
	for _, w := range []string{"Endpoint", "http://127.0.0.1:9/hook", "FilterTag", "DeadLetterTargetQueue", "dlq", "JSON"} {
		if !strings.Contains(out, w) {
			t.Errorf("get: no %q in\n%s", w, out)
		}
	}
	if out := c.ok("subscription", "get", "news", "to-inbox"); strings.Contains(out, "DeadLetterTargetQueue") || strings.Contains(out, "FilterTag") {
		t.Errorf("get without a dead-letter queue or tag:\n%s", out)
	}
	s := decodeJSON[Subscription](t, c.ok("--json", "subscription", "get", "news", "hook"))
	if s.Name != "hook" || s.Topic != "news" || s.DeadLetterTargetQueue != "dlq" || s.NotifyStrategy != "EXPONENTIAL_DECAY_RETRY" || s.NotifyContentFormat != "JSON" || s.CreateTime == 0 {
		t.Errorf("get --json: %+v", s)
	}
	c.wantCode(ExitNotFound, "SubscriptionNotExist", "subscription", "get", "news", "missing")
	c.wantCode(ExitNotFound, "TopicNotExist", "subscription", "get", "missing", "hook")

	// set: the strategy, the tag, the dead-letter queue (on, off).
	if out := c.ok("subscription", "set", "news", "to-inbox", "--strategy", "EXPONENTIAL_DECAY_RETRY", "--filter-tag", "b"); out != "updated subscription to-inbox of topic news\n" {
		t.Errorf("set: %q", out)
	}
	want2.Strategy, want2.FilterTag = engine.ExponentialDecayRetry, "b"
	if cfg := d.sub(t, "news", "to-inbox"); cfg != want2 {
		t.Errorf("after set: %+v, want %+v", cfg, want2)
	}
	c.ok("subscription", "set", "news", "to-inbox", "--dead-letter-queue", "dlq")
	want2.DeadLetterQueue = "dlq"
	if cfg := d.sub(t, "news", "to-inbox"); cfg != want2 {
		t.Errorf("after set --dead-letter-queue dlq: %+v, want %+v", cfg, want2)
	}
	if out := c.ok("subscription", "get", "news", "to-inbox"); !strings.Contains(out, "DeadLetterTargetQueue") {
		t.Errorf("get after setting a dead-letter queue:\n%s", out)
	}
	c.wantCode(ExitError, "InvalidArgument", "subscription", "set", "news", "to-inbox", "--dead-letter-queue", "nope")
	c.wantCode(ExitError, "InvalidArgument", "subscription", "set", "news", "to-inbox", "--dead-letter-queue", "inbox") // its own queue
	if cfg := d.sub(t, "news", "to-inbox"); cfg != want2 {
		t.Errorf("after refused sets: %+v, want %+v", cfg, want2)
	}
	if v := decodeJSON[map[string]any](t, c.ok("subscription", "set", "news", "hook", "--dead-letter-queue", "", "--json")); v["updated"] != true {
		t.Errorf("set --json: %v", v)
	}
	want.DeadLetterQueue = ""
	if cfg := d.sub(t, "news", "hook"); cfg != want {
		t.Errorf("after set --dead-letter-queue \"\": %+v, want %+v", cfg, want)
	}
	if s := decodeJSON[Subscription](t, c.ok("--json", "subscription", "get", "news", "hook")); s.DeadLetterTargetQueue != "" {
		t.Errorf("get --json after turning the dead-letter queue off: %+v", s)
	}
	c.fail(ExitUsage, "subscription", "set", "news", "hook")                       // nothing to set
	c.fail(ExitUsage, "subscription", "set", "news", "hook", "--filter-tag", "")   // cannot be removed
	c.fail(ExitUsage, "subscription", "set", "news", "hook", "--endpoint", "x")    // smqd's address: nothing to set
	c.fail(ExitUsage, "subscription", "set", "news", "hook", "--strategy", "fast") // not a strategy
	c.wantCode(ExitNotFound, "SubscriptionNotExist", "subscription", "set", "news", "missing", "--strategy", "BACKOFF_RETRY")
	c.wantCode(ExitNotFound, "TopicNotExist", "subscription", "set", "missing", "hook", "--strategy", "BACKOFF_RETRY")

	// rm: a missing subscription exits 3 and stops there.
	c.wantCode(ExitNotFound, "SubscriptionNotExist", "subscription", "rm", "news", "missing", "hook")
	d.sub(t, "news", "hook")
	if out := c.ok("subscription", "rm", "news", "hook", "to-inbox"); strings.Count(out, "deleted subscription") != 2 {
		t.Errorf("rm: %q", out)
	}
	for _, n := range []string{"hook", "to-inbox"} {
		if _, err := d.b.GetSubscriptionAttributes("news", n); !errors.Is(err, engine.ErrSubscriptionNotExist) {
			t.Errorf("rm left subscription %s: %v", n, err)
		}
	}
	c.ok("subscription", "create", "news", "again", "acs:mns:local:smqd:queues/inbox")
	if v := decodeJSON[map[string]any](t, c.ok("subscription", "rm", "news", "again", "--json")); v["topic"] != "news" {
		t.Errorf("rm --json: %v", v)
	}
	if out := c.ok("subscription", "ls", "news", "--json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("ls --json of no subscriptions: %q", out)
	}
	c.wantCode(ExitNotFound, "TopicNotExist", "subscription", "rm", "missing", "hook")
	c.fail(ExitUsage, "subscription", "rm", "news")
	c.fail(ExitUsage, "subscription")
	c.fail(ExitUsage, "subscription", "frobnicate")

	// topic rm takes the subscriptions along.
	c.ok("subscription", "create", "news", "last", "acs:mns:local:smqd:queues/inbox")
	c.ok("topic", "rm", "news")
	if _, err := d.b.GetSubscriptionAttributes("news", "last"); !errors.Is(err, engine.ErrTopicNotExist) {
		t.Errorf("topic rm left its subscription: %v", err)
	}
}

// ListTopic and ListQueue answer at most 1000 names a page: ls follows
// NextMarker to the end.
func TestListPaging(t *testing.T) {
	d := startDaemon(t)
	c := d.ctl(t)
	const n = 1001
	for i := range n {
		name := fmt.Sprintf("t-%04d", i)
		if _, err := d.b.CreateTopic(name, engine.DefaultTopicConfig()); err != nil {
			t.Fatal(err)
		}
		if _, err := d.b.CreateQueue(name, engine.DefaultQueueConfig()); err != nil {
			t.Fatal(err)
		}
	}
	for _, group := range []string{"topic", "queue"} {
		names := strings.Fields(c.ok(group, "ls", "--quiet"))
		if len(names) != n || names[0] != "t-0000" || names[n-1] != fmt.Sprintf("t-%04d", n-1) {
			t.Errorf("%s ls --quiet: %d names, %q ... %q", group, len(names), names[0], names[len(names)-1])
		}
	}
	if ts := decodeJSON[[]Topic](t, c.ok("topic", "ls", "--json", "--prefix", "t-1")); len(ts) != 1 || ts[0].Name != "t-1000" || ts[0].MaximumMessageSize != engine.MaxMessageBytes {
		t.Errorf("topic ls --json --prefix t-1: %+v", ts)
	}
}
