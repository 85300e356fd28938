package server

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/server/access"
)

// DefaultMaxRequestBodyBytes is the default request body cap: 2 MiB.
//
// The cap has to admit the largest request a client can legitimately send,
// and nothing much larger, since a body is held in memory while it is
// parsed. The brief's worst case is a BatchSendMessage of 16 messages of
// 64 KiB (MaximumMessageSize's upper bound) whose bodies a client base64-
// encodes: ceil(65536/3)*4 = 87,384 bytes each, 1,398,144 bytes for 16, plus
// the markup (about 110 bytes per entry with DelaySeconds and Priority, and
// about 150 for the declaration and root): 1,400,054 bytes, 1.34 MiB. 2 MiB
// leaves half as much again for entity escapes. In practice the engine also
// limits a batch to 64 KiB of decoded body text in total (MaxBatchBodyBytes),
// so even a body written entirely as the longest character reference the
// parser accepts (13 bytes for one, "&#0000000065;") stays under 64 KiB x 13
// = 832 KiB: no request the engine would accept is refused by the transport.
const DefaultMaxRequestBodyBytes = 2 << 20

// DefaultMaxConns is the default cap on connections held open at once. It
// sits above the daemon's default of 10,000 waiting long polls (each holds a
// connection) with room for senders; an idle or stalled connection costs
// about 21 KiB of RSS (docs/benchmarks.md, "Pre-auth memory").
const DefaultMaxConns = 16384

// maxXMLElements bounds the elements of one request document, so that
// parsing a body (after its signature is checked) costs memory in
// proportion to what a request needs, not to what its bytes could spell.
// The largest real one is a batch send of 16 messages, each with its
// optional children (at most 10), MaxProperties user properties and the 6
// system properties a message may carry (user and system together at most
// MaxProperties; 4 elements a property: the
// container, Name, Value, Type). It was 1024, and a batch of 16 messages
// with 16 user properties each, well within the documented limits, was
// refused (hostile-client audit).
const maxXMLElements = 1 + 16*(10+4*(engine.MaxProperties+6))

// drainLimit is how much of a refused request's body (unauthenticated, over
// the cap, or to an unknown path) the server reads and discards before it
// answers and closes the connection. A client that writes its whole body
// before reading the answer (Node's http, most SDKs) then gets the answer
// instead of a connection reset. Bodies declared larger are not read: the
// answer is written and the connection closed at once.
const drainLimit = 16 << 20

// Options configures a Server. The zero value is not usable: give
// Credentials or set NoAuth. Durations are Go durations; the wire's seconds
// are converted in the handlers.
type Options struct {
	// Credentials maps access key ids to secrets (MNS signature v2).
	Credentials map[string]string
	// NoAuth skips authentication (local development only).
	NoAuth bool
	// Policies, when set, decide what each access key may do (authz.go;
	// build them with ParsePolicies). Nil: every key may do everything.
	// Server.SetPolicies replaces them while the server runs.
	Policies *access.Set
	// MaxRequestBodyBytes caps a request body; a larger one is refused with
	// 400 InvalidArgument without being buffered. Default
	// DefaultMaxRequestBodyBytes.
	MaxRequestBodyBytes int
	// MaxConns caps the connections held open at once, over all listeners.
	// At the cap the server stops accepting: further connections wait in
	// the kernel's backlog until one closes. Default DefaultMaxConns.
	MaxConns int
	// MaxClockSkew is how far a request's Date may be from Now before it is
	// refused with 408 TimeExpired. Default 15 minutes (spec §2.1).
	MaxClockSkew time.Duration
	// HeaderTimeout bounds reading a request's headers (and the first 8 KiB
	// of its body), from the connection's first byte or, on a kept-alive
	// connection, from the request's first byte. Everything up to the
	// signature check happens within it; a refused body is also drained
	// within it. Default 10 s.
	HeaderTimeout time.Duration
	// ReadTimeout bounds reading the rest of a request's body, from the
	// moment its headers are authenticated. Default 60 s.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing one response. Default 60 s.
	WriteTimeout time.Duration
	// IdleTimeout bounds how long a keep-alive connection waits for its next
	// request. Default 120 s.
	IdleTimeout time.Duration
	// SeparateMetrics keeps /metrics off the API listeners (they answer it
	// with 400 InvalidRequestURL): it is served only by ServeMetrics.
	SeparateMetrics bool
	// MetricsPerQueue selects the queues that get per-queue series on
	// /metrics: "all", "off", or "top:N", the N queues with the largest
	// backlog. The totals always cover every queue. Default
	// DefaultMetricsPerQueue.
	MetricsPerQueue string
	// Console serves the web console's assets at /console/ on the API
	// listeners (console.go). The console signs every API call with the
	// access key its user signs in with; the assets themselves are public.
	Console bool
	// TLS, when set, makes Serve speak HTTPS with this configuration. Unset
	// minimums are raised to modern defaults (TLS 1.2, AEAD cipher suites
	// with forward secrecy, HTTP/1.1 by ALPN); certificates come from
	// Certificates or GetCertificate (the daemon reloads them on SIGHUP).
	TLS *tls.Config
	// ClusterLeaderWait is how long a request for a shard without a leader
	// (an election is running) waits for one before it is answered 503
	// ServiceUnavailable (NewCluster only). Default 2 s.
	ClusterLeaderWait time.Duration
	// PushSigner, when set, is the signer of the engine's HTTP pushes: its
	// certificate is served, unauthenticated, at
	// /x509_public_certificate.pem and at PushSigner.Path (pushcert.go).
	PushSigner *PushSigner
	// Reopen, when set on a single node, restarts the broker in place
	// after its storage failed for good (a failed write or fsync of the
	// log: engine.Broker.NeedsReopen). After ReopenBackoff the server has
	// the failed broker resync its log (engine.Broker.Resync), retrying
	// with the wait doubled up to a minute while the disk refuses; then it
	// closes the broker, calls Reopen (which opens the same directory
	// again; retried the same way) and serves the new broker. Between the
	// close and the new broker every request is answered 503
	// ServiceUnavailable. nil: the failure stays until the process
	// restarts. See reopen.go.
	Reopen func() (*engine.Broker, error)
	// ReopenBackoff is the first wait before a Reopen. Default 1 s.
	ReopenBackoff time.Duration
	// TrustedProxies are the reverse proxies (load balancers) whose
	// X-Forwarded-For names the client (clientaddr.go): for a request whose
	// TCP peer is in one of them, the client is the first address from the
	// header's right that is in none. Empty: the TCP peer is the client.
	TrustedProxies []netip.Prefix
	// ProxyProtocol: a connection from a trusted proxy starts with a
	// PROXY protocol header (version 1 or 2) naming the client, as a TCP
	// load balancer sends it (proxyproto.go). Needs TrustedProxies.
	ProxyProtocol bool
	// BackupFiles names the files of the broker's data directory that a
	// backup (GET /backup, backup.go) copies besides the engine's own: the
	// daemon's generated credentials and push signing key.
	BackupFiles []string
	// Collectors are more metric collectors served on /metrics with the
	// server's own (the daemon's certificates' expiry, say).
	Collectors []prometheus.Collector
	// Name is the Server response header. Default "smqd".
	Name string
	// Now is the time source for the signature date check; nil means time.Now.
	Now func() time.Time
	// Logger receives lifecycle messages and errors; nil discards them.
	Logger *slog.Logger
}

