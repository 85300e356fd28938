package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// docs/operations.md, "Failure modes", corruption found at start
// (mid-log): smqd does not start, and its error names the segment, the
// offset and --wal-repair; started with --wal-repair it serves every
// message whose record is whole and writes a repair-*.json report naming
// the lost one. The engine and the wal test the refusal; nothing ran the
// daemon on a damaged log, where an operator reads the message. Seen
// failing with the wal's hint no longer naming the flag.
func TestDaemonRefusesADamagedLogThenRepairs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	addr, _, stderr, stop := startDaemon(t, "--data-dir", dir)
	creds, err := loadCredentials(filepath.Join(dir, "credentials"))
	if err != nil {
		t.Fatal(err)
	}
	var id, secret string
	for id, secret = range creds {
	}
	do := func(method, target, body string, want int) string {
		t.Helper()
		resp := signedRequestBody(t, method, "http://"+addr+target, body, id, secret)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s", method, target, resp.StatusCode, b)
		}
		return string(b)
	}
	do("PUT", "/queues/kept", "", 201)
	const n = 40
	for i := range n {
		do("POST", "/queues/kept/messages", fmt.Sprintf("<Message><MessageBody>body-%02d-%s</MessageBody></Message>", i, strings.Repeat("x", 200)), 201)
	}
	if code := stop(); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}

	// One byte of message 20's body flipped in its segment file.
	segs, _ := filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
	if len(segs) == 0 {
		t.Fatalf("no log segment in %s", filepath.Join(dir, "wal"))
	}
	damaged := ""
	for _, seg := range segs {
		b, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		if at := bytes.Index(b, []byte("body-20-")); at >= 0 {
			b[at+len("body-20-")+10] ^= 0x40
			if err := os.WriteFile(seg, b, 0o600); err != nil {
				t.Fatal(err)
			}
			damaged = filepath.Base(seg)
		}
	}
	if damaged == "" {
		t.Fatal("no segment holds message 20's body (compressed?)")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var refused syncBuffer
	if code := run(ctx, []string{"--listen", "127.0.0.1:0", "--data-dir", dir}, env(nil), io.Discard, &refused, nil); code != 1 {
		t.Fatalf("a damaged log: exit %d (want 1, at once): %s", code, refused.String())
	}
	msg := refused.String()
	t.Logf("the refusal: %s", msg)
	for _, want := range []string{strings.TrimSuffix(damaged, ".wal"), "offset", "--wal-repair"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal does not name %q: %s", want, msg)
		}
	}

	addr, _, stderr, stop = startDaemon(t, "--data-dir", dir, "--wal-repair")
	got := do("GET", "/queues/kept?", "", 200)
	if !strings.Contains(got, fmt.Sprintf("<ActiveMessages>%d</ActiveMessages>", n-1)) {
		t.Errorf("after --wal-repair, want %d messages: %s", n-1, got)
	}
	if code := stop(); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	reports, _ := filepath.Glob(filepath.Join(dir, "repair-*.json"))
	if len(reports) == 0 {
		reports, _ = filepath.Glob(filepath.Join(dir, "*", "repair-*.json"))
	}
	if len(reports) != 1 {
		t.Fatalf("repair reports: %v", reports)
	}
	if b, err := os.ReadFile(reports[0]); err != nil || !bytes.Contains(b, []byte("kept")) {
		t.Errorf("the repair report names no lost message of queue kept: %s %v", b, err)
	}
}
