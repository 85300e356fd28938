package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"
)

// issueP224 writes a certificate for 127.0.0.1 whose key is on P-224: it
// parses and its key matches, but crypto/tls cannot sign a handshake with
// it, so a server that serves it fails every handshake.
func (ca *testCA) issueP224(t *testing.T, dir, name string) (certFile, keyFile string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	now := time.Now()
	return ca.issueKey(t, dir, name, key, now.Add(-time.Hour), now.Add(time.Hour), x509.ExtKeyUsageServerAuth)
}

// handshakeWith makes one TLS handshake, over a pipe, against a server
// configured as the API listener is (r.config()), trusting ca.
func handshakeWith(t *testing.T, r *certReloader, ca *testCA) error {
	t.Helper()
	c, s := net.Pipe()
	defer c.Close()
	defer s.Close()
	deadline := time.Now().Add(10 * time.Second) // bounds a stuck handshake; not an assertion
	c.SetDeadline(deadline)
	s.SetDeadline(deadline)
	go func() {
		tls.Server(s, r.config()).Handshake()
		s.Close()
	}()
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return tls.Client(c, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}).Handshake()
}

// A reload must not install a pair that loads and is within its dates but
// that no handshake can use (a key crypto/tls cannot sign with, here
// ECDSA P-224): it used to be installed and reported as reloaded
// ("TLS certificate reloaded", smqd_config_last_reload_successful 1), and
// every new connection then failed its handshake (faults2 audit).
func TestCertReloaderRefusesAPairNoHandshakeCanUse(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "ca")
	now := time.Now()
	good := pair(ca.issue(t, dir, "good", now.Add(-time.Hour), now.Add(time.Hour), x509.ExtKeyUsageServerAuth))
	p224 := pair(ca.issueP224(t, dir, "p224"))
	live, r, logs := liveReloader(t, dir, good)
	if err := handshakeWith(t, r, ca); err != nil {
		t.Fatalf("handshake with the good pair: %v", err)
	}
	replacePair(t, live, p224)
	logs.Reset()
	err := r.reload()
	if hs := handshakeWith(t, r, ca); err == nil || servedCN(r) != "good" || hs != nil || !strings.Contains(logs.String(), "not reloaded") {
		t.Fatalf("reload of a P-224 pair: err %v, serving %s, handshake after it: %v; log:\n%s", err, servedCN(r), hs, logs.String())
	}
	// At start such a pair is refused like one that does not load.
	if _, err := newCertReloader(live[0], live[1], slog.New(slog.NewTextHandler(logs, nil))); err == nil {
		t.Fatal("start with a P-224 pair: accepted; every handshake would fail")
	}
}
