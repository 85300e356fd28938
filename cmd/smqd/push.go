package main

// HTTP push flags (topic spec §3.5, §3.6): where pushes may go, how many
// run at once, and the signer whose certificate receivers verify with.

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/server"
)

type pushConfig struct {
	allow       string
	concurrency int
	maxConns    int
	timeout     time.Duration
	lease       time.Duration
	keyFile     string
	certFile    string
	certURL     string
}

func (p *pushConfig) flags(fs *flag.FlagSet) {
	fs.StringVar(&p.allow, "push-allow", "127.0.0.0/8,::1/128", "comma-separated CIDR prefixes and host names that HTTP subscription endpoints may point at; anything else is refused at Subscribe (400 EndpointInvalid) and at connect time (default: loopback only, so a subscription cannot probe your network)")
	fs.IntVar(&p.concurrency, "push-concurrency", 16, "pushes in flight to one endpoint (scheme, host and port) at most")
	fs.IntVar(&p.maxConns, "push-max-conns", engine.DefaultPushMaxConns, "connections to push endpoints open at once at most, over all endpoints, busy or idle (they count against the open-file limit)")
	fs.DurationVar(&p.timeout, "push-timeout", 5*time.Second, "time an endpoint has to answer a push with 2xx before the attempt counts as failed")
	fs.DurationVar(&p.lease, "push-lease", 60*time.Second, "how long a notification being pushed (or relayed to a queue on another shard) stays invisible to other workers; after a crash or a change of leader it is pushed again once this ends. At least 2 x --push-timeout and 10s")
	fs.StringVar(&p.keyFile, "push-key-file", "", "PEM RSA private key that signs pushes (with --push-cert-file; default: generated at the first start and kept in <data-dir>/push-signing.key)")
	fs.StringVar(&p.certFile, "push-cert-file", "", "PEM certificate of --push-key-file, served at /x509_public_certificate.pem")
	fs.StringVar(&p.certURL, "push-cert-url", "", "URL receivers fetch the push certificate from, sent in x-mns-signing-cert-url (default: this server's --listen address and the certificate's versioned path)")
}

func (p *pushConfig) validate() error {
	if (p.keyFile == "") != (p.certFile == "") {
		return errors.New("--push-key-file and --push-cert-file go together")
	}
	if p.concurrency <= 0 || p.concurrency > 1024 {
		return errors.New("--push-concurrency must be between 1 and 1024")
	}
	if p.maxConns <= 0 || p.maxConns > 65536 {
		return errors.New("--push-max-conns must be between 1 and 65536")
	}
	if p.timeout <= 0 {
		return errors.New("--push-timeout must be positive")
	}
	if p.lease < 2*p.timeout || p.lease < 10*time.Second {
		return fmt.Errorf("--push-lease %v must be at least 2 x --push-timeout (%v) and 10s: a notification must stay hidden while it is pushed or relayed", p.lease, 2*p.timeout)
	}
	if p.certURL != "" {
		// Receivers fetch it to check every push's signature: a typo
		// ("htp:/host") was sent as given, and no push could be verified.
		if u, err := url.Parse(p.certURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--push-cert-url must be an http:// or https:// URL with a host, not %q", p.certURL)
		}
	}
	for _, a := range p.allowList() {
		if strings.Contains(a, "/") {
			if _, err := netip.ParsePrefix(a); err != nil {
				return fmt.Errorf("--push-allow: %q is not a CIDR prefix", a)
			}
		}
	}
	return nil
}

func (p *pushConfig) allowList() []string {
	var out []string
	for _, a := range strings.Split(p.allow, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// signer loads or creates the push signer: the given files, else a pair
// kept in the data directory, else (in memory) a fresh pair per start.
func (p *pushConfig) signer(cfg *config) (*server.PushSigner, error) {
	switch {
	case p.keyFile != "":
		return server.LoadPushSigner(p.keyFile, p.certFile)
	case cfg.inMemory:
		return server.NewPushSigner()
	}
	return server.LoadOrCreatePushSigner(cfg.dataDir)
}

// options returns the engine's push options; addr is the API address
// actually bound, tls whether it serves HTTPS.
func (p *pushConfig) options(s *server.PushSigner, addr string, tls bool, log *slog.Logger) engine.PushOptions {
	url := p.certURL
	if url == "" {
		host, port, _ := net.SplitHostPort(addr)
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			host = "127.0.0.1"
			log.Warn("push certificate URL names 127.0.0.1: --listen binds every address; set --push-cert-url to an address receivers reach")
		}
		scheme := "http"
		if tls {
			scheme = "https"
		}
		url = scheme + "://" + net.JoinHostPort(host, port) + s.Path()
	}
	return engine.PushOptions{
		Allow:       p.allowList(),
		Concurrency: p.concurrency,
		MaxConns:    p.maxConns,
		Timeout:     p.timeout,
		Lease:       p.lease,
		Signer:      s.Key,
		CertURL:     url,
	}
}
