package chaos

// A certificate authority and node certificates for tests of TLS between
// nodes (--cluster-tls-*): ECDSA P-256, every certificate for 127.0.0.1
// (the harness's nodes and proxies) and for both TLS uses, since a node
// dials and accepts.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// WriteTestPKI writes into dir a CA (ca.pem) and, for each name, a
// certificate signed by it (name.pem, name-key.pem; keys 0600), all valid
// from an hour ago for validFor. It returns the CA's file and each name's
// certificate and key files.
func WriteTestPKI(dir string, validFor time.Duration, names ...string) (caFile string, pairs map[string][2]string, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", nil, err
	}
	validity := func(c *x509.Certificate) *x509.Certificate {
		c.NotBefore, c.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(validFor)
		return c
	}
	caTmpl := validity(&x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test cluster CA"},
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign})
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return "", nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return "", nil, err
	}
	write := func(name, typ string, der []byte) (string, error) {
		f := filepath.Join(dir, name)
		return f, os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
	}
	if caFile, err = write("ca.pem", "CERTIFICATE", caDER); err != nil {
		return "", nil, err
	}
	pairs = map[string][2]string{}
	for i, name := range names {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return "", nil, err
		}
		tmpl := validity(&x509.Certificate{SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: name},
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}})
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			return "", nil, err
		}
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return "", nil, err
		}
		cert, err1 := write(name+".pem", "CERTIFICATE", der)
		keyFile, err2 := write(name+"-key.pem", "EC PRIVATE KEY", kder)
		if err := errors.Join(err1, err2); err != nil {
			return "", nil, err
		}
		pairs[name] = [2]string{cert, keyFile}
	}
	return caFile, pairs, nil
}
