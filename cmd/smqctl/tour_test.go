package main

// The README's tour, with the real binaries: smqd started as `make run`
// starts it (its data directory ./smqd-data, in a temporary working
// directory; a free port instead of 8080), then smqctl with no set-up but
// the endpoint: it finds the key in smqd-data/credentials by itself.

import (
	"bufio"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func build(t *testing.T, dir, pkg string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	bin := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command(goBin, "build", "-o", bin, pkg)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

func TestReadmeTour(t *testing.T) {
	bins := t.TempDir()
	smqd := build(t, bins, "github.com/smqd/smqd/cmd/smqd")
	smqctl := build(t, bins, "github.com/smqd/smqd/cmd/smqctl")
	work := t.TempDir()

	d := exec.Command(smqd, "--listen", "127.0.0.1:0", "--sync", "none")
	d.Dir = work
	out, err := d.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.Stderr = os.Stderr
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.Process.Signal(syscall.SIGTERM)
		d.Wait()
	})
	endpoint := ""
	sc := bufio.NewScanner(out)
	deadline := time.Now().Add(30 * time.Second)
	for endpoint == "" && time.Now().Before(deadline) && sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "endpoint:"); ok {
			endpoint = strings.TrimSpace(v)
		}
	}
	if endpoint == "" {
		t.Fatal("smqd printed no endpoint")
	}
	go func() {
		for sc.Scan() {
		}
	}()

	ctl := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(smqctl, args...)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "SMQ_ENDPOINT="+endpoint)
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("smqctl %s: %v\n%s", strings.Join(args, " "), err, b)
		}
		return string(b)
	}
	// The tour (README.md), command for command.
	ctl("queue", "create", "demo")
	ctl("send", "demo", "hello")
	if got := ctl("receive", "demo", "--wait", "5s", "--delete"); !strings.Contains(got, "hello") {
		t.Errorf("receive: %q", got)
	}
	ctl("topic", "create", "news")
	ctl("subscription", "create", "news", "to-demo", "acs:mns:local:smqd:queues/demo")
	if got := ctl("topic", "publish", "news", "hi all"); !strings.Contains(got, "MESSAGE ID") {
		t.Errorf("topic publish: %q", got)
	}
	if got := ctl("peek", "demo", "--raw"); !strings.Contains(got, "<Message>hi all</Message>") {
		t.Errorf("the subscription's queue holds %q", got)
	}
	if got := ctl("stats", "--count", "3", "--interval", "200ms"); strings.Count(got, "demo") != 3 {
		t.Errorf("stats: %q", got)
	}
	if got := ctl("queue", "ls", "--quiet"); got != "demo\n" {
		t.Errorf("ls: %q", got)
	}
	if got := ctl("backup", "-o", "demo.smqd"); !strings.Contains(got, "written to demo.smqd") {
		t.Errorf("backup: %q", got)
	}
	restore := exec.Command(smqd, "restore", "--from", "demo.smqd", "--data-dir", "restored")
	restore.Dir = work
	if got, err := restore.CombinedOutput(); err != nil || !strings.Contains(string(got), "checked: 1 queues, 1 messages recovered") {
		t.Errorf("smqd restore: %v\n%s", err, got)
	}
	if _, err := os.Stat(filepath.Join(work, "restored", "credentials")); err != nil {
		t.Errorf("the restored directory has no credentials: %v", err)
	}
	if got := ctl("queue", "purge", "demo"); got != "purged 1 message(s) from demo\n" {
		t.Errorf("purge: %q", got)
	}
	// ... and open the console.
	resp, err := http.Get(endpoint + "/console/")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("console: %v %v", err, resp)
	} else {
		resp.Body.Close()
	}
	cmd := exec.Command(smqctl, "queue", "get", "missing")
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "SMQ_ENDPOINT="+endpoint)
	if err := cmd.Run(); err == nil || cmd.ProcessState.ExitCode() != 3 {
		t.Errorf("queue get missing: %v (exit %d)", err, cmd.ProcessState.ExitCode())
	}
}
