//go:build linux

package main

// Disk full, end to end: smqd on a small tmpfs the test mounts (as root;
// skipped with a clear message otherwise), filled under load. The daemon
// stays up and answers 503 DiskFull, consumers drain, freeing space brings
// sends back without a restart, a restart on the full disk serves reads,
// and no acknowledged message is lost.

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

var (
	reMessageBody = regexp.MustCompile(`<MessageBody>([^<]*)</MessageBody>`)
	reHandle      = regexp.MustCompile(`<ReceiptHandle>([^<]*)</ReceiptHandle>`)
	reErrorCode   = regexp.MustCompile(`<Code>([^<]*)</Code>`)
)

// mountTmpfs mounts a tmpfs of size bytes on a new directory, or skips.
func mountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("disk-full test: needs root to mount a small tmpfs (CI runs as root)")
	}
	dir := filepath.Join(t.TempDir(), "fs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("disk-full test: cannot mount a tmpfs here: %v: %s", err, out)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// call makes an unsigned request (the daemon runs --no-auth).
func call(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r, _ := http.NewRequest(method, url, rd)
	r.Header.Set("x-mns-version", "2015-06-06")
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatalf("%s %s: %v (the daemon must stay up)", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestDaemonDiskFull(t *testing.T) {
	fs := mountTmpfs(t, 160<<20)
	dir := filepath.Join(fs, "data")
	args := []string{"--data-dir", dir, "--no-auth", "--sync", "always",
		"--wal-segment-bytes", "1048576", "--index-memtable-bytes", "1048576"}
	ballast := filepath.Join(fs, "ballast")
	if err := os.WriteFile(ballast, make([]byte, 40<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, _, stderr, stop := startDaemon(t, args...)
	base := "http://" + addr
	if st, body := call(t, "PUT", base+"/queues/full", ""); st != 201 {
		t.Fatalf("create: %d %s", st, body)
	}
	acked := map[string]bool{} // bodies of acknowledged sends not deleted
	n := 0
	fill := func() {
		t.Helper()
		pad := strings.Repeat("p", 4000)
		for i := 0; i < 20000; i++ {
			var sb strings.Builder
			sb.WriteString("<Messages>")
			var tags []string
			for k := 0; k < 16; k++ {
				tag := fmt.Sprintf("m%07d", n)
				n++
				tags = append(tags, tag)
				fmt.Fprintf(&sb, "<Message><MessageBody>%s-%s</MessageBody></Message>", tag, pad)
			}
			sb.WriteString("</Messages>")
			st, body := call(t, "POST", base+"/queues/full/messages", sb.String())
			if st == 201 {
				for _, tag := range tags {
					acked[tag] = true
				}
				continue
			}
			if m := reErrorCode.FindStringSubmatch(body); st == 503 && m != nil && m[1] == "DiskFull" {
				return
			}
			t.Fatalf("send on a filling disk: %d %s", st, body)
		}
		t.Fatal("the disk never filled")
	}
	drain := func(max int) int {
		t.Helper()
		got := 0
		for got < max {
			st, body := call(t, "GET", base+"/queues/full/messages?numOfMessages=16&waitseconds=0", "")
			if st == 404 {
				return got
			}
			if st != 200 {
				t.Fatalf("receive on a full disk: %d %s", st, body)
			}
			var hs []string
			for _, m := range reHandle.FindAllStringSubmatch(body, -1) {
				hs = append(hs, "<ReceiptHandle>"+m[1]+"</ReceiptHandle>")
			}
			if st, body := call(t, "DELETE", base+"/queues/full/messages", "<ReceiptHandles>"+strings.Join(hs, "")+"</ReceiptHandles>"); st != 204 {
				t.Fatalf("delete on a full disk: %d %s", st, body)
			}
			for _, m := range reMessageBody.FindAllStringSubmatch(body, -1) {
				delete(acked, m[1][:8])
				got++
			}
		}
		return got
	}

	fill()
	t.Logf("disk full after %d acknowledged messages", len(acked))
	// Each transition has its log line (written before it takes effect)
	// and shows in the metric.
	if !strings.Contains(stderr.String(), "disk full: new messages and queues are refused") {
		t.Fatalf("no log line for entering the disk-full state:\n%s", stderr.String())
	}
	if st, body := call(t, "GET", base+"/healthz", ""); st != 200 || !strings.Contains(body, "disk full") {
		t.Fatalf("healthz on a full disk: %d %q", st, body)
	}
	if st, body := call(t, "PUT", base+"/queues/another", ""); st != 503 || !strings.Contains(body, "DiskFull") {
		t.Fatalf("queue creation on a full disk: %d %s", st, body)
	}
	if st, body := call(t, "GET", base+"/metrics", ""); st != 200 || !strings.Contains(body, "smqd_disk_full 1") {
		t.Fatalf("metrics on a full disk: %d (smqd_disk_full missing or 0)", st)
	}
	if got := drain(500); got < 500 {
		t.Fatalf("drained %d of 500", got)
	}
	// Space comes back: sends work again, no restart.
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, body := call(t, "POST", base+"/queues/full/messages", "<Message><MessageBody>back-0000</MessageBody></Message>")
		if st == 201 {
			acked["back-000"] = true
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sends did not come back after space was freed: %d %s", st, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(stderr.String(), "disk space is back") {
		t.Fatalf("no log line for leaving the disk-full state:\n%s", stderr.String())
	}
	if st, body := call(t, "GET", base+"/metrics", ""); st != 200 || !regexp.MustCompile(`(?m)^smqd_disk_full 0$`).MatchString(body) ||
		!regexp.MustCompile(`(?m)^smqd_disk_full_events_total [1-9]`).MatchString(body) {
		t.Fatalf("metrics after space came back: %d (want smqd_disk_full 0 and smqd_disk_full_events_total > 0)", st)
	}
	// Fill again, then restart on the full disk: it starts and serves reads.
	fill()
	if code := stop(); code != 0 {
		t.Fatalf("stop on a full disk: exit %d: %s", code, stderr.String())
	}
	addr, _, _, stop = startDaemon(t, args...)
	base = "http://" + addr
	if st, body := call(t, "POST", base+"/queues/full/messages", "<Message><MessageBody>refused</MessageBody></Message>"); st != 503 {
		t.Fatalf("send after a restart on a full disk: %d %s", st, body)
	}
	// Nothing acknowledged is lost: drain everything.
	drain(1 << 30)
	if len(acked) != 0 {
		t.Fatalf("%d acknowledged messages lost, e.g. %v", len(acked), firstKey(acked))
	}
	stop()
}

func firstKey(m map[string]bool) string {
	for k := range m {
		return k
	}
	return ""
}
