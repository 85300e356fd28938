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
