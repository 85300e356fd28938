package server

// The PROXY protocol (HAProxy's, versions 1 and 2), for a TCP (layer 4)
// load balancer in front of smqd: the balancer opens its own connection
// and starts it with a header naming the client's address, which an HTTP
// header cannot carry at that layer. With Options.ProxyProtocol, a
// connection from a trusted proxy (Options.TrustedProxies) must start
// with such a header, and its client is the header's source; a connection
// from anyone else is taken as it comes (no header is read from it).
//
// Invariants:
//  1. Only a trusted peer names a client: from another peer nothing is
//     read before the request, so a client cannot send a header for
//     itself.
//  2. A trusted peer's connection that does not start with a whole, valid
//     header within the header timeout is closed before any of it is
//     served: a balancer set up without the protocol fails loudly instead
//     of every client being taken for the balancer.
//  3. The header is read once, in the connection's own goroutine (its
//     first Read or RemoteAddr), never in Accept, so a slow peer holds up
//     no other connection.
//  4. A LOCAL (v2) or UNKNOWN (v1) header, a balancer's own health check,
//     names no client: the peer stands, and no X-Forwarded-For or
//     X-Forwarded-Proto behind it is read (clientaddr.go): a layer 4
//     balancer wrote none of them.
//  5. Reading the header leaves the read deadline as the connection's
//     user (fasthttp, crypto/tls) set it: the header timeout of the first
//     request, or the handshake's, still holds after the header. Clearing
//     it left a balancer's client that sent nothing, or never finished its
//     TLS handshake, holding a connection with no deadline at all (TLS
//     audit, 2026-12-07; TestProxyProtocolKeepsTheHeaderTimeout).

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/smqd/smqd/engine/cluster"
)

// proxySig2 starts a version 2 header.
var proxySig2 = []byte("\r\n\r\n\x00\r\nQUIT\n")

// proxyV1Max is the longest version 1 header, CRLF included.
const proxyV1Max = 107

// errProxyHeader: a trusted peer's connection without a valid header.
var errProxyHeader = errors.New("server: a trusted proxy's connection does not start with a valid PROXY protocol header")

// proxyListener wraps accepted connections (proxyConn).
type proxyListener struct {
	net.Listener
	s *Server
}

func (l *proxyListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &proxyConn{Conn: c, s: l.s}, nil
}

// proxyConn reads a trusted peer's header before anything else
// (invariant 3).
type proxyConn struct {
	net.Conn
	s    *Server
	once sync.Once
	r    io.Reader // after the header: what is buffered, then the connection
	src  net.Addr  // the client the header names, or nil
	hdr  bool      // a valid header was read (src nil: LOCAL or UNKNOWN, the balancer's own)
	tls  bool      // that client's connection to the balancer was TLS
	err  error

	dlMu   sync.Mutex
	readDL time.Time // guarded by dlMu: the read deadline last set by the connection's user (invariant 5)
}

// SetReadDeadline records t, which the header read puts back (invariant 5).
func (c *proxyConn) SetReadDeadline(t time.Time) error {
	c.dlMu.Lock()
	defer c.dlMu.Unlock()
	c.readDL = t
	return c.Conn.SetReadDeadline(t)
}

// SetDeadline records t as the read deadline too (invariant 5).
func (c *proxyConn) SetDeadline(t time.Time) error {
	c.dlMu.Lock()
	defer c.dlMu.Unlock()
	c.readDL = t
	return c.Conn.SetDeadline(t)
}

