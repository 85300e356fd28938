package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/smqd/smqd/server/access"
)

// authaudit (2026-12-07): docs/operations.md, "Access policies": "A key
// the file does not name, or names with no policy, is refused
// everything; smqd warns at start about such keys". A key named with no
// policy ("k": [] or null) is refused everything, but was not in the
// warning: it listed only the keys the file does not name.
func TestPolicyWarnsAboutKeysNamedWithNoPolicy(t *testing.T) {
	pol := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(pol, []byte(`{"Keys": {"admin": ["SmqdAdministratorAccess"], "empty": [], "nul": null}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	creds := map[string]string{"admin": "s1", "empty": "s2", "nul": "s3", "unnamed": "s4"}
	p, err := loadPolicies(pol, creds, log)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"empty", "nul", "unnamed"} {
		if p.Check([]byte(id), 0, []byte("/queues"), access.Context{}) {
			t.Fatalf("key %s is allowed something", id)
		}
	}
	var line string
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.Contains(l, "access keys with no policy") {
			line = l
		}
	}
	if !strings.Contains(line, "keys=empty,nul,unnamed") {
		t.Fatalf("the warning does not name every key refused everything (want keys=empty,nul,unnamed):\n%s", buf.String())
	}
}

// authaudit (2026-12-07): docs/operations.md: exit status 2 "for bad
// flags or environment values (the message names the flag or the
// variable)". An --access-key-id no request can sign with (a ':' ends the
// id in "MNS <id>:<signature>") passed the flags, the data directory was
// made, and the start failed with exit 1 naming no flag.
func TestDaemonAccessKeyIDWithColonIsAUsageError(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "never-made")
	for _, id := range []string{"a:b", "tab\tid"} {
		var stderr bytes.Buffer
		code := run(context.Background(), []string{"--access-key-id", id, "--access-key-secret", "s", "--in-memory", "--data-dir", dir, "--listen", "127.0.0.1:0"}, env(nil), io.Discard, &stderr, nil)
		if code != 2 || !strings.Contains(stderr.String(), "--access-key-id") {
			t.Fatalf("--access-key-id %q: exit %d, want 2 naming the flag:\n%s", id, code, stderr.String())
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the data directory of a refused start: %v", err)
	}
}
