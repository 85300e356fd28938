//go:build unix

package main

import (
	"crypto/x509"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A TLS key replaced by one that others can read, then reloaded on
// SIGHUP, gets the warning it gets at start (as the credentials file does
// on its reload): renewal tools often write the new key with the default
// umask, and the reload was silent about it (TLS audit, 2026-12-07).
func TestCertReloaderWarnsOfAKeyOthersCanRead(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "ca")
	now, srv := time.Now(), x509.ExtKeyUsageServerAuth
	first := pair(ca.issue(t, dir, "first", now.Add(-time.Hour), now.Add(time.Hour), srv))
	second := pair(ca.issue(t, dir, "second", now.Add(-time.Hour), now.Add(time.Hour), srv))
	live := [2]string{filepath.Join(dir, "live.pem"), filepath.Join(dir, "live-key.pem")}
	replacePair(t, live, first)
	var logs strings.Builder
	r, err := newCertReloader(live[0], live[1], slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	replacePair(t, live, second)
	if err := os.Chmod(live[1], 0o644); err != nil {
		t.Fatal(err)
	}
	logs.Reset()
	if err := r.reload(); err != nil || servedCN(r) != "second" {
		t.Fatalf("reload: %v, serving %s", err, servedCN(r))
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "readable by other users") {
		t.Fatalf("a reloaded key of mode 0644 was not warned about; log:\n%s", logs.String())
	}
}
