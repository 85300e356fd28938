package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

// TestProcsAboveTheBoundIsRefused: --procs 100000 was taken, and the
// process died of thread exhaustion at its first collection (a GC worker
// per P, Go allows 10,000 threads). Above 1024 it is a usage error. The
// listen address is invalid so that a start that is not refused fails at
// once instead of serving.
func TestProcsAboveTheBoundIsRefused(t *testing.T) {
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"--procs", "100000", "--no-auth", "--in-memory", "--listen", "127.0.0.1:99999"}, env(nil), io.Discard, &stderr, nil); code != 2 || !strings.Contains(stderr.String(), "--procs must be 0 (automatic) or between 1 and 1024") {
		t.Errorf("--procs 100000: exit %d, %q; want exit 2 naming --procs", code, stderr.String())
	}
	if c, err := parseConfig([]string{"--procs", "1024"}, env(nil), io.Discard); err != nil || c.procs != 1024 {
		t.Errorf("--procs 1024: %v", err)
	}
}
