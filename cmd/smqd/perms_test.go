package main

import (
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/smqd/smqd/server/mnsauth"
)

// Every file and directory under the data directory is the owner's alone
// (no permission bit for group or others) after a start, a create, a send
// and a stop, in every auth mode.
func TestDaemonPrivateFiles(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no unix permissions")
	}
	keysFile := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keysFile, []byte("fileid filesecret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		args       []string
		id, secret string // "" with auth on: the generated pair
	}{
		{"generated keys", nil, "", ""},
		{"no auth", []string{"--no-auth"}, "", ""},
		{"keys by flag", []string{"--access-key-id", "flagid", "--access-key-secret", "flagsecret"}, "flagid", "flagsecret"},
		{"keys file", []string{"--credentials-file", keysFile}, "fileid", "filesecret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			addr, _, stderr, stop := startDaemon(t, append([]string{"--data-dir", dir, "--sync", "always"}, tc.args...)...)
			id, secret := tc.id, tc.secret
			if id == "" && tc.name == "generated keys" {
				creds, err := loadCredentials(filepath.Join(dir, defaultCredentialsName))
				if err != nil {
					t.Fatal(err)
				}
				for id, secret = range creds {
				}
			}
			do := func(method, path, body string) {
				t.Helper()
				r, _ := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
				if body != "" {
					r.Header.Set("Content-Type", "text/xml")
					r.Header.Set("Content-MD5", string(mnsauth.AppendContentMD5(nil, []byte(body))))
				}
				if id != "" {
					mnsauth.NewKey(id, secret).SignHTTP(r)
				}
				resp, err := http.DefaultClient.Do(r)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 201 {
					t.Fatalf("%s %s: %d", method, path, resp.StatusCode)
				}
			}
			do("PUT", "/queues/q", "")
			do("POST", "/queues/q/messages", "<Message><MessageBody>private</MessageBody></Message>")
			if code := stop(); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			var open []string
			err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				info, err := d.Info()
				if err != nil {
					return err
				}
				if info.Mode().Perm()&0o077 != 0 {
					rel, _ := filepath.Rel(dir, path)
					open = append(open, fmt.Sprintf("%s %v", rel, info.Mode()))
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(open) > 0 {
				t.Fatalf("open to group or others under the data directory:\n  %s", strings.Join(open, "\n  "))
			}
		})
	}
}

// An existing data directory open to others is reported at start.
func TestDaemonWarnsOpenDataDir(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no unix permissions")
	}
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // the umask may mask a Mkdir mode
		t.Fatal(err)
	}
	_, _, stderr, stop := startDaemon(t, "--data-dir", dir, "--no-auth")
	stop()
	if !strings.Contains(stderr.String(), "the data directory is open to other users") {
		t.Fatalf("no warning for a 0755 data directory:\n%s", stderr.String())
	}
	dir2 := filepath.Join(t.TempDir(), "data")
	_, _, stderr, stop = startDaemon(t, "--data-dir", dir2, "--no-auth")
	stop()
	if strings.Contains(stderr.String(), "open to other users") {
		t.Fatalf("warning for a data directory smqd created:\n%s", stderr.String())
	}
}

// A --push-key-file open to others gets the warning every other key gets
// (it had none).
func TestDaemonWarnsOpenPushKey(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no unix permissions")
	}
	d1 := filepath.Join(t.TempDir(), "d1")
	_, _, _, stop := startDaemon(t, "--data-dir", d1, "--no-auth") // makes push-signing.key and .crt
	stop()
	key, cert := filepath.Join(d1, "push-signing.key"), filepath.Join(d1, "push-signing.crt")
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, stderr, stop := startDaemon(t, "--data-dir", filepath.Join(t.TempDir(), "d2"), "--no-auth", "--push-key-file", key, "--push-cert-file", cert)
	stop()
	if !strings.Contains(stderr.String(), "the push signing key is readable by other users") {
		t.Fatalf("no warning for a 0644 push key:\n%s", stderr.String())
	}
}
