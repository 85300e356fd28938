package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// --metrics-listen: /metrics is served there and no longer on --listen;
// /healthz stays on --listen.
func TestDaemonMetricsListen(t *testing.T) {
	addr, stdout, _, stop := startDaemon(t, "--no-auth", "--data-dir", t.TempDir(), "--in-memory", "--metrics-listen", "127.0.0.1:0")
	defer stop()
	m := regexp.MustCompile(`http://(127\.0\.0\.1:\d+)/metrics`).FindStringSubmatch(stdout.String())
	if m == nil || m[1] == addr {
		t.Fatalf("banner without a separate metrics address:\n%s", stdout.String())
	}
	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	if st, body := get("http://" + m[1] + "/metrics"); st != 200 || !strings.Contains(body, "smqd_http_connections_max 16384") {
		t.Fatalf("metrics address: %d %.200s", st, body)
	}
	if st, body := get("http://" + addr + "/metrics"); st != 400 || !strings.Contains(body, "<Code>InvalidRequestURL</Code>") {
		t.Fatalf("API address /metrics: %d %s", st, body)
	}
	if st, body := get("http://" + addr + "/healthz"); st != 200 || body != "ok" {
		t.Fatalf("API address /healthz: %d %s", st, body)
	}
}

// Plain HTTP on a non-loopback address is warned about; on loopback it is
// not.
func TestDaemonWarnsPlainHTTP(t *testing.T) {
	_, _, stderr, stop := startDaemon(t, "--no-auth", "--in-memory", "--data-dir", t.TempDir(), "--listen", "0.0.0.0:0")
	stop()
	if !strings.Contains(stderr.String(), "serving plain HTTP on a non-loopback address") {
		t.Fatalf("no warning for 0.0.0.0:\n%s", stderr.String())
	}
	_, _, stderr, stop = startDaemon(t, "--no-auth", "--in-memory", "--data-dir", t.TempDir())
	stop()
	if strings.Contains(stderr.String(), "plain HTTP") {
		t.Fatalf("warning for loopback:\n%s", stderr.String())
	}
}

// writeCert writes a self-signed certificate with the given serial and its
// key as PEM files.
func writeCert(t *testing.T, certFile, keyFile string, serial int64) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "t"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
}

// The reloader serves the pair loaded last; a pair that fails to load
// leaves the previous one in use.
func TestCertReloader(t *testing.T) {
	dir := t.TempDir()
	cf, kf := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	writeCert(t, cf, kf, 1)
	var logs strings.Builder
	r, err := newCertReloader(cf, kf, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	serial := func() int64 {
		c, _ := r.config().GetCertificate(nil)
		return c.Leaf.SerialNumber.Int64()
	}
	if serial() != 1 {
		t.Fatal("first pair not served")
	}
	writeCert(t, cf, kf, 2)
	r.reload()
	if serial() != 2 {
		t.Fatal("reloaded pair not served")
	}
	os.WriteFile(kf, []byte("not a key"), 0o600)
	r.reload()
	if serial() != 2 || !strings.Contains(logs.String(), "not reloaded") {
		t.Fatalf("a broken pair replaced the good one (serial %d); log:\n%s", serial(), logs.String())
	}
	if _, err := newCertReloader(cf, kf, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("a broken pair accepted at start")
	}
}
