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
// OpenTelemetry is not on the list: Badger (index's store) imports it.
func TestModuleRequiresNoPeerClients(t *testing.T) {
	data, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	banned := []string{
		"github.com/nats-io/",              // nats.go, nkeys, nuid
		"github.com/redis/",                // go-redis
		"github.com/rabbitmq/",             // amqp091-go
		"go.uber.org/atomic",               // go-redis's
		"github.com/bsm/",                  // go-redis's tests
		"github.com/dgryski/go-rendezvous", // go-redis's
	}
	for i, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "//") {
			continue
		}
		mod := f[0]
		if mod == "require" && len(f) > 1 {
			mod = f[1]
		}
		for _, b := range banned {
			if strings.HasPrefix(mod, b) {
				t.Errorf("go.mod:%d requires %s: peer clients belong in bench/peers/go.mod", i+1, mod)
			}
		}
	}
}
