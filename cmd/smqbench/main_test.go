package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/smqd/smqd/bench"
)

func TestParseConfig(t *testing.T) {
	env := map[string]string{"SMQBENCH_ACCESS_KEY_SECRET": "s3cret", "SMQBENCH_ACCESS_KEY_ID": "id"}
	c, err := parseConfig([]string{"cycle", "--batch", "16", "--recv-batch", "8", "--priority-mix", "1:1,8:3"}, func(k string) string { return env[k] }, &bytes.Buffer{})
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
	c, err = parseConfig([]string{"--target", "inproc", "--in-memory", "produce"}, func(string) string { return "" }, &bytes.Buffer{})
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
		if _, err := parseConfig(bad, func(string) string { return "" }, &bytes.Buffer{}); err == nil {
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
	if code := run(context.Background(), args, func(string) string { return "" }, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "end-to-end") || !strings.HasPrefix(stdout.String(), "{") {
		t.Fatalf("table or JSON missing:\n%s\n%s", stderr.String(), stdout.String())
	}
	if fi, err := os.Stat(filepath.Join(dir, "cpu.pprof")); err != nil || fi.Size() == 0 {
		t.Fatalf("cpu profile: %v", err)
	}
	stdout.Reset()
	if code := run(context.Background(), []string{"report", out}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("report exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "inproc") || !strings.Contains(stdout.String(), "deleted/s") {
		t.Fatalf("report:\n%s", stdout.String())
	}
}
