package cluster

import (
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
)

// A node started without --cluster-tls-* among nodes with it (the likely
// mistake: the flags forgotten on one node) is named as such in the
// refusal each side logs as the acceptor. Neither dialling side reports
// it: to a TLS dialer the plain node just hangs up, and a plain dialer
// gets no answer, as from a peer that is down. Before, the plain node read
// "peer failed authentication (wrong or missing cluster key): not a
// cluster peer" (its key was right) and the TLS nodes Go's "first record
// does not look like a TLS handshake" (clusterdoc audit, 2026-12-07, with
// three real smqd processes).
func TestClusterTLSMismatchIsNamed(t *testing.T) {
	ca := newTestCA(t, "cluster CA")

	// A plain node accepting a TLS node's connection.
	plain := newTransport(1, testKey, "api-1", nil, slog.New(slog.DiscardHandler))
	a, b := net.Pipe()
	cfg := ca.config(t, "node 2", ca.pool)
	cfg.ServerName = "127.0.0.1"
	dialled := make(chan struct{})
	go func() {
		defer close(dialled)
		tls.Client(a, cfg).Handshake() // fails once the node hangs up
		a.Close()
	}()
	_, _, _, err := plain.handshake(b)
	b.Close()
	<-dialled
	if err == nil {
		t.Fatal("a TLS ClientHello at a plain node got in")
	}
	if !strings.Contains(err.Error(), "--cluster-tls") {
		t.Fatalf("a TLS ClientHello at a plain node: %q does not name the missing cluster TLS", err)
	}

	// A TLS node accepting a plain node's connection.
	withTLS := newTransport(1, testKey, "api-1", nil, slog.New(slog.DiscardHandler))
	withTLS.tls = ca.config(t, "node 1", ca.pool)
	c, d := net.Pipe()
	go func() {
		hello := append([]byte(handshakeMagic), kindRaft)
		hello = append(hello, make([]byte, 8+16)...)
		c.Write(hello)
		io.Copy(io.Discard, c)
	}()
	_, _, _, err = withTLS.handshake(d)
	d.Close()
	c.Close()
	if err == nil {
		t.Fatal("a plain hello at a TLS node got in")
	}
	var rh tls.RecordHeaderError
	if !errors.As(err, &rh) {
		t.Fatalf("a plain hello at a TLS node: %v, want a tls.RecordHeaderError", err)
	}
	if !strings.Contains(err.Error(), "--cluster-tls") {
		t.Fatalf("a plain hello at a TLS node: %q does not name the peer's missing cluster TLS", err)
	}
}
