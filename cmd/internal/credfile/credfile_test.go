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

// authaudit (2026-12-07): an id no request can sign with (a ':' ends the
// id in "MNS <id>:<signature>"; a control character) is refused naming
// its line, as a repeated id is. It was taken here and refused later by
// the server with "access key id must not contain ':' or blanks", naming
// neither the file nor the line.
func TestLoadRefusesAnIDNoRequestCanSign(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c")
	for _, body := range []string{"good s1\nap:p s2\n", "good s1\nap\x01p s2\n"} {
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "c:2:") {
			t.Errorf("%q: %v, want an error naming line 2", body, err)
		}
	}
}
