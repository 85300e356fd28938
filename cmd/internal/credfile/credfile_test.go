package credfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A file is read in order; one that names a key id twice is refused
// (smqd kept the last secret and smqctl signed with the first).
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		p := filepath.Join(dir, "c")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	keys, err := Load(write("# keys\nA secretA\n\nB secretB\n"))
	if err != nil || len(keys) != 2 || keys[0] != (Key{"A", "secretA"}) || keys[1] != (Key{"B", "secretB"}) {
		t.Fatalf("%v %v", keys, err)
	}
	for body, want := range map[string]string{
		"A one\nA two\n": "c:2: key id A is on line 1 already",
		"A one two\n":    "c:1: want",
		"# none\n":       "holds no access key",
	} {
		if _, err := Load(write(body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", body, err, want)
		}
	}
}
