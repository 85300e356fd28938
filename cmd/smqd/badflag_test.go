package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

// TestBadFlagIsOneLine: a bad flag or value is refused (exit 2) with one
// line naming it. The flag package printed its error and then the whole
// usage, 125 lines, and run printed the error again after them. -h still
// prints the usage (exit 0).
func TestBadFlagIsOneLine(t *testing.T) {
	for _, args := range [][]string{{"--gc-percent", "abc"}, {"--nope"}, {"--in-memory=maybe"}} {
		var stderr bytes.Buffer
		code := run(context.Background(), args, env(nil), io.Discard, &stderr, nil)
		if out := stderr.String(); code != 2 || strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "smqd: ") {
			t.Errorf("%v: exit %d, stderr:\n%s\nwant exit 2 and one line", args, code, out)
		}
	}
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, env(nil), io.Discard, &stderr, nil); code != 0 || !strings.Contains(stderr.String(), "Usage: smqd") || !strings.Contains(stderr.String(), "-wal-segment-bytes") {
		t.Fatalf("-h: exit %d, %q", code, stderr.String())
	}
}
