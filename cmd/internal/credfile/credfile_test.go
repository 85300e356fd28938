package credfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/smqd/smqd/server/mnsauth"
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
	for _, body := range []string{"good s1\nap:p s2\n", "good s1\nap\x01p s2\n", "good s1\nap\x7fp s2\n"} {
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "c:2:") {
			t.Errorf("%q: %v, want an error naming line 2", body, err)
		}
	}
}

// FuzzLoad: Load never panics on any file, and every key it takes is one
// a request can be signed with: its id goes into an Authorization header
// that Go's HTTP client (smqctl, the Go SDK) sends and that the server's
// parser splits back into the same id; its secret is not empty.
func FuzzLoad(f *testing.F) {
	for _, s := range []string{"# keys\nA secretA\n\nB secretB\n", "A one\nA two\n", "A one two\n", "# none\n",
		"good s1\nap:p s2\n", "good s1\nap\x01p s2\n", "good s1\nap\x7fp s2\n", "\tA\tB\t\r\n", "A\u0085B c\n"} {
		f.Add([]byte(s))
	}
	p := filepath.Join(f.TempDir(), "c")
	f.Fuzz(func(t *testing.T, body []byte) {
		if err := os.WriteFile(p, body, 0o600); err != nil {
			t.Fatal(err)
		}
		keys, err := Load(p)
		if err != nil {
			return
		}
		for _, k := range keys {
			if k.ID == "" || k.Secret == "" {
				t.Fatalf("%q: key %q", body, k)
			}
			v := "MNS " + k.ID + ":c2lnbmF0dXJl"
			if !validHeaderValue(v) {
				t.Fatalf("%q: key id %q makes an Authorization header no HTTP client sends", body, k.ID)
			}
			if id, _, ok := mnsauth.ParseAuthorization([]byte(v)); !ok || string(id) != k.ID {
				t.Fatalf("%q: key id %q parses back as %q (%v)", body, k.ID, id, ok)
			}
		}
	})
}

// validHeaderValue reports whether net/http sends v as a header value: it
// refuses a request with a control character other than a tab in one
// (httpguts.ValidHeaderFieldValue, RFC 7230 field-content).
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if b := v[i]; b < ' ' && b != '\t' || b == 0x7f {
			return false
		}
	}
	return true
}
