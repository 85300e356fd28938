package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/smqd/smqd/bench"
	"github.com/smqd/smqd/engine"
)

func TestParseConfig(t *testing.T) {
	env := map[string]string{"SMQBENCH_ACCESS_KEY_SECRET": "s3cret", "SMQBENCH_ACCESS_KEY_ID": "id"}
	c, err := parseConfig([]string{"cycle", "--batch", "16", "--recv-batch", "8", "--priority-mix", "1:1,8:3"}, func(k string) string { return env[k] }, &bytes.Buffer{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := c.bench
	if b.Workload != bench.Cycle || b.SendBatch != 16 || b.RecvBatch != 8 || b.DeleteBatch != 16 || len(b.PriorityMix) != 2 {
		t.Fatalf("config %+v", b)
	}
	if c.accessKeySecret != "s3cret" || c.accessKeyID != "id" {
		t.Fatalf("environment not applied: %q %q", c.accessKeyID, c.accessKeySecret)
	}
	// The workload may follow the flags; produce drops the consumers.
	c, err = parseConfig([]string{"--target", "inproc", "--in-memory", "produce"}, func(string) string { return "" }, &bytes.Buffer{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.bench.Workload != bench.Produce || c.bench.Consumers != 0 || c.bench.Sync != "memory" {
		t.Fatalf("config %+v", c.bench)
	}
	for _, bad := range [][]string{
		{"cycle", "--target", "kafka"},
		{"cycle", "--sync", "sometimes"},
		{"cycle", "--spawn", "bin/smqd"},
		{"cycle", "--priority-mix", "x"},
		{"cycle", "extra"},
		{},
	} {
		if _, err := parseConfig(bad, func(string) string { return "" }, &bytes.Buffer{}, nil); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestRunInprocAndReport runs a short in-process cycle, writes its JSON
// line, and aggregates it with the report subcommand.
func TestRunInprocAndReport(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "r.jsonl")
	var stdout, stderr bytes.Buffer
	args := []string{"cycle", "--target", "inproc", "--data-dir", filepath.Join(dir, "data"), "--producers", "2", "--consumers", "2",
		"--batch", "4", "--warmup", "100ms", "--duration", "500ms", "--label", "t", "--json-out", out,
		"--cpuprofile", filepath.Join(dir, "cpu.pprof")}
	if code := Run(context.Background(), args, func(string) string { return "" }, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "end-to-end") || !strings.HasPrefix(stdout.String(), "{") {
		t.Fatalf("table or JSON missing:\n%s\n%s", stderr.String(), stdout.String())
	}
	if fi, err := os.Stat(filepath.Join(dir, "cpu.pprof")); err != nil || fi.Size() == 0 {
		t.Fatalf("cpu profile: %v", err)
	}
	stdout.Reset()
	if code := Run(context.Background(), []string{"report", out}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("report exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "inproc") || !strings.Contains(stdout.String(), "deleted/s") {
		t.Fatalf("report:\n%s", stdout.String())
	}
}

// TestPeer runs a cycle against a peer handed to Run (here the engine in
// memory under another name) and checks what its constructor was told.
func TestPeer(t *testing.T) {
	var got bench.PeerOptions
	fake := bench.Peer{Name: "fake", DefaultAddr: "127.0.0.1:7", New: func(o bench.PeerOptions) (bench.Target, error) {
		got = o
		return bench.OpenInproc(engine.Options{}, 0)
	}}
	var stdout, stderr bytes.Buffer
	args := []string{"cycle", "--target", "fake", "--producers", "1", "--consumers", "2", "--visibility-timeout", "7s",
		"--warmup", "0s", "--duration", "200ms", "--quiet"}
	if code := Run(context.Background(), args, nil, &stdout, &stderr, fake); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if want := (bench.PeerOptions{Addr: "127.0.0.1:7", Workers: 3, VisibilityTimeout: 7 * time.Second}); got != want {
		t.Fatalf("peer options %+v, want %+v", got, want)
	}
	// Without the peer, its name is no target; nor may a peer take smqd's.
	if code := Run(context.Background(), args, nil, &stdout, &stderr); code != 2 {
		t.Fatalf("unknown target: exit %d", code)
	}
	fake.Name = "inproc"
	if code := Run(context.Background(), args, nil, &stdout, &stderr, fake); code != 2 {
		t.Fatalf("a peer named inproc: exit %d", code)
	}
}
