package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

// TestLogLevelTakesOnlyTheFourNames: --log-level is debug, info, warn or
// error. slog's own syntax also took offsets, and "error+8" started a
// daemon that logged nothing at all, not even why it failed (exit 1 with
// an empty stderr).
func TestLogLevelTakesOnlyTheFourNames(t *testing.T) {
	for _, bad := range []string{"error+8", "info-4", "warn+1", "debug-1"} {
		var stderr bytes.Buffer
		if code := run(context.Background(), []string{"--log-level", bad, "--no-auth", "--in-memory", "--listen", "127.0.0.1:99999"}, env(nil), io.Discard, &stderr, nil); code != 2 || !strings.Contains(stderr.String(), "--log-level must be debug, info, warn or error") {
			t.Errorf("--log-level %s: exit %d, %q; want exit 2 naming --log-level", bad, code, stderr.String())
		}
	}
	for _, good := range []string{"debug", "info", "warn", "error", "INFO"} {
		if _, err := parseConfig([]string{"--log-level", good}, env(nil), io.Discard); err != nil {
			t.Errorf("--log-level %s: %v", good, err)
		}
	}
}
