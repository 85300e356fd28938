package bench

import (
	"os"
	"strings"
	"testing"
)

// TestModuleRequiresNoPeerClients checks that smqd's go.mod requires no
// client library of a peer broker. Those live in the module bench/peers;
// with lazy module loading a module that imports engine (or any package
// of smqd) sees only what this go.mod lists, so nothing listed here means
// nothing in its module graph (`go list -m all`).
//
// Banned are the peer clients and their own dependencies by name, and
// whatever bench/peers/go.mod requires directly (but smqd itself), so that
// a client added there later is covered too.
//
// OpenTelemetry is not on the list: Badger (index's store) imports it
// (docs/architecture.md, "What embedding engine pulls in").
func TestModuleRequiresNoPeerClients(t *testing.T) {
	banned := []string{
		"github.com/nats-io/",              // nats.go, nkeys, nuid
		"github.com/redis/",                // go-redis
		"github.com/rabbitmq/",             // amqp091-go
		"go.uber.org/atomic",               // go-redis's
		"github.com/bsm/",                  // go-redis's tests
		"github.com/dgryski/go-rendezvous", // go-redis's
	}
	peers := requires(t, "peers/go.mod")
	direct := 0
	for _, r := range peers {
		if !r.indirect && r.path != "github.com/smqd/smqd" {
			banned = append(banned, r.path)
			direct++
		}
	}
	if direct < 3 {
		t.Fatalf("bench/peers/go.mod requires %d peer clients directly, want the NATS, Redis and RabbitMQ ones: %+v", direct, peers)
	}
	main := requires(t, "../go.mod")
	if len(main) < 5 {
		t.Fatalf("../go.mod: read %d requirements; the parser is broken", len(main))
	}
	for _, r := range main {
		for _, b := range banned {
			if strings.HasPrefix(r.path, b) {
				t.Errorf("go.mod:%d requires %s: peer clients belong in bench/peers/go.mod", r.line, r.path)
				break
			}
		}
	}
}

// requirement is one module a go.mod requires.
type requirement struct {
	path     string
	line     int
	indirect bool
}

// requires lists the requirements of a go.mod, single-line and in blocks.
func requires(t *testing.T, path string) []requirement {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []requirement
	block := false
	for i, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 0 || strings.HasPrefix(f[0], "//"):
			continue
		case f[0] == "require" && len(f) > 1 && f[1] == "(":
			block = true
			continue
		case f[0] == ")":
			block = false
			continue
		case f[0] == "require" && len(f) > 2:
			f = f[1:]
		case !block:
			continue
		}
		out = append(out, requirement{path: f[0], line: i + 1, indirect: strings.Contains(line, "// indirect")})
	}
	return out
}
