package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testCA issues certificates for the checks of certReloader.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // its PEM
}

func newTestCA(t *testing.T, dir, name string) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &testCA{cert: cert, key: key, file: filepath.Join(dir, name+".pem")}
	os.WriteFile(ca.file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	return ca
}

// issue writes a certificate for 127.0.0.1 valid from..to with the given
// extended key usages, and its key, as name.pem and name-key.pem in dir.
func (ca *testCA) issue(t *testing.T, dir, name string, from, to time.Time, uses ...x509.ExtKeyUsage) (certFile, keyFile string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	return ca.issueKey(t, dir, name, key, from, to, uses...)
}

// issueKey is issue for a key of the caller's.
func (ca *testCA) issueKey(t *testing.T, dir, name string, key *ecdsa.PrivateKey, from, to time.Time, uses ...x509.ExtKeyUsage) (certFile, keyFile string) {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: from, NotAfter: to, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: uses,
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return certFile, keyFile
}

// replace puts the pair src in place of dst (the files the daemon reads).
func replacePair(t *testing.T, dst, src [2]string) {
	t.Helper()
	for i := range dst {
		b, err := os.ReadFile(src[i])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst[i], b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// servedCN is the subject CN of the pair r serves.
func servedCN(r *certReloader) string {
	c, _ := r.getCertificate(nil)
	return c.Leaf.Subject.CommonName
}

// liveReloader installs pair good as dir's live pair and returns it, a
// certReloader serving it, and the reloader's log.
func liveReloader(t *testing.T, dir string, good [2]string) ([2]string, *certReloader, *strings.Builder) {
	t.Helper()
	live := [2]string{filepath.Join(dir, "live.pem"), filepath.Join(dir, "live-key.pem")}
	replacePair(t, live, good)
	logs := new(strings.Builder)
	r, err := newCertReloader(live[0], live[1], slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return live, r, logs
}

// The API's certificate: a reload refuses an expired or not yet valid
// pair and keeps serving the one in use (it used to install it, report
// the reload as successful, and every client then refused the server);
// a start with an expired pair serves it and says so.
func TestCertReloaderRefusesAPairOutsideItsDates(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "ca")
	now, srv := time.Now(), x509.ExtKeyUsageServerAuth
	good := pair(ca.issue(t, dir, "good", now.Add(-time.Hour), now.Add(time.Hour), srv))
	expired := pair(ca.issue(t, dir, "expired", now.Add(-2*time.Hour), now.Add(-time.Hour), srv))
	early := pair(ca.issue(t, dir, "early", now.Add(time.Hour), now.Add(2*time.Hour), srv))
	live, r, logs := liveReloader(t, dir, good)
	for _, bad := range []struct {
		pair [2]string
		says string
	}{{expired, "the certificate expired at"}, {early, "the certificate is not valid before"}} {
		replacePair(t, live, bad.pair)
		logs.Reset()
		if err := r.reload(); err == nil || servedCN(r) != "good" || !strings.Contains(logs.String(), "not reloaded") || !strings.Contains(logs.String(), bad.says) {
			t.Errorf("reload of %s: err %v, serving %s; log:\n%s", filepath.Base(bad.pair[0]), err, servedCN(r), logs.String())
		}
	}
	replacePair(t, live, expired)
	logs.Reset()
	r, err := newCertReloader(live[0], live[1], slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil || servedCN(r) != "expired" || !strings.Contains(logs.String(), "is not valid now") {
		t.Fatalf("start with an expired pair: %v; log:\n%s", err, logs.String())
	}
}

func pair(cert, key string) [2]string { return [2]string{cert, key} }

// A node's certificate for the links between nodes is checked as the
// other nodes will check it: issued by --cluster-tls-ca, valid now, for
// both server and client use, naming the host of this node's
// --cluster-peers address. One that fails stops the node at start and is
// not installed by a reload. A reload used to install any pair that
// loaded, report success, and cut the node off at its links' next
// reconnection (every request through it then failed with 503).
func TestClusterCertIsCheckedAsThePeersWill(t *testing.T) {
	dir := t.TempDir()
	ca, other := newTestCA(t, dir, "ca"), newTestCA(t, dir, "other")
	now, both := time.Now(), []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	good := pair(ca.issue(t, dir, "good", now.Add(-time.Hour), now.Add(time.Hour), both...))
	bad := map[string][2]string{
		"another CA":      pair(other.issue(t, dir, "foreign", now.Add(-time.Hour), now.Add(time.Hour), both...)),
		"expired":         pair(ca.issue(t, dir, "expired", now.Add(-2*time.Hour), now.Add(-time.Hour), both...)),
		"server use only": pair(ca.issue(t, dir, "serveronly", now.Add(-time.Hour), now.Add(time.Hour), x509.ExtKeyUsageServerAuth)),
	}
	live := [2]string{filepath.Join(dir, "live.pem"), filepath.Join(dir, "live-key.pem")}
	cfg := func(peers string) *config {
		c := &config{}
		c.cluster = clusterConfig{nodeID: 1, raftListen: "127.0.0.1:7001", peers: peers, tlsCert: live[0], tlsKey: live[1], tlsCA: ca.file}
		return c
	}
	const peers = "1=127.0.0.1:7001,2=127.0.0.1:7002,3=127.0.0.1:7003"
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	for why, p := range bad {
		replacePair(t, live, p)
		if _, _, err := cfg(peers).clusterTLS(log); err == nil {
			t.Errorf("start with a certificate of %s: accepted", why)
		}
	}
	replacePair(t, live, good)
	if _, _, err := cfg("1=localhost:7001,2=127.0.0.1:7002,3=127.0.0.1:7003").clusterTLS(log); err == nil || !strings.Contains(err.Error(), "dial this node at localhost") {
		t.Errorf("start with a certificate that does not name this node's address: %v", err)
	}
	_, r, err := cfg(peers).clusterTLS(log)
	if err != nil {
		t.Fatal(err)
	}
	for why, p := range bad {
		replacePair(t, live, p)
		logs.Reset()
		if err := r.reload(); err == nil || servedCN(r) != "good" || !strings.Contains(logs.String(), "not reloaded") {
			t.Errorf("reload of a certificate of %s: err %v, serving %s; log:\n%s", why, err, servedCN(r), logs.String())
		}
	}
	replacePair(t, live, pair(ca.issue(t, dir, "renewed", now.Add(-time.Hour), now.Add(2*time.Hour), both...)))
	if err := r.reload(); err != nil || servedCN(r) != "renewed" {
		t.Fatalf("reload of a renewed certificate: %v, serving %s", err, servedCN(r))
	}
}
