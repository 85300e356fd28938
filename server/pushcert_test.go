package server

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/smqd/smqd/engine"
)

// TestPushCertServed: the push signer's certificate is public at the
// unversioned and the versioned path; nothing else under that name is.
func TestPushCertServed(t *testing.T) {
	signer, err := NewPushSigner()
	if err != nil {
		t.Fatal(err)
	}
	env := startEnv(t, envConfig{
		serverOpts: func(o *Options) { o.PushSigner = signer },
		engineOpts: func(o *engine.Options) {
			o.Push = engine.PushOptions{Signer: signer.Key, CertURL: "http://x" + signer.Path()}
		},
	})
	if !strings.HasPrefix(signer.Path(), "/x509_public_certificate-") || !strings.HasSuffix(signer.Path(), ".pem") {
		t.Fatalf("versioned path %q", signer.Path())
	}
	for _, c := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/x509_public_certificate.pem", 200},
		{"GET", signer.Path(), 200},
		{"HEAD", signer.Path(), 200},
		{"GET", "/x509_public_certificate-0123456789abcdef.pem", 400},
		{"POST", "/x509_public_certificate.pem", 400},
		{"GET", "/x509_public_certificate.pem/x", 400},
	} {
		req, _ := http.NewRequest(c.method, "http://"+env.addr+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Fatalf("%s %s: %d, want %d: %s", c.method, c.path, resp.StatusCode, c.status, body)
		}
		if c.status == 200 && c.method == "GET" && string(body) != string(signer.CertPEM) {
			t.Fatalf("%s %s: not the certificate: %s", c.method, c.path, body)
		}
	}

	// Without a signer there is no certificate.
	env2 := startEnv(t, envConfig{})
	resp, err := http.Get("http://" + env2.addr + "/x509_public_certificate.pem")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("no signer: %d", resp.StatusCode)
	}
}

// TestLoadOrCreatePushSigner: generated once, kept private, loaded the
// same afterwards; a certificate of another key is refused.
func TestLoadOrCreatePushSigner(t *testing.T) {
	dir := t.TempDir()
	a, err := LoadOrCreatePushSigner(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "push-signing.key"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v", fi.Mode().Perm())
	}
	b, err := LoadOrCreatePushSigner(dir)
	if err != nil {
		t.Fatal(err)
	}
	if a.Path() != b.Path() || !a.Key.Equal(b.Key) {
		t.Fatal("a second start made another signer")
	}
	other, err := NewPushSigner()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "push-signing.crt"), other.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreatePushSigner(dir); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("mismatched certificate: %v", err)
	}
}