func (c *proxyConn) init() {
	c.once.Do(func() {
		c.r = c.Conn
		peer, ok := netip.AddrFromSlice(tcpIP(c.Conn.RemoteAddr()))
		if !ok || !trusted(peer.Unmap(), c.s.opts.TrustedProxies) {
			return // invariant 1
		}
		timeout := c.s.opts.HeaderTimeout
		if timeout <= 0 {
			timeout = 10 * time.Second
		}
		c.dlMu.Lock()
		dl := time.Now().Add(timeout)
		if user := c.readDL; !user.IsZero() && user.Before(dl) {
			dl = user
		}
		_ = c.Conn.SetReadDeadline(dl)
		c.dlMu.Unlock()
		br := bufio.NewReaderSize(c.Conn, 256)
		src, secure, err := readProxyHeader(br)
		c.dlMu.Lock()
		_ = c.Conn.SetReadDeadline(c.readDL) // invariant 5
		c.dlMu.Unlock()
		if err != nil {
			c.err = err
			// At most a line a second: a balancer's health check that
			// connects and closes without a header is such a connection,
			// every few seconds (proxy audit, 2026-12-07).
			if c.s.badProxy.due() {
				c.s.log.Warn("connection from a trusted proxy closed: no valid PROXY protocol header", "peer", c.Conn.RemoteAddr().String(), "err", err,
					"suppressed_since_last", c.s.badProxy.suppressed.Swap(0))
			}
			c.Conn.Close() // invariant 2
			return
		}
		c.hdr = true
		if src.IsValid() {
			c.src = net.TCPAddrFromAddrPort(src)
			c.tls = secure
		}
		c.r = br
	})
}

func (c *proxyConn) Read(p []byte) (int, error) {
	c.init()
	if c.err != nil {
		return 0, c.err
	}
	return c.r.Read(p)
}

func (c *proxyConn) RemoteAddr() net.Addr {
	c.init()
	if c.src != nil {
		return c.src
	}
	return c.Conn.RemoteAddr()
}

// tcpPeer returns the TCP peer of a request's connection: under a PROXY
// protocol header (RemoteAddr names the client), the balancer.
func tcpPeer(c net.Conn) net.Addr {
	if c == nil {
		return &net.TCPAddr{}
	}
	if pc := proxyConnOf(c); pc != nil {
		return pc.Conn.RemoteAddr()
	}
	return c.RemoteAddr()
}

// proxyConnOf returns the proxyConn under a request's connection (through
// the TLS layer), or nil.
func proxyConnOf(c net.Conn) *proxyConn {
	if hc, ok := c.(*httpsConn); ok { // tlsplain.go
		c = hc.Conn
	}
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if hb, ok := c.(*cluster.HandshakeBudget); ok {
		c = hb.Conn
	}
	pc, _ := c.(*proxyConn)
	return pc
}

func tcpIP(a net.Addr) net.IP {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP
	}
	return nil
}

// readProxyHeader reads a version 1 or 2 header and returns the source it
// names (the zero AddrPort for LOCAL and UNKNOWN: invariant 4), and
// whether the client reached the balancer over TLS (a version 2 header's
// PP2_TYPE_SSL with PP2_CLIENT_SSL: the balancer terminated it).
func readProxyHeader(br *bufio.Reader) (src netip.AddrPort, tls bool, err error) {
	head, err := br.Peek(len(proxySig2))
	if err == nil && bytes.Equal(head, proxySig2) {
		return readProxyV2(br)
	}
	if len(head) >= 6 && string(head[:6]) == "PROXY " {
		src, err := readProxyV1(br)
		return src, false, err
	}
	if err != nil {
		return netip.AddrPort{}, false, fmt.Errorf("%w: %v", errProxyHeader, err)
	}
	return netip.AddrPort{}, false, errProxyHeader
}

