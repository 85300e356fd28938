package cluster

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
)

// testCA is a certificate authority for a test's nodes.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// node issues a certificate for a node at 127.0.0.1 (server and client
// use, as a node is both).
func (ca *testCA) node(t *testing.T, name string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// config is a node's mutual TLS configuration: its certificate from ca,
// trusting trust's certificates.
func (ca *testCA) config(t *testing.T, name string, trust *x509.CertPool) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{ca.node(t, name)}, RootCAs: trust, ClientCAs: trust,
		ClientAuth: tls.RequireAndVerifyClientCert}
}

// recorder keeps every byte a listener's connections receive.
type recorder struct {
	net.Listener
	mu  sync.Mutex
	got bytes.Buffer
}

func (r *recorder) Accept() (net.Conn, error) {
	c, err := r.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &recordedConn{Conn: c, r: r}, nil
}

func (r *recorder) contains(b []byte) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Contains(r.got.Bytes(), b)
}

type recordedConn struct {
	net.Conn
	r *recorder
}

func (c *recordedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.r.mu.Lock()
	c.r.got.Write(p[:n])
	c.r.mu.Unlock()
	return n, err
}

// With Config.TLS the nodes replicate as before, and what crosses the
// wire is encrypted: a message body sent through the leader is in none of
// the bytes the nodes received, although every replica holds the
// message. The same test without TLS finds the body in both followers'
// bytes, so the search sees it when it is there. Seen failing with the
// transport's TLS skipped (Config.TLS set): "2 nodes received the body in
// clear".
func TestClusterTLSEncryptsReplication(t *testing.T) {
	for _, withTLS := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", withTLS), func(t *testing.T) {
			ca := newTestCA(t, "cluster CA")
			var recs []*recorder
			c := &testCluster{t: t, nodes: make([]*Node, 3), shards: 1}
			c.wrapLn = func(id uint64, ln net.Listener) net.Listener {
				r := &recorder{Listener: ln}
				recs = append(recs, r)
				return r
			}
			if withTLS {
				cfgs := make([]*tls.Config, 3)
				for i := range cfgs {
					cfgs[i] = ca.config(t, fmt.Sprint("node ", i+1), ca.pool)
				}
				c.cfgTweak = func(i int, cfg *Config) { cfg.TLS = cfgs[i] }
			}
			startTestCluster(c)
			c.preferredLeaders() // no balancer hand-over under the create and the send
			_, b := c.leader("secret")
			if _, err := b.CreateQueue("secret", engine.DefaultQueueConfig()); err != nil {
				t.Fatal(err)
			}
			q, _ := b.Queue("secret")
			body := []byte("the-body-nobody-on-the-wire-may-read")
			if _, err := q.Send([]engine.SendEntry{{Body: body}}, nil); err != nil {
				t.Fatal(err)
			}
			c.converged("secret", 1, 0)
			seen := 0 // nodes that received the body in clear (the followers, without TLS)
			for _, r := range recs {
				if r.contains(body) {
					seen++
				}
			}
			if withTLS && seen > 0 || !withTLS && seen < 2 {
				t.Fatalf("with TLS %v, %d nodes received the body in clear", withTLS, seen)
			}
		})
	}
}

