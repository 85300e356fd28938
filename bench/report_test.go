package bench

import (
	"strings"
	"testing"
)

// TestReportPeers checks that every target but smqd's own and the baseline
// is a peer, whatever its name (a new peer needs no list here).
func TestReportPeers(t *testing.T) {
	rs := []Result{
		{Label: "b16", Target: "smqd", Workload: "cycle", DeletedPerS: 300},
		{Label: "b16", Target: "inproc", Workload: "cycle", DeletedPerS: 900},
		{Label: "b16", Target: "rabbitmq", Workload: "cycle", DeletedPerS: 100},
		{Label: "b16", Target: "redis", Workload: "cycle", DeletedPerS: 200},
	}
	var b strings.Builder
	if err := WriteReport(&b, rs, "smqd"); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"1.50x (redis)", "smqd / rabbitmq", "smqd / redis"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "smqd / inproc") || strings.Contains(out, "smqd / smqd") {
		t.Errorf("smqd's own targets compared as peers:\n%s", out)
	}
}

// TestReportCPUAndClients checks the CPU columns (ratios for µs/msg, none
// for core shares) and that smqd driven by the SDK-like client is a row of
// its own, neither the baseline nor a peer.
func TestReportCPUAndClients(t *testing.T) {
	rs := []Result{
		{Label: "b1", Target: "smqd", Client: "fast", Workload: "cycle", DeletedPerS: 300, ServerCPUUsPerMsg: 10, ClientCPUUsPerMsg: 5, ServerCores: 1.1, ClientCores: 0.6},
		{Label: "b1", Target: "smqd", Client: "sdk", Workload: "cycle", DeletedPerS: 100, ServerCPUUsPerMsg: 12, ClientCPUUsPerMsg: 40, ServerCores: 0.5, ClientCores: 1.2},
		{Label: "b1", Target: "redis-streams", Workload: "cycle", DeletedPerS: 200, ServerCPUUsPerMsg: 20, ClientCPUUsPerMsg: 8, ServerCores: 0.9, ClientCores: 0.7},
	}
	var b strings.Builder
	if err := WriteReport(&b, rs, "smqd"); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"srv µs/msg", "cli cores", "smqd/sdk", "1.50x (redis-streams)", "0.50x (redis-streams)", "0.62x (redis-streams)"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "smqd / smqd/sdk") || strings.Contains(out, "1.22x") {
		t.Errorf("the sdk row compared as a peer, or core shares given a ratio:\n%s", out)
	}
	b.Reset()
	if err := WriteReport(&b, rs, "smqd/sdk"); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, "smqd/sdk / redis-streams") || strings.Contains(out, "smqd/sdk / smqd\t") {
		t.Errorf("sdk baseline:\n%s", out)
	}
}

// TestReportKeepsShapesApart: runs of one label (every run without
// --label) but of other workloads or batches are not one median: a
// produce, a consume and two publish runs made one "produce" row, its
// sent/s the median of the four.
func TestReportKeepsShapesApart(t *testing.T) {
	rs := []Result{
		{Target: "smqd", Workload: "produce", Producers: 4, SendBatch: 16, RecvBatch: 16, DeleteBatch: 16, SentPerS: 9000},
		{Target: "smqd", Workload: "produce", Producers: 4, SendBatch: 16, RecvBatch: 16, DeleteBatch: 16, SentPerS: 8000},
		{Target: "smqd", Workload: "produce", Producers: 4, SendBatch: 1, RecvBatch: 1, DeleteBatch: 1, SentPerS: 1500},
		{Target: "smqd", Workload: "consume", Consumers: 4, SendBatch: 16, RecvBatch: 16, DeleteBatch: 16, DeletedPerS: 3},
	}
	var b strings.Builder
	if err := WriteReport(&b, rs, "smqd"); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"== -: produce, 4P/0C, body 0 B, batch 16/16/16", "== -: produce, 4P/0C, body 0 B, batch 1/1/1", "== -: consume, 0P/4C", "8500 (8000..9000)"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

// TestReportTieNamesOnePeer: among peers of the same median the best is
// the first by name, every time (the map's order named one at random:
// "1.00x (beanstalkd)" or "1.00x (redis)" for the published rate1000 runs).
func TestReportTieNamesOnePeer(t *testing.T) {
	rs := []Result{
		{Label: "rate1000", Target: "smqd", Workload: "cycle", DeletedPerS: 1000},
		{Label: "rate1000", Target: "redis", Workload: "cycle", DeletedPerS: 1000},
		{Label: "rate1000", Target: "nats", Workload: "cycle", DeletedPerS: 1000},
		{Label: "rate1000", Target: "beanstalkd", Workload: "cycle", DeletedPerS: 1000},
	}
	for i := 0; i < 20; i++ {
		var b strings.Builder
		if err := WriteReport(&b, rs, "smqd"); err != nil {
			t.Fatal(err)
		}
		if out := b.String(); !strings.Contains(out, "1.00x (beanstalkd)") {
			t.Fatalf("report %d names another peer best:\n%s", i, out)
		}
	}
}

// TestFlowControlledFillIsNoGrowth: a cycle held by flow control whose
// backlog only filled up to the limit (a window with no warm-up starts
// empty) is not flagged: "0 -> 73 (tolerance 27; producers held at 80
// outstanding): GREW" said its deleted rate was not sustainable.
func TestFlowControlledFillIsNoGrowth(t *testing.T) {
	r := &runner{cfg: Config{Workload: Cycle, Producers: 8, Consumers: 8, SendBatch: 1, RecvBatch: 1, DeleteBatch: 1, Queues: 1}}
	for _, c := range []struct {
		start, end int64
		grew       bool
	}{{0, 73, false}, {0, 80 + 24, false}, {0, 80 + 25, true}, {70, 80, false}, {0, 400, true}} {
		res := &Result{MaxBacklog: 80, BacklogStart: c.start, BacklogEnd: c.end}
		r.finish(res)
		if res.BacklogGrew != c.grew {
			t.Errorf("backlog %d -> %d held at 80: grew %v (tolerance %d), want %v", c.start, c.end, res.BacklogGrew, res.BacklogTolerance, c.grew)
		}
	}
}
