package server

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/smqd/smqd/engine/cluster"
	"github.com/smqd/smqd/server/mnsauth"
)

// A client may send at most cluster.MaxTLSHandshakeBytes before its TLS handshake is
// done: one that declares a 64 KiB ClientHello and sends 32 KiB of it is
// closed at once, instead of holding what it sent (crypto/tls takes a
// handshake message of up to 64 KiB, and its buffers grew to about 115
// KiB of RSS per connection for the header timeout: 16384 connections,
// the default --max-conns, came to 1.8 GiB where docs/benchmarks.md
// promises about 21 KiB each; TLS audit, 2026-12-07). An ordinary
// handshake, and a request with a 60 KiB body right behind it, are served.
func TestTLSHandshakeSizeIsBounded(t *testing.T) {
	cert, pool := selfSigned(t)
	env := startEnv(t, envConfig{serverOpts: func(o *Options) {
		o.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
		o.HeaderTimeout = time.Minute // the bound must not be the timeout
	}})
	conn, err := net.Dial("tcp", env.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	msg := append([]byte{0x01, 0x00, 0xff, 0xfc, 0x03, 0x03}, bytes.Repeat([]byte{0}, 32<<10)...)
	var hello []byte
	for len(msg) > 0 {
		n := min(len(msg), 16<<10)
		hello = append(hello, 0x16, 0x03, 0x01, byte(n>>8), byte(n))
		hello, msg = append(hello, msg[:n]...), msg[n:]
	}
	go conn.Write(hello) // the server may close before it has read it all
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, conn); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a connection that sent 32 KiB of an unfinished ClientHello is still open after 10 s")
	}

	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	key := mnsauth.NewKey(testKeyID, testSecret)
	if resp := doHTTPS(t, hc, key, "PUT", "https://"+env.addr+"/queues/q", ""); resp.StatusCode != 201 {
		t.Fatalf("create over TLS: %d", resp.StatusCode)
	}
	body := "<Message><MessageBody>" + strings.Repeat("a", 60<<10) + "</MessageBody></Message>"
	if resp := doHTTPS(t, hc, key, "POST", "https://"+env.addr+"/queues/q/messages", body); resp.StatusCode != 201 {
		t.Fatalf("send over TLS: %d", resp.StatusCode)
	}
}

// The server's wrappers are looked through to the TCP connection, with
// the handshake's budget among them: the client watch (rawConn), the
// audit log's peer (tcpPeer, proxyConnOf).
func TestTLSWrappersUnwrap(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	s := &Server{}
	pc := &proxyConn{Conn: &limitConn{Conn: a}, s: s}
	c := &httpsConn{Conn: tls.Server(cluster.NewHandshakeBudget(pc), &tls.Config{}), s: s}
	if got := rawConn(c); got != a {
		t.Fatalf("rawConn: %T, want the connection under every wrapper", got)
	}
	if got := proxyConnOf(c); got != pc {
		t.Fatalf("proxyConnOf: %v", got)
	}
}
