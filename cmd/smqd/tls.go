package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// certReloader serves the certificate of --tls-cert/--tls-key to every
// handshake (tls.Config.GetCertificate) and loads the pair again on
// SIGHUP, so that a renewed certificate takes effect without a restart.
// A pair that fails to load leaves the previous one in use.
type certReloader struct {
	what              string // in the log: "TLS certificate" (--tls-cert) or "cluster TLS certificate"
	certFile, keyFile string
	log               *slog.Logger
	cert              atomic.Pointer[tls.Certificate] // the pair in use; never nil after newCertReloader
}

// newCertReloader loads the pair once; an error there stops the daemon.
func newCertReloader(certFile, keyFile string, log *slog.Logger) (*certReloader, error) {
	r := &certReloader{what: "TLS certificate", certFile: certFile, keyFile: keyFile, log: log}
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *certReloader) load() error {
	c, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("load TLS certificate: %w", err)
	}
	r.cert.Store(&c)
	return nil
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
		return nil
	}
	r.log.Info(r.what+" reloaded", "cert", r.certFile)
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
