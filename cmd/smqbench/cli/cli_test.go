package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smqd/smqd/bench"
	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/server"
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
	if c.bench.Client != "fast" || c.bench.ServerPID != 0 {
		t.Fatalf("client %q server pid %d", c.bench.Client, c.bench.ServerPID)
	}
	// --server-pid names the peer's process, for CPU and (backlog) RSS.
	self, parent := os.Getpid(), os.Getppid()
	c, err = parseConfig([]string{"cycle", "--target", "smqd", "--client", "sdk", "--server-pid", strconv.Itoa(self)}, func(string) string { return "" }, &bytes.Buffer{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.bench.Client != "sdk" || c.bench.ServerPID != self || c.bench.RSSPID != self || c.bench.ServerPIDs != nil {
		t.Fatalf("config %+v", c.bench)
	}
	// Several (the nodes of a cluster): the first, and the others summed.
	c, err = parseConfig([]string{"cycle", "--target", "smqd", "--endpoints", "127.0.0.1:1,127.0.0.1:2", "--server-pid", fmt.Sprintf("%d,%d,%d", self, parent, self)}, func(string) string { return "" }, &bytes.Buffer{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.bench.ServerPID != self || !slices.Equal(c.bench.ServerPIDs, []int{parent, self}) {
		t.Fatalf("config %+v", c.bench)
	}
	// A process that does not exist is refused on Linux: its CPU columns
	// came out empty with no word.
	if runtime.GOOS == "linux" {
		if _, err := parseConfig([]string{"cycle", "--target", "smqd", "--server-pid", "2147483646"}, func(string) string { return "" }, &bytes.Buffer{}, nil); err == nil {
			t.Fatal("--server-pid of no process accepted")
		}
	}
	// The workload may follow the flags; produce drops the consumers.
	c, err = parseConfig([]string{"--target", "inproc", "--in-memory", "produce"}, func(string) string { return "" }, &bytes.Buffer{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.bench.Workload != bench.Produce || c.bench.Consumers != 0 || c.bench.Sync != "memory" {
		t.Fatalf("config %+v", c.bench)
	}
	// publish: --subs is the fan-out (the queues); --batch is the
	// consumers', a publish is always one message.
	c, err = parseConfig([]string{"publish", "--subs", "4", "--batch", "16", "--access-key-id", "a", "--access-key-secret", "b"}, func(string) string { return "" }, &bytes.Buffer{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b := c.bench; b.Workload != bench.Publish || b.Queues != 4 || b.SendBatch != 1 || b.RecvBatch != 16 || b.DeleteBatch != 16 || b.Consumers != 8 {
		t.Fatalf("publish config %+v", b)
	}
	for _, bad := range [][]string{
		{"publish", "--queues", "4"},
		{"publish", "--subs", "0"},
		{"publish", "--subs", "101"},
		{"publish", "--send-batch", "2"},
		{"cycle", "--target", "kafka"},
		{"cycle", "--sync", "sometimes"},
		{"cycle", "--spawn", "bin/smqd"},
		{"cycle", "--priority-mix", "x"},
		{"cycle", "extra"},
		{"cycle", "--client", "slow"},
		{"cycle", "--target", "inproc", "--in-memory", "--client", "sdk"},
		{"cycle", "--server-pid", "-1"},
		{"cycle", "--server-pid", "42,x"},
		{"cycle", "--server-pid", "42,"},
		{"cycle", "--spawn", "bin/smqd", "--data-dir", "d", "--server-pid", "7"},
		{},
		// Numbers out of range ran with defaults in their place
		// (--consumers 0: a cycle of 8 consumers), or failed in the run.
		{"nosuch"},
		{"cycle", "--producers", "-1"},
		{"cycle", "--consumers", "0"},
		{"produce", "--producers", "0"},
		{"consume", "--consumers", "0"},
		{"consume", "--producers", "0", "--messages", "10"},
		{"backlog", "--messages", "10", "--consumers", "0"},
		{"cycle", "--body", "8"},
		{"cycle", "--queues", "0"},
		{"cycle", "--duration", "-5s"},
		{"cycle", "--duration", "0s"},
		{"cycle", "--warmup", "-1s"},
		{"cycle", "--rate", "-5"},
		{"cycle", "--messages", "-1"},
		{"cycle", "--wait", "0s"},
		{"cycle", "--max-error-pct", "-1"},
		{"backlog", "--messages", "10", "--restart-after", "2"},
		{"backlog", "--messages", "10", "--settle", "-1s"},
		{"cycle", "--visibility-timeout", "0s"},
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

// TestRunPublish runs the publish workload in process with a fan-out of 2
// and checks the table's publish lines and the report's publish columns.
func TestRunPublish(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "r.jsonl")
	var stdout, stderr bytes.Buffer
	args := []string{"publish", "--subs", "2", "--target", "inproc", "--in-memory", "--producers", "2", "--consumers", "2",
		"--batch", "16", "--warmup", "100ms", "--duration", "500ms", "--label", "p", "--json-out", out}
	if code := Run(context.Background(), args, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var res bench.Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	if res.Workload != "publish" || res.Subscriptions != 2 || res.Queues != 2 || res.SendBatch != 1 || res.Sent == 0 || res.Deleted == 0 || res.Errors != 0 {
		t.Fatalf("result %s", stdout.String())
	}
	if !strings.Contains(stderr.String(), "to 2 subscriptions") {
		t.Fatalf("table:\n%s", stderr.String())
	}
	if runtime.GOOS == "linux" && (!strings.Contains(stderr.String(), "µs/publish") || res.ClientCPUUsPerPublish <= 0) {
		t.Fatalf("table:\n%s", stderr.String())
	}
	stdout.Reset()
	if code := Run(context.Background(), []string{"report", out}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("report exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "srv µs/publish") || !strings.Contains(stdout.String(), "publish to 2 subscriptions") || !strings.Contains(stdout.String(), "deleted/s") {
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

// TestRunSDKClient runs smqbench with --client sdk against an smqd server
// in this process, named as the server by --server-pid (so the "server"
// CPU is this whole process's), and checks the CPU figures of the JSON line
// and the table: present and possible, no timing asserted.
func TestRunSDKClient(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("server CPU is read from /proc")
	}
	b, err := engine.Open(engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	srv, err := server.New(b, server.Options{Credentials: map[string]string{"clitestid": "clitestsecret"}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Serve(ln); close(done) }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
	}()
	var stdout, stderr bytes.Buffer
	args := []string{"cycle", "--addr", ln.Addr().String(), "--access-key-id", "clitestid", "--access-key-secret", "clitestsecret",
		"--client", "sdk", "--server-pid", strconv.Itoa(os.Getpid()), "--producers", "2", "--consumers", "2", "--batch", "4",
		"--warmup", "100ms", "--duration", "700ms", "--progress=false"}
	if code := Run(context.Background(), args, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var res bench.Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	ceiling := res.CPUWallS*float64(res.CPUs) + 0.02
	if res.Client != "sdk" || res.Deleted == 0 || res.Errors != 0 || res.ServerPID != os.Getpid() ||
		res.ServerCPUS <= 0 || res.ServerCPUS > ceiling || res.ServerCPUUsPerMsg <= 0 ||
		res.ClientCPUS <= 0 || res.ClientCPUS > ceiling || res.ClientCPUUsPerMsg <= 0 || res.ClientCores <= 0 {
		t.Fatalf("result %s", stdout.String())
	}
	if !strings.Contains(stderr.String(), "client=sdk") || !strings.Contains(stderr.String(), "µs/msg deleted") {
		t.Fatalf("table:\n%s", stderr.String())
	}
}
