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