// readProxyV1 reads "PROXY TCP4|TCP6 src dst sport dport\r\n" or
// "PROXY UNKNOWN ...\r\n".
func readProxyV1(br *bufio.Reader) (netip.AddrPort, error) {
	var line []byte
	for len(line) < proxyV1Max {
		b, err := br.ReadByte()
		if err != nil {
			return netip.AddrPort{}, fmt.Errorf("%w: %v", errProxyHeader, err)
		}
		line = append(line, b)
		if b == '\n' {
			break
		}
	}
	if !bytes.HasSuffix(line, []byte("\r\n")) {
		return netip.AddrPort{}, fmt.Errorf("%w: a version 1 line longer than %d bytes or without CRLF", errProxyHeader, proxyV1Max)
	}
	f := bytes.Split(line[:len(line)-2], []byte(" "))
	if len(f) >= 2 && string(f[1]) == "UNKNOWN" {
		return netip.AddrPort{}, nil
	}
	if len(f) != 6 || (string(f[1]) != "TCP4" && string(f[1]) != "TCP6") {
		return netip.AddrPort{}, fmt.Errorf("%w: %q", errProxyHeader, line)
	}
	src, err1 := netip.ParseAddr(string(f[2]))
	dst, err2 := netip.ParseAddr(string(f[3]))
	port, err3 := strconv.ParseUint(string(f[4]), 10, 16)
	_, err4 := strconv.ParseUint(string(f[5]), 10, 16)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || src.Zone() != "" ||
		src.Is4() != (string(f[1]) == "TCP4") || dst.Is4() != src.Is4() {
		return netip.AddrPort{}, fmt.Errorf("%w: %q", errProxyHeader, line)
	}
	return netip.AddrPortFrom(src, uint16(port)), nil
}

// readProxyV2 reads a version 2 header: the signature, version and
// command, family and protocol, length, addresses, and TLVs (of which
// PP2_TYPE_SSL is read: proxyTLS).
func readProxyV2(br *bufio.Reader) (netip.AddrPort, bool, error) {
	var h [16]byte
	if _, err := io.ReadFull(br, h[:]); err != nil {
		return netip.AddrPort{}, false, fmt.Errorf("%w: %v", errProxyHeader, err)
	}
	verCmd, fam := h[12], h[13]
	n := int(binary.BigEndian.Uint16(h[14:]))
	if verCmd>>4 != 2 || verCmd&0xF > 1 {
		return netip.AddrPort{}, false, fmt.Errorf("%w: version and command %#x", errProxyHeader, verCmd)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(br, body); err != nil {
		return netip.AddrPort{}, false, fmt.Errorf("%w: %v", errProxyHeader, err)
	}
	if verCmd&0xF == 0 {
		return netip.AddrPort{}, false, nil // LOCAL
	}
	switch fam {
	case 0x11, 0x12: // TCP or UDP over IPv4
		if n < 12 {
			return netip.AddrPort{}, false, fmt.Errorf("%w: %d bytes of IPv4 addresses", errProxyHeader, n)
		}
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(body[0:4])), binary.BigEndian.Uint16(body[8:])), proxyTLS(body[12:]), nil
	case 0x21, 0x22: // TCP or UDP over IPv6
		if n < 36 {
			return netip.AddrPort{}, false, fmt.Errorf("%w: %d bytes of IPv6 addresses", errProxyHeader, n)
		}
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(body[0:16])).Unmap(), binary.BigEndian.Uint16(body[32:])), proxyTLS(body[36:]), nil
	case 0x00:
		return netip.AddrPort{}, false, nil // UNSPEC
	case 0x31, 0x32:
		// AF_UNIX: a valid header naming no address smqd can use; a
		// receiver falls back to UNSPEC (proxy-protocol.txt 2.2): the
		// balancer stands, as for LOCAL.
		return netip.AddrPort{}, false, nil
	}
	return netip.AddrPort{}, false, fmt.Errorf("%w: address family %#x", errProxyHeader, fam)
}

// proxyTLS reports whether a version 2 header's TLVs hold PP2_TYPE_SSL
// (0x20) with the PP2_CLIENT_SSL bit: the client's connection to the
// balancer was TLS. TLVs that run past the header count as none.
func proxyTLS(tlvs []byte) bool {
	for len(tlvs) >= 3 {
		typ, n := tlvs[0], int(binary.BigEndian.Uint16(tlvs[1:3]))
		if len(tlvs) < 3+n {
			return false
		}
		if typ == 0x20 && n >= 1 && tlvs[3]&0x01 != 0 {
			return true
		}
		tlvs = tlvs[3+n:]
	}
	return false
}
