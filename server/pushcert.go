package server

// The push signer (topic spec §3.6, "self-hosted signer"): an RSA-2048 key
// and its self-signed X.509 certificate. The engine signs every HTTP push
// with the key (engine.PushOptions.Signer); the server publishes the
// certificate, unauthenticated, at GET /x509_public_certificate.pem and at
// a versioned name (PushSigner.Path) that changes with the certificate, so
// receivers that cache certificates by URL never verify with a stale one.
// Pushes carry the versioned URL in x-mns-signing-cert-url.

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"github.com/valyala/fasthttp"
)

// PushSigner is the key pushes are signed with and its certificate.
type PushSigner struct {
	Key     *rsa.PrivateKey
	CertPEM []byte // the PEM certificate receivers verify with
	path    string
}

// Path is the versioned path the certificate is served at (and the
// unversioned /x509_public_certificate.pem serves the same).
func (p *PushSigner) Path() string { return p.path }

const pushCertBase = "/x509_public_certificate"

func newPushSigner(key *rsa.PrivateKey, certPEM []byte) (*PushSigner, error) {
	blk, _ := pem.Decode(certPEM)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, errors.New("server: push certificate: no PEM CERTIFICATE block")
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("server: push certificate: %w", err)
	}
	pub, ok := cert.PublicKey.(*rsa.PublicKey)
	if !ok || !pub.Equal(&key.PublicKey) {
		return nil, errors.New("server: push certificate does not match the push key (an RSA key is required)")
	}
	sum := sha256.Sum256(blk.Bytes)
	return &PushSigner{Key: key, CertPEM: certPEM, path: pushCertBase + "-" + hex.EncodeToString(sum[:8]) + ".pem"}, nil
}

// NewPushSigner generates a key and a self-signed certificate, valid for
// ten years.
func NewPushSigner() (*PushSigner, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("server: generate push key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "smqd push signer"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("server: create push certificate: %w", err)
	}
	return newPushSigner(key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// LoadPushSigner reads a PEM RSA private key (PKCS #1 or PKCS #8) and its
// PEM certificate.
func LoadPushSigner(keyFile, certFile string) (*PushSigner, error) {
	kb, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("server: push key: %w", err)
	}
	cb, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("server: push certificate: %w", err)
	}
	blk, _ := pem.Decode(kb)
	if blk == nil {
		return nil, fmt.Errorf("server: push key %s: no PEM block", keyFile)
	}
	var key *rsa.PrivateKey
	if k, err := x509.ParsePKCS1PrivateKey(blk.Bytes); err == nil {
		key = k
	} else if k8, err := x509.ParsePKCS8PrivateKey(blk.Bytes); err == nil {
		if rk, ok := k8.(*rsa.PrivateKey); ok {
			key = rk
		}
	}
	if key == nil {
		return nil, fmt.Errorf("server: push key %s: not an RSA private key", keyFile)
	}
	return newPushSigner(key, cb)
}

// LoadOrCreatePushSigner keeps the signer in dir (push-signing.key, mode
// 0600, and push-signing.crt): it loads them, or generates and writes them
// on the first start, so that receivers keep trusting the same certificate
// across restarts.
func LoadOrCreatePushSigner(dir string) (*PushSigner, error) {
	keyFile, certFile := filepath.Join(dir, "push-signing.key"), filepath.Join(dir, "push-signing.crt")
	if _, err := os.Stat(keyFile); err == nil {
		return LoadPushSigner(keyFile, certFile)
	}
	p, err := NewPushSigner()
	if err != nil {
		return nil, err
	}
	kb := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(p.Key)})
	if err := writeFileSync(certFile, p.CertPEM, 0o644); err != nil {
		return nil, err
	}
	if err := writeFileSync(keyFile, kb, 0o600); err != nil {
		return nil, err
	}
	return p, nil
}

// writeFileSync writes a file whole through a temporary name and fsyncs it.
func writeFileSync(name string, data []byte, perm os.FileMode) error {
	tmp := name + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, perm)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("server: write %s: %w", name, err)
	}
	return nil
}

// isPushCertPath reports whether path names the push certificate, either
// unversioned or versioned.
func isPushCertPath(path []byte) bool {
	if string(path) == pushCertBase+".pem" {
		return true
	}
	rest, ok := bytes.CutPrefix(path, []byte(pushCertBase+"-"))
	return ok && bytes.HasSuffix(rest, []byte(".pem")) && bytes.IndexByte(rest, '/') < 0
}

// servePushCert answers GET of the push certificate: public, like the real
// service's certificate files.
func (s *Server) servePushCert(ctx *fasthttp.RequestCtx, st *reqState, path []byte) {
	p := s.opts.PushSigner
	if p == nil || string(path) != pushCertBase+".pem" && string(path) != p.path {
		s.refuse(ctx, st, newAPIError(codeInvalidRequestURL, "no such push certificate"))
		return
	}
	ctx.Response.Header.Set("Content-Type", "application/x-pem-file")
	ctx.Response.Header.Set("Cache-Control", "public, max-age=3600")
	ctx.SetStatusCode(fasthttp.StatusOK)
	if !ctx.IsHead() {
		ctx.SetBody(p.CertPEM)
	}
}
