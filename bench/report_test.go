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
