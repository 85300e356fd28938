package server

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// proxyV2 builds a version 2 header: command (0 LOCAL, 1 PROXY), family
// byte, the source and destination addresses and ports, and tlv bytes.
func proxyV2(cmd, fam byte, src, dst netip.AddrPort, tlv []byte) string {
	b := append([]byte(nil), proxySig2...)
	b = append(b, 0x20|cmd, fam)
	var addrs []byte
	if src.IsValid() {
		addrs = append(addrs, src.Addr().AsSlice()...)
		addrs = append(addrs, dst.Addr().AsSlice()...)
		addrs = binary.BigEndian.AppendUint16(addrs, src.Port())
		addrs = binary.BigEndian.AppendUint16(addrs, dst.Port())
	}
	addrs = append(addrs, tlv...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(addrs)))
	return string(append(b, addrs...))
}

// The headers of both versions: the source they name, LOCAL and UNKNOWN
// naming none (invariant 4), what is not a header refused, and the bytes
// after a header left for the request.
func TestReadProxyHeader(t *testing.T) {
	v4 := netip.MustParseAddrPort("203.0.113.7:5555")
	d4 := netip.MustParseAddrPort("10.0.0.1:80")
	v6 := netip.MustParseAddrPort("[2001:db8::7]:5555")
	d6 := netip.MustParseAddrPort("[2001:db8::1]:80")
	for _, c := range []struct {
		name, in, want string // want: the source, "-" none, "error"
	}{
		{"v1 TCP4", "PROXY TCP4 203.0.113.7 10.0.0.1 5555 80\r\n", "203.0.113.7:5555"},
		{"v1 TCP6", "PROXY TCP6 2001:db8::7 2001:db8::1 5555 80\r\n", "[2001:db8::7]:5555"},
		{"v1 UNKNOWN", "PROXY UNKNOWN\r\n", "-"},
		{"v1 UNKNOWN with addresses", "PROXY UNKNOWN ffff:f::1 ffff:f::2 1 2\r\n", "-"},
		{"v1 without CRLF", "PROXY TCP4 203.0.113.7 10.0.0.1 5555 80\n", "error"},
		{"v1 an IPv6 source in TCP4", "PROXY TCP4 2001:db8::7 10.0.0.1 5555 80\r\n", "error"},
		{"v1 a bad port", "PROXY TCP4 203.0.113.7 10.0.0.1 70000 80\r\n", "error"},
		{"v1 too long", "PROXY TCP4 " + strings.Repeat("1", 120) + "\r\n", "error"},
		{"v1 a name", "PROXY TCP4 client.example 10.0.0.1 5555 80\r\n", "error"},
		{"v2 TCP4", proxyV2(1, 0x11, v4, d4, nil), "203.0.113.7:5555"},
		{"v2 TCP6", proxyV2(1, 0x21, v6, d6, nil), "[2001:db8::7]:5555"},
		{"v2 TCP4 with TLVs", proxyV2(1, 0x11, v4, d4, []byte{0x04, 0, 3, 'a', 'b', 'c'}), "203.0.113.7:5555"},
		{"v2 LOCAL", proxyV2(0, 0x00, netip.AddrPort{}, netip.AddrPort{}, nil), "-"},
		{"v2 UNSPEC", proxyV2(1, 0x00, netip.AddrPort{}, netip.AddrPort{}, nil), "-"},
		{"v2 short IPv4", proxyV2(1, 0x11, netip.AddrPort{}, netip.AddrPort{}, []byte{1, 2, 3}), "error"},
		// AF_UNIX (stream, datagram): a family smqd does not take a client
		// from, which the protocol's receiver falls back to UNSPEC for
		// (proxy-protocol.txt 2.2): the balancer stands. It closed the
		// connection (proxy audit, 2026-12-07).
		{"v2 a unix socket", proxyV2(1, 0x31, netip.AddrPort{}, netip.AddrPort{}, make([]byte, 216)), "-"},
		{"v2 a unix datagram socket", proxyV2(1, 0x32, netip.AddrPort{}, netip.AddrPort{}, make([]byte, 216)), "-"},
		{"v2 an unassigned family", proxyV2(1, 0x41, netip.AddrPort{}, netip.AddrPort{}, make([]byte, 12)), "error"},
		{"v2 version 3", strings.Replace(proxyV2(1, 0x11, v4, d4, nil), "\x21\x11", "\x31\x11", 1), "error"},
		{"v2 cut short", proxyV2(1, 0x11, v4, d4, nil)[:14], "error"},
		{"no header", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", "error"},
		{"nothing", "", "error"},
	} {
		br := bufio.NewReaderSize(strings.NewReader(c.in+"GET /rest"), 256)
		src, _, err := readProxyHeader(br)
		got := "-"
		switch {
		case err != nil:
			got = "error"
			if !errors.Is(err, errProxyHeader) {
				t.Errorf("%s: an error that is not errProxyHeader: %v", c.name, err)
			}
		case src.IsValid():
			got = src.String()
		}
		if got != c.want {
			t.Errorf("%s: %s, want %s (%v)", c.name, got, c.want, err)
			continue
		}
		if err == nil {
			if rest, _ := io.ReadAll(br); string(rest) != "GET /rest" {
				t.Errorf("%s: after the header %q, want the request", c.name, rest)
			}
		}
	}
}

func FuzzReadProxyHeader(f *testing.F) {
	f.Add([]byte("PROXY TCP4 203.0.113.7 10.0.0.1 5555 80\r\nGET"))
	f.Add([]byte(proxyV2(1, 0x21, netip.MustParseAddrPort("[2001:db8::7]:1"), netip.MustParseAddrPort("[2001:db8::1]:2"), []byte{1, 0, 0})))
	f.Add([]byte("PROXY UNKNOWN\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		br := bufio.NewReaderSize(strings.NewReader(string(in)), 256)
		src, _, err := readProxyHeader(br)
		if err != nil {
			if !errors.Is(err, errProxyHeader) {
				t.Fatalf("%q: %v is not errProxyHeader", in, err)
			}
			return
		}
		if src.IsValid() && (src.Addr().Zone() != "" || src.Addr().Is4In6()) {
			t.Fatalf("%q: source %v", in, src)
		}
		rest, _ := io.ReadAll(br)
		if !strings.HasSuffix(string(in), string(rest)) || len(rest) == len(in) {
			t.Fatalf("%q: %d bytes left after the header, not a tail of it", in, len(rest))
		}
	})
}

// Through a TCP balancer speaking the PROXY protocol, acs:SourceIp is
// the client the header names, for every request of the connection; a
// trusted peer's connection without the header is closed unanswered
// (invariant 2); LOCAL leaves the balancer as the client.
func TestProxyProtocol(t *testing.T) {
	p := authzPolicies(t, authzDoc(`{"Effect": "Allow", "Action": "mns:*", "Resource": "*",
		"Condition": {"IpAddress": {"acs:SourceIp": "203.0.113.0/24"}}}`))
	logs := &lockedBuffer{}
	env := startEnv(t, envConfig{serverOpts: func(o *Options) {
		o.Policies = p
		o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
		o.ProxyProtocol = true
		o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}})
	via := func(header string) *client {
		c := viaProxyHeader(t, env, header)
		c.id, c.secret = "other", "othersecret"
		return c
	}
	lb := netip.MustParseAddrPort("127.0.0.1:9000")
	c := via("PROXY TCP4 203.0.113.7 127.0.0.1 5555 80\r\n")
	wantStatus(t, c.put("/queues/q", ""), 201)
	wantStatus(t, c.get("/queues/q"), 200) // the same connection: the header holds for it
	if got := logs.lines("audit"); len(got) != 1 || !strings.Contains(got[0], "client=203.0.113.7 peer=127.0.0.1:") {
		t.Fatalf("the audit log: %q", got)
	}
	authzDenied(t, via(proxyV2(1, 0x11, netip.MustParseAddrPort("198.51.100.9:1"), lb, nil)).get("/queues/q"))
	authzDenied(t, via(proxyV2(0, 0x00, netip.AddrPort{}, netip.AddrPort{}, nil)).get("/queues/q")) // LOCAL: the balancer
	wantStatus(t, via(proxyV2(1, 0x11, netip.MustParseAddrPort("203.0.113.8:1"), lb, nil)).get("/queues/q"), 200)
	// No header from a trusted peer: closed, unanswered, and logged.
	plain := env.client()
	if r, err := plain.rawErr("GET /queues/q HTTP/1.1\r\nHost: x\r\n\r\n"); err == nil {
		t.Fatalf("a trusted peer's connection without a header was answered: %d %s", r.status, r.body)
	}
	plain.close()
	// Many such connections (a balancer's health checks that connect and
	// close) log a line a second at most, the rest counted in the next:
	// 50 connections within a few seconds leave few lines, not 50.
	const badProxyMsg = `"connection from a trusted proxy closed: no valid PROXY protocol header"`
	before := len(logs.lines(badProxyMsg))
	began := time.Now()
	for range 50 {
		c, err := net.Dial("tcp", env.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	// Each connection is a line, or counted in the next line's
	// suppressed_since_last, or in the count not logged yet.
	counted := func() int64 {
		n := env.srv.badProxy.suppressed.Load()
		for _, l := range logs.lines(badProxyMsg)[before:] {
			var k int64
			if i := strings.Index(l, "suppressed_since_last="); i >= 0 {
				fmt.Sscan(l[i+len("suppressed_since_last="):], &k)
			}
			n += 1 + k
		}
		return n
	}
	waitFor(t, "the 50 closed connections counted", 3*time.Second, func() bool { return counted() >= 50 })
	if n, most := len(logs.lines(badProxyMsg))-before, 2+int(time.Since(began)/time.Second); n > most {
		t.Fatalf("%d lines for 50 connections within %s, want at most one a second", n, time.Since(began))
	}
	// From a peer it does not trust, smqd reads no header (invariant 1):
	// one sent is taken as the request, and refused.
	env2 := startEnv(t, envConfig{serverOpts: func(o *Options) {
		o.Policies = p
		o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
		o.ProxyProtocol = true
	}})
	admin := env2.client()
	defer admin.close()
	admin.mustCreate("q")
	env = env2
	authzDenied(t, via("").get("/queues/q")) // the peer itself
	if r, err := via("PROXY TCP4 203.0.113.7 127.0.0.1 5555 80\r\n").rawErr("GET /queues/q HTTP/1.1\r\nHost: x\r\n\r\n"); err == nil && r.status == 200 {
		t.Fatalf("a header from a peer not trusted was honored: %d %s", r.status, r.body)
	}
	if len(logs.lines(`"connection from a trusted proxy closed: no valid PROXY protocol header"`)) == 0 {
		t.Fatal("the refused connection was not logged")
	}
}

// acs:SecureTransport behind a proxy that terminates TLS: the proxy's
// word counts when smqd trusts it (a PROXY protocol version 2 header with
// PP2_CLIENT_SSL, or an X-Forwarded-Proto whose last entry is https), and
// only then. The docs advise such a proxy and show a policy that denies
// requests without TLS; every request behind the proxy was denied.
func TestSecureTransportBehindAProxy(t *testing.T) {
	p := authzPolicies(t, authzDoc(`{"Effect": "Allow", "Action": "mns:*", "Resource": "*"},
		{"Effect": "Deny", "Action": "mns:*", "Resource": "*", "Condition": {"Bool": {"acs:SecureTransport": "false"}}}`))
	start := func(trust string, proxyProtocol bool) (*testEnv, *client) {
		env := startEnv(t, envConfig{serverOpts: func(o *Options) {
			o.Policies = p
			if trust != "" {
				o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix(trust)}
			}
			o.ProxyProtocol = proxyProtocol
		}})
		if !proxyProtocol {
			admin := env.client()
			admin.mustCreate("q")
			admin.close()
		}
		c := env.client()
		c.id, c.secret = "other", "othersecret"
		t.Cleanup(c.close)
		return env, c
	}
	get := func(c *client, proto ...string) *response {
		var h map[string]string
		if len(proto) > 0 {
			h = map[string]string{"X-Forwarded-Proto": proto[0]}
		}
		return c.do(req{method: "GET", target: "/queues/q", headers: h})
	}
	_, c := start("127.0.0.0/8", false)
	wantStatus(t, get(c, "https"), 200)
	wantStatus(t, get(c, "HTTPS"), 200)
	wantStatus(t, get(c, "http, https"), 200) // the nearest proxy's word is the last
	authzDenied(t, get(c, "https, http"))
	authzDenied(t, get(c, "http"))
	authzDenied(t, get(c))
	// From a peer not trusted, the header is the client's own: ignored.
	_, c = start("10.0.0.0/8", false)
	authzDenied(t, get(c, "https"))
	_, c = start("", false)
	authzDenied(t, get(c, "https"))

	// A TCP balancer terminating TLS says so in its PROXY v2 header.
	env, _ := start("127.0.0.0/8", true)
	lb := netip.MustParseAddrPort("127.0.0.1:9000")
	via := func(header string) *client { return viaProxyHeader(t, env, header) }
	admin := via(proxyV2(1, 0x11, netip.MustParseAddrPort("203.0.113.7:1"), lb, nil))
	admin.mustCreate("q")
	ssl := []byte{0x20, 0, 5, 0x01, 0, 0, 0, 0} // PP2_TYPE_SSL, PP2_CLIENT_SSL, verified
	other := func(tlv []byte) *client {
		c := via(proxyV2(1, 0x11, netip.MustParseAddrPort("203.0.113.7:1"), lb, tlv))
		c.id, c.secret = "other", "othersecret"
		return c
	}
	wantStatus(t, get(other(ssl)), 200)
	wantStatus(t, get(other(append([]byte{0x04, 0, 1, 9}, ssl...))), 200) // after another TLV
	authzDenied(t, get(other(nil)))
	authzDenied(t, get(other([]byte{0x20, 0, 5, 0x00, 0, 0, 0, 0}))) // the TLV without the client bit
	authzDenied(t, get(other(ssl[:5])))                              // cut short
	// Under the PROXY protocol the HTTP headers are the client's: an
	// X-Forwarded-Proto of its own does not count, even when the address
	// the header names is in --trusted-proxies (found in review: it did).
	authzDenied(t, get(other(nil), "https"))
	inside := via(proxyV2(1, 0x11, netip.MustParseAddrPort("127.0.0.9:1"), lb, nil))
	inside.id, inside.secret = "other", "othersecret"
	authzDenied(t, get(inside, "https"))
}

// Under TLS too, the PROXY header names the client and the balancer stays
// the TCP peer in the audit log (tcpPeer looks through the TLS layer).
func TestProxyProtocolUnderTLS(t *testing.T) {
	cert, pool := selfSigned(t)
	logs := &lockedBuffer{}
	env := startEnv(t, envConfig{serverOpts: func(o *Options) {
		o.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
		o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
		o.ProxyProtocol = true
		o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}})
	conn, err := net.Dial("tcp", env.addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, "PROXY TCP4 203.0.113.7 127.0.0.1 5555 443\r\n"); err != nil {
		t.Fatal(err)
	}
	tc := tls.Client(conn, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	c := env.client()
	c.conn, c.br = tc, bufio.NewReader(tc)
	defer c.close()
	wantStatus(t, c.put("/queues/q", ""), 201)
	if got := logs.lines("audit"); len(got) != 1 || !strings.Contains(got[0], "client=203.0.113.7 peer=127.0.0.1:") {
		t.Fatalf("the audit log: %q", got)
	}
}

// viaProxyHeader returns a client of env on a connection of its own that
// starts with the PROXY protocol header given.
func viaProxyHeader(t *testing.T, env *testEnv, header string) *client {
	t.Helper()
	c := env.client()
	conn, err := net.Dial("tcp", env.addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, header); err != nil {
		t.Fatal(err)
	}
	c.conn, c.br = conn, bufio.NewReader(conn)
	t.Cleanup(c.close)
	return c
}
