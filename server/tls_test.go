package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/smqd/smqd/server/mnsauth"
)

// selfSigned returns a certificate for 127.0.0.1 and localhost and a pool
// that trusts it.
func selfSigned(t testing.TB) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "smqd test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// With Options.TLS the API is HTTPS only, TLS 1.2 at least, and a request
// signed the SDK way over it is served.
func TestTLS(t *testing.T) {
	cert, pool := selfSigned(t)
	env := startEnv(t, envConfig{serverOpts: func(o *Options) { o.TLS = &tls.Config{Certificates: []tls.Certificate{cert}} }})
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	key := mnsauth.NewKey(testKeyID, testSecret)
	do := func(method, path, body string) *http.Response {
		t.Helper()
		return doHTTPS(t, hc, key, method, "https://"+env.addr+path, body)
	}
	if resp := do("PUT", "/queues/q", ""); resp.StatusCode != 201 || resp.Header.Get("Location") != "https://"+env.addr+"/queues/q" {
		t.Fatalf("create over TLS: %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp := do("POST", "/queues/q/messages", sendBody("secret", ""))
	if resp.StatusCode != 201 || resp.TLS == nil || resp.TLS.Version < tls.VersionTLS12 {
		t.Fatalf("send over TLS: %d %+v", resp.StatusCode, resp.TLS)
	}
	// A client offering h2 is told HTTP/1.1 by ALPN.
	conn, err := tls.Dial("tcp", env.addr, &tls.Config{RootCAs: pool, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	if p := conn.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
		t.Fatalf("ALPN chose %q", p)
	}
	conn.Close()
	// Plain HTTP is refused, with an MNS error that says why and the
	// connection closed (it used to be closed without a word: "EOF").
	c := env.client()
	r, err := c.rawErrNoRetry("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	if err != nil || r.status != 400 || !r.close || !strings.Contains(string(r.body), "<Code>InvalidRequestURL</Code>") ||
		!strings.Contains(string(r.body), "https://") || !strings.Contains(string(r.body), "<RequestId>") {
		t.Fatalf("plain HTTP on the TLS listener: %+v, %v", r, err)
	}
	c.conn.Close()
	// Bytes that are neither TLS nor HTTP get nothing.
	raw, err := net.Dial("tcp", env.addr)
	if err != nil {
		t.Fatal(err)
	}
	raw.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(raw, "\x00\x01garbage\r\n\r\n")
	if b, _ := io.ReadAll(raw); len(b) != 0 {
		t.Fatalf("garbage on the TLS listener answered %q", b)
	}
	raw.Close()
	// No TLS 1.2 suite without forward secrecy or AEAD is offered.
	for _, id := range env.srv.opts.TLS.CipherSuites {
		name := tls.CipherSuiteName(id)
		if !strings.HasPrefix(name, "TLS_ECDHE_") || !(strings.Contains(name, "GCM") || strings.Contains(name, "CHACHA20")) {
			t.Errorf("cipher suite %s offered", name)
		}
	}
	if _, err := New(env.broker, Options{NoAuth: true, TLS: &tls.Config{}}); err == nil {
		t.Fatal("TLS without a certificate accepted")
	}
}

// TLS 1.0 and 1.1 are refused even when the configuration names a suite
// they could use and no minimum version.
func TestTLSMinimumVersion(t *testing.T) {
	cert, pool := selfSigned(t)
	env := startEnv(t, envConfig{serverOpts: func(o *Options) {
		o.TLS = &tls.Config{Certificates: []tls.Certificate{cert},
			CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}}
	}})
	for _, v := range []uint16{tls.VersionTLS10, tls.VersionTLS11} {
		old := &tls.Config{RootCAs: pool, MinVersion: v, MaxVersion: v,
			CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}}
		if c, err := tls.Dial("tcp", env.addr, old); err == nil {
			c.Close()
			t.Fatalf("a %s handshake succeeded", tls.VersionName(v))
		}
	}
	c, err := tls.Dial("tcp", env.addr, &tls.Config{RootCAs: pool, MaxVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("TLS 1.2: %v", err)
	}
	c.Close()
}

// doHTTPS sends a request signed with key through hc, reads its body
// away and returns the response.
func doHTTPS(t testing.TB, hc *http.Client, key *mnsauth.Key, method, url, body string) *http.Response {
	t.Helper()
	r, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		r.Header.Set("Content-Type", "text/xml")
		r.Header.Set("Content-MD5", string(mnsauth.AppendContentMD5(nil, []byte(body))))
	}
	key.SignHTTP(r)
	resp, err := hc.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}