// With Config.TLS a process is refused unless its certificate comes from
// the cluster's CA, even with the cluster key: one with a certificate
// from another CA (that trusts the cluster's, so that only the node's
// check of it can stop it), one with none (plain TCP), and one whose
// own check of the node fails (it trusts another CA). Each is logged as
// refused; a process with a certificate of the cluster's CA gets in.
// Seen failing with the node accepting any client certificate
// (tls.RequireAnyClientCert): the stranger got in.
func TestClusterTLSRefusesStrangers(t *testing.T) {
	ca := newTestCA(t, "cluster CA")
	other := newTestCA(t, "another CA")
	var logs syncBuffer
	c := &testCluster{t: t, nodes: make([]*Node, 3), shards: 1}
	c.cfgTweak = func(i int, cfg *Config) {
		cfg.TLS = ca.config(t, fmt.Sprint("node ", i+1), ca.pool)
		if i == 0 {
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
		}
	}
	startTestCluster(c)
	c.leader("q")
	addr := c.addrs[1]

	dialer := func(cfg *tls.Config) error {
		tr := newTransport(9, testKey, "api-9", nil, slog.New(slog.DiscardHandler))
		tr.tls = cfg
		conn, _, err := tr.dial(addr, kindRaft, 1)
		if err == nil {
			conn.Close()
		}
		return err
	}
	both := ca.pool.Clone()
	both.AddCert(other.cert)
	// It trusts the node, and sends its certificate whatever CAs the node
	// asks for (a Go client with Certificates would send none): the
	// node's own check must stop it.
	strangerCert := other.node(t, "stranger")
	stranger := &tls.Config{RootCAs: both,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &strangerCert, nil }}
	cases := []struct {
		name string
		cfg  *tls.Config
	}{
		{"a certificate of another CA", stranger},
		{"no TLS", nil},
		{"a peer that does not trust the node", other.config(t, "wary", other.pool)},
	}
	for _, tc := range cases {
		refusedBefore := c.nodes[0].refused.Load()
		err := dialer(tc.cfg)
		if err == nil {
			t.Fatalf("%s: got in", tc.name)
		}
		t.Logf("%s: %v", tc.name, err)
		if tc.name != "a peer that does not trust the node" {
			// The node itself refused it (the third one hangs up on the node).
			eventually(t, tc.name+" refused by node 1", func() error {
				if c.nodes[0].refused.Load() == refusedBefore {
					return errors.New("no refusal counted")
				}
				return nil
			})
		}
	}
	if err := dialer(ca.config(t, "node 9", ca.pool)); err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("a process with the cluster's certificate and key: %v", err)
	}
	if !bytes.Contains([]byte(logs.String()), []byte("raft connection refused")) {
		t.Fatalf("no refusal logged:\n%s", logs.String())
	}
}

// A node whose certificate the others refuse (another CA's) is reported
// by the nodes that dial it, not only by the node itself: they log "raft
// peer refused" naming it, and count it. The node refused reads that the
// peer refused its certificate. The dialling side's failure used to be
// dropped: node 3's own log ("bad certificate", as if it had refused
// someone) was the only trace, and nodes 1 and 2 looked healthy.
func TestClusterTLSDialerReportsARefusedPeer(t *testing.T) {
	ca := newTestCA(t, "cluster CA")
	other := newTestCA(t, "another CA")
	logs := make([]*syncBuffer, 3)
	c := &testCluster{t: t, nodes: make([]*Node, 3), shards: 1}
	c.cfgTweak = func(i int, cfg *Config) {
		issuer := ca
		if i == 2 {
			issuer = other // trusts the cluster's CA; the others do not trust its certificate
		}
		cfg.TLS = issuer.config(t, fmt.Sprint("node ", i+1), ca.pool)
		logs[i] = &syncBuffer{}
		cfg.Logger = slog.New(slog.NewTextHandler(logs[i], &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	startTestCluster(c)
	c.leader("q")
	eventually(t, "node 1 reports node 3 refused", func() error {
		if l := logs[0].String(); !strings.Contains(l, `msg="raft peer refused"`) || !strings.Contains(l, " peer=3 ") {
			return fmt.Errorf("node 1's log:\n%s", logs[0].String())
		}
		if !strings.Contains(logs[2].String(), "the peer refused this node's certificate") {
			return fmt.Errorf("node 3's log:\n%s", logs[2].String())
		}
		return nil
	})
	// Counted on node 2 too; node 2 dials node 3 and node 3 dials it,
	// so both sides of the count are exercised: at least two a second.
	if n := c.nodes[1].refused.Load(); n == 0 {
		t.Fatalf("node 2 counted no refusal")
	}
}