// DefaultOptions returns Options with every default filled in and no
// credentials.
func DefaultOptions() Options {
	var o Options
	return o.withDefaults()
}

func (o Options) withDefaults() Options {
	if o.ReopenBackoff <= 0 {
		o.ReopenBackoff = time.Second
	}
	if o.MaxRequestBodyBytes <= 0 {
		o.MaxRequestBodyBytes = DefaultMaxRequestBodyBytes
	}
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns
	}
	if o.HeaderTimeout <= 0 {
		o.HeaderTimeout = 10 * time.Second
	}
	if o.MaxClockSkew <= 0 {
		o.MaxClockSkew = 15 * time.Minute
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = 60 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 60 * time.Second
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 120 * time.Second
	}
	if o.TLS != nil {
		o.TLS = withTLSDefaults(o.TLS)
	}
	if o.Name == "" {
		o.Name = "smqd"
	}
	if o.ClusterLeaderWait <= 0 {
		o.ClusterLeaderWait = 2 * time.Second
	}
	if o.MetricsPerQueue == "" {
		o.MetricsPerQueue = DefaultMetricsPerQueue
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Validate reports a configuration that cannot serve requests.
func (o Options) Validate() error {
	if !o.NoAuth && len(o.Credentials) == 0 {
		return errors.New("server: no credentials configured and NoAuth not set")
	}
	if o.NoAuth && o.Policies != nil {
		return errors.New("server: policies need authentication: NoAuth and Policies together")
	}
	if o.ProxyProtocol && len(o.TrustedProxies) == 0 {
		return errors.New("server: the PROXY protocol needs the proxies it trusts (TrustedProxies)")
	}
	for id, secret := range o.Credentials {
		if id == "" || secret == "" {
			return errors.New("server: empty access key id or secret")
		}
		for i := 0; i < len(id); i++ {
			if id[i] == ':' || id[i] <= ' ' || id[i] == 0x7f {
				// A DEL cannot be sent in a header: no request could be
				// signed with such a key (fuzz audit, 2026-12-08).
				return errors.New("server: access key id must not contain ':', blanks or control characters")
			}
		}
	}
	if o.MetricsPerQueue != "" {
		if _, err := parseMetricsPerQueue(o.MetricsPerQueue); err != nil {
			return err
		}
	}
	if o.TLS != nil && len(o.TLS.Certificates) == 0 && o.TLS.GetCertificate == nil && o.TLS.GetConfigForClient == nil {
		return errors.New("server: TLS configured without a certificate")
	}
	// Make sure the batch send that MaxBatch x MaxMessageBytes allows fits.
	if o.MaxRequestBodyBytes > 0 && o.MaxRequestBodyBytes < engine.MaxMessageBytes+4096 {
		return errors.New("server: MaxRequestBodyBytes is smaller than one maximal message")
	}
	return nil
}

// modernCipherSuites are the TLS 1.2 suites offered: ECDHE key exchange
// (forward secrecy) with AEAD ciphers only. TLS 1.3 suites are not
// configurable in Go and are all of that kind.
var modernCipherSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// withTLSDefaults returns a copy of c with TLS 1.2 as the minimum version,
// the modern suites when none are chosen, and HTTP/1.1 as the only ALPN
// protocol (fasthttp speaks nothing else).
func withTLSDefaults(c *tls.Config) *tls.Config {
	c = c.Clone()
	if c.MinVersion < tls.VersionTLS12 {
		c.MinVersion = tls.VersionTLS12
	}
	if c.CipherSuites == nil {
		c.CipherSuites = modernCipherSuites
	}
	if len(c.NextProtos) == 0 {
		c.NextProtos = []string{"http/1.1"}
	}
	return c
}
