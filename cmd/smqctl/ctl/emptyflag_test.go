package ctl

import (
	"strings"
	"testing"
)

// An empty connection flag is an unset variable in a script, not "use the
// default": `smqctl --endpoint "$TARGET" queue purge orders` with TARGET
// unset purged the queue of $SMQ_ENDPOINT (or of 127.0.0.1:8080), exit 0;
// --credentials-file "" fell back to ./smqd-data/credentials. Each is a
// usage error (exit 2) and sends nothing (docs/operations.md, smqctl: "an
// empty argument (an unset variable in a script) [is a] usage error").
func TestEmptyConnectionFlagIsUsageError(t *testing.T) {
	d := startDaemon(t)
	c := d.ctl(t)
	c.ok("queue", "create", "orders")
	c.ok("send", "orders", "keep me")
	for _, args := range [][]string{
		{"--endpoint", "", "queue", "purge", "orders"},
		{"queue", "purge", "orders", "--endpoint", ""},
		{"queue", "purge", "orders", "--endpoint="},
		{"queue", "purge", "orders", "--credentials-file", ""},
		{"--access-key-id", "", "--access-key-secret", "", "queue", "purge", "orders"},
	} {
		c.fail(ExitUsage, args...)
		if info := d.info(t, "orders"); info.Active != 1 {
			t.Fatalf("smqctl %q purged the queue: %+v", args, info)
		}
	}
}

// A root flag's bad value is said once: the flag package printed it and
// then so did the usage error (tour2 audit).
func TestRootFlagErrorSaidOnce(t *testing.T) {
	c := &ctl{t: t, dir: t.TempDir(), env: map[string]string{}}
	r := c.run("--timeout", "bad", "queue", "ls")
	if r.code != ExitUsage || strings.Count(r.stderr, `invalid value "bad"`) != 1 {
		t.Errorf("exit %d, stderr %q: want exit %d and the error once", r.code, r.stderr, ExitUsage)
	}
}
