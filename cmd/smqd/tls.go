package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// certReloader serves the certificate of --tls-cert/--tls-key to every
// handshake (tls.Config.GetCertificate) and loads the pair again on
// SIGHUP, so that a renewed certificate takes effect without a restart.
// A pair that fails to load, or that its peers would refuse (expired or
// not yet valid; for the links between nodes also not issued by
// --cluster-tls-ca, or not for both client and server use), leaves the
// previous one in use: installing it would only fail later, at the next
// handshake, far from the reload that caused it.
type certReloader struct {
	what              string // in the log: "TLS certificate" (--tls-cert) or "cluster TLS certificate"
	certFile, keyFile string
	log               *slog.Logger
	cert              atomic.Pointer[tls.Certificate] // the pair in use; never nil after newCertReloader
	// check refuses a pair the peers would refuse; nil checks the
	// validity dates only.
	check func(*tls.Certificate) error
}

// newCertReloader loads the pair once; an error there stops the daemon.
// A pair outside its validity dates is logged as an error and served:
// clients that check it will refuse it, and those that do not (or pin
// it) go on working, so the daemon does not refuse to start for it.
func newCertReloader(certFile, keyFile string, log *slog.Logger) (*certReloader, error) {
	r := &certReloader{what: "TLS certificate", certFile: certFile, keyFile: keyFile, log: log}
	c, err := r.read()
	if err != nil {
		return nil, err
	}
	if err := checkValidNow(c); err != nil {
		log.Error(r.what+" is not valid now: clients that check it refuse it", "cert", certFile, "err", err)
	}
	r.cert.Store(c)
	return r, nil
}

// read loads and parses the pair (Leaf set).
func (r *certReloader) read() (*tls.Certificate, error) {
	c, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return nil, fmt.Errorf("load TLS certificate: %w", err)
	}
	if c.Leaf == nil { // LoadX509KeyPair sets it since Go 1.23
		if c.Leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return nil, fmt.Errorf("load TLS certificate: %w", err)
		}
	}
	if err := selfHandshake(&c); err != nil {
		return nil, fmt.Errorf("load TLS certificate: no handshake can use this pair: %w", err)
	}
	return &c, nil
}

// selfHandshake makes one handshake with c, over a pipe, to a client that
// checks nothing: a pair that loads but whose key crypto/tls cannot sign
// with (ECDSA on P-224, for one) would otherwise be installed and fail
// every handshake after it.
func selfHandshake(c *tls.Certificate) error {
	cli, srv := net.Pipe()
	defer cli.Close()
	defer srv.Close()
	deadline := time.Now().Add(10 * time.Second)
	cli.SetDeadline(deadline)
	srv.SetDeadline(deadline)
	done := make(chan error, 1)
	go func() {
		err := tls.Server(srv, &tls.Config{Certificates: []tls.Certificate{*c}}).Handshake()
		srv.Close()
		done <- err
	}()
	// The client verifies nothing: the dates and the chain are checked
	// elsewhere (check); this is about the key alone.
	cerr := tls.Client(cli, &tls.Config{InsecureSkipVerify: true}).Handshake() //nolint:gosec
	cli.Close()
	if serr := <-done; serr != nil {
		return serr
	}
	return cerr
}

// load reads the pair and installs it if the check passes.
func (r *certReloader) load() error {
	c, err := r.read()
	if err != nil {
		return err
	}
	check := r.check
	if check == nil {
		check = checkValidNow
	}
	if err := check(c); err != nil {
		return fmt.Errorf("%s: %w", r.certFile, err)
	}
	r.cert.Store(c)
	return nil
}

// checkValidNow refuses a certificate outside its validity dates.
func checkValidNow(c *tls.Certificate) error {
	now := time.Now()
	switch leaf := c.Leaf; {
	case now.After(leaf.NotAfter):
		return fmt.Errorf("the certificate expired at %s", leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(leaf.NotBefore):
		return fmt.Errorf("the certificate is not valid before %s", leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	return nil
}

// checkClusterCert refuses a node certificate that the other nodes would
// refuse: one that does not chain to the cluster's CA pool now, or is not
// for both server and client use (every node is both), or, when host is
// known (this node's address in --cluster-peers), does not name host.
func checkClusterCert(pool *x509.CertPool, host string) func(*tls.Certificate) error {
	return func(c *tls.Certificate) error {
		inter := x509.NewCertPool()
		for _, der := range c.Certificate[1:] {
			if ic, err := x509.ParseCertificate(der); err == nil {
				inter.AddCert(ic)
			}
		}
		for _, use := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			if _, err := c.Leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{use}}); err != nil {
				return fmt.Errorf("the other nodes would refuse this certificate (checked against --cluster-tls-ca): %w", err)
			}
		}
		if host != "" {
			if err := c.Leaf.VerifyHostname(host); err != nil {
				return fmt.Errorf("the other nodes dial this node at %s (--cluster-peers) and would refuse this certificate: %w", host, err)
			}
		}
		return nil
	}
}

// reload loads the pair again (on SIGHUP) and logs the outcome.
func (r *certReloader) reload() error {
	if err := r.load(); err != nil {
		r.log.Error(r.what+" not reloaded; the previous one stays in use", "err", err, "cert", r.certFile, "key", r.keyFile)
		return err
	}
	leaf := r.cert.Load().Leaf
	if leaf != nil {
		r.log.Info(r.what+" reloaded", "cert", r.certFile, "subject", leaf.Subject.String(), "not_after", leaf.NotAfter)
	} else {
		r.log.Info(r.what+" reloaded", "cert", r.certFile)
	}
	// The new key gets the start's warning (as the credentials file does
	// on its reload): renewal tools may write it with a looser umask.
	warnIfShared(r.log, r.keyFile, strings.Replace(r.what, "certificate", "key", 1))
	return nil
}

func (r *certReloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.cert.Load(), nil
}

// config is the TLS configuration of the API listener; the server adds its
// modern defaults (TLS 1.2 minimum, AEAD suites).
func (r *certReloader) config() *tls.Config {
	return &tls.Config{GetCertificate: r.getCertificate}
}

// notAfter is the end of the pair in use's validity, as Unix seconds (0
// if it cannot be read).
func (r *certReloader) notAfter() float64 {
	c := r.cert.Load()
	leaf := c.Leaf
	if leaf == nil && len(c.Certificate) > 0 {
		leaf, _ = x509.ParseCertificate(c.Certificate[0])
	}
	if leaf == nil {
		return 0
	}
	return float64(leaf.NotAfter.Unix())
}

// expiryGauge is smqd_tls_certificate_expiry_timestamp_seconds for the
// certificates of listener ("api": --tls-cert; "cluster":
// --cluster-tls-cert), following reloads: alert on it before it passes.
func (r *certReloader) expiryGauge(listener string) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "smqd_tls_certificate_expiry_timestamp_seconds",
		Help:        "When the TLS certificate in use stops being valid (its NotAfter, Unix seconds), by listener: api (--tls-cert) or cluster (--cluster-tls-cert).",
		ConstLabels: prometheus.Labels{"listener": listener},
	}, r.notAfter)
}
