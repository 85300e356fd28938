package server

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"
)

// A trusted balancer's connection that brings a valid PROXY protocol
// header and then nothing (a client of the balancer that connects and
// stays silent, or that never finishes its TLS handshake) is closed by
// the header timeout, like any other connection. Reading the header used
// to clear the read deadline fasthttp had set for the first request, so
// the handshake or the first request had no deadline at all: such
// connections stayed open until the balancer gave up, each holding one of
// --max-conns (TLS audit, 2026-12-07).
func TestProxyProtocolKeepsTheHeaderTimeout(t *testing.T) {
	cert, _ := selfSigned(t)
	for _, tc := range []struct {
		name  string
		tls   bool
		after string // sent after the PROXY header
	}{
		{"plain-silent", false, ""},
		{"tls-silent", true, ""},
		{"tls-partial-client-hello", true, "\x16\x03\x01\x02\x00"}, // a record header, no body
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := startEnv(t, envConfig{serverOpts: func(o *Options) {
				if tc.tls {
					o.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
				}
				o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
				o.ProxyProtocol = true
				o.HeaderTimeout = 200 * time.Millisecond
			}})
			conn, err := net.Dial("tcp", env.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := io.WriteString(conn, "PROXY TCP4 203.0.113.7 127.0.0.1 5555 443\r\n"+tc.after); err != nil {
				t.Fatal(err)
			}
			// Wait for the server to close the connection, with a
			// deadline of 50 header timeouts: this is a bound on the wait,
			// not a measurement.
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.Copy(io.Discard, conn); errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("the connection is still open 10 s after its PROXY header, with a header timeout of 200 ms")
			}
		})
	}
}
