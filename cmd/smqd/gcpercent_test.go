package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/smqd/smqd/cmd/internal/testnet"
)

// TestGCPercentNotPositiveIsRefused: a --gc-percent of 0 or below was
// logged in the start-up line as set and ignored, and the collector ran at
// Go's default 100 instead of smqd's 25. It is a usage error (exit 2,
// naming the flag or its variable), refused before the data directory is
// made.
func TestGCPercentNotPositiveIsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--gc-percent", "0"}, nil, "--gc-percent must be positive"},
		{[]string{"--gc-percent", "-5"}, nil, "--gc-percent must be positive"},
		{nil, map[string]string{"SMQD_GC_PERCENT": "-1"}, `SMQD_GC_PERCENT="-1": --gc-percent must be positive`},
	} {
		dir := filepath.Join(t.TempDir(), "never-made")
		args := append([]string{"--no-auth", "--data-dir", dir, "--listen", testnet.FreeLoopback(t)}, tc.args...)
		// Already cancelled: a start that is not refused stops at once.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		var stderr bytes.Buffer
		if code := run(ctx, args, env(tc.env), io.Discard, &stderr, nil); code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v %v: exit %d, %q; want exit 2 and %q", tc.args, tc.env, code, stderr.String(), tc.want)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%v %v: the data directory of a refused start: %v", tc.args, tc.env, err)
		}
	}
	if c, err := parseConfig([]string{"--gc-percent", "1"}, env(nil), io.Discard); err != nil || c.gcPercent != 1 {
		t.Fatalf("--gc-percent 1: %v", err)
	}
}
