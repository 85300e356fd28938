package engine

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportDirection checks the dependency direction of STYLE.md §1 with
// go list: lower packages never import higher ones (direct imports; engine
// may pass wal and index through, e.g. its Options nest theirs). Leaf
// packages that import nothing of smqd's (server/mnsauth: the MNS signature,
// shared by the server, the bench and smqctl) may be imported from anywhere.
func TestImportDirection(t *testing.T) {
	const mod = "github.com/smqd/smqd/"
	leaves := []string{"server/mnsauth"}
	forbidden := map[string][]string{
		"wal":              {"engine", "index", "server", "bench", "cmd"},
		"index":            {"engine", "wal", "server", "bench", "cmd"},
		"engine":           {"server", "bench", "cmd"},
		"server":           {"bench", "cmd", "index"},
		"bench":            {"server", "wal", "index", "cmd"},
		"cmd/smqbench/cli": {"server", "index"},
		"server/mnsauth":   {"engine", "wal", "index", "server", "bench", "cmd"},
		"engine/archive":   {"engine", "wal", "index", "server", "bench", "cmd"},
	}
	for pkg, bad := range forbidden {
		out, err := exec.Command("go", "list", "-f", `{{join .Imports " "}}`, mod+pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", pkg, err, out)
		}
	deps:
		for _, dep := range strings.Fields(string(out)) {
			for _, l := range leaves {
				if dep == mod+l && pkg != l {
					continue deps
				}
			}
			for _, b := range bad {
				if dep == mod+b || strings.HasPrefix(dep, mod+b+"/") {
					t.Errorf("%s imports %s", pkg, dep)
				}
			}
		}
	}
	// engine must not pull in fasthttp or Badger's HTTP-free users above it.
	out, _ := exec.Command("go", "list", "-deps", mod+"engine").CombinedOutput()
	if strings.Contains(string(out), "github.com/valyala/fasthttp") {
		t.Error("engine imports fasthttp")
	}
}

// TestEngineModules pins the modules whose packages a program that embeds
// engine compiles (go list -deps): smqd's own, Badger's and what Badger
// imports (OpenTelemetry's API among them: Badger opens a tracing span per
// compaction and value-log GC, a no-op unless the program installs a
// tracer), klauspost/compress and xxhash. docs/architecture.md ("What
// embedding engine pulls in") lists them: change both together. A peer
// client (NATS, Redis, RabbitMQ), the Prometheus client, etcd raft or
// fasthttp here fails it.
func TestEngineModules(t *testing.T) {
	want := []string{
		"github.com/cespare/xxhash/v2",
		"github.com/dgraph-io/badger/v4",
		"github.com/dgraph-io/ristretto/v2",
		"github.com/dustin/go-humanize",
		"github.com/go-logr/logr",
		"github.com/go-logr/stdr",
		"github.com/google/flatbuffers",
		"github.com/klauspost/compress",
		"github.com/smqd/smqd",
		"go.opentelemetry.io/auto/sdk",
		"go.opentelemetry.io/otel",
		"go.opentelemetry.io/otel/metric",
		"go.opentelemetry.io/otel/trace",
		"golang.org/x/sys",
		"google.golang.org/protobuf",
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", "github.com/smqd/smqd/engine").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	got := map[string]bool{}
	for _, m := range strings.Fields(string(out)) {
		got[m] = true
	}
	for _, m := range want {
		if !got[m] {
			t.Errorf("engine no longer compiles packages of %s: update the list and docs/architecture.md", m)
		}
		delete(got, m)
	}
	for m := range got {
		t.Errorf("engine compiles packages of %s, not in the list: an embedding program gets it (docs/architecture.md)", m)
	}
}
