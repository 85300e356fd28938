package server

// The client's address, for acs:SourceIp conditions (authz.go), the
// address a forwarding node passes to the leader, and the audit log. It
// is the TCP peer of the connection, unless the operator trusts that peer
// as a reverse proxy (Options.TrustedProxies): then it is the address that
// the first trusted proxy got the request from, read from the right of
// X-Forwarded-For, where each proxy appends the address it got the request
// from.
//
// Invariants:
//  1. A peer that is not trusted cannot change its address: its
//     X-Forwarded-For is not read.
//  2. An address a client wrote into the header itself never passes for
//     it: entries are read from the right, and the first one that is not
//     a trusted proxy is the client; what lies left of it, the client
//     wrote.
//  3. A header smqd cannot read (an entry that is no address) names no
//     client: the peer stands, a proxy's address, which an allow list
//     written for clients does not hold.

import (
	"bytes"
	"net/netip"

	"github.com/valyala/fasthttp"
)

const (
	hdrForwardedFor   = "X-Forwarded-For"
	hdrForwardedProto = "X-Forwarded-Proto"
)

// secureTransport reports whether the client's connection is TLS, for
// acs:SecureTransport: this listener's own TLS, or the TLS a trusted
// proxy terminated, as it says: a PROXY protocol version 2 header with
// PP2_CLIENT_SSL (proxyproto.go), or, from a peer trusted as
// X-Forwarded-For is (the same rule: invariant 1), an X-Forwarded-Proto
// whose last entry is "https". The proxy must set that header, not pass
// on the client's.
func (s *Server) secureTransport(ctx *fasthttp.RequestCtx) bool {
	if ctx.IsTLS() {
		return true
	}
	if len(s.opts.TrustedProxies) == 0 {
		return false
	}
	if pc := proxyConnOf(ctx.Conn()); pc != nil && pc.hdr {
		// Under a PROXY header the balancer's word alone: the HTTP headers
		// are the client's, even when the address the header names is in
		// --trusted-proxies (an X-Forwarded-Proto of the client's own
		// passed acs:SecureTransport then; found in review), and under a
		// LOCAL or UNKNOWN header, which names no client (it passed then
		// too; TLS audit, 2026-12-07).
		return pc.tls
	}
	peer, ok := netip.AddrFromSlice(ctx.RemoteIP())
	if !ok || !trusted(peer.Unmap(), s.opts.TrustedProxies) {
		return false
	}
	vs := ctx.Request.Header.PeekAll(hdrForwardedProto)
	if len(vs) == 0 {
		return false
	}
	v := vs[len(vs)-1]
	if k := bytes.LastIndexByte(v, ','); k >= 0 {
		v = v[k+1:]
	}
	return bytes.EqualFold(bytes.TrimSpace(v), []byte("https"))
}

// clientAddr returns the address of the client of a request this node
// received itself (the file comment); the zero Addr if the connection has
// none (a test's in-memory one).
func (s *Server) clientAddr(ctx *fasthttp.RequestCtx) netip.Addr {
	peer, ok := netip.AddrFromSlice(ctx.RemoteIP())
	if !ok {
		return netip.Addr{}
	}
	peer = peer.Unmap()
	if len(s.opts.TrustedProxies) == 0 || !trusted(peer, s.opts.TrustedProxies) {
		return peer // invariant 1
	}
	if pc := proxyConnOf(ctx.Conn()); pc != nil && pc.hdr && pc.src == nil {
		// A LOCAL or UNKNOWN PROXY header: the balancer stands; the HTTP
		// headers behind a layer 4 balancer are not its own (TLS audit,
		// 2026-12-07: a client's X-Forwarded-For chose its address).
		return peer
	}
	return forwardedClient(peer, ctx.Request.Header.PeekAll(hdrForwardedFor), s.opts.TrustedProxies)
}

// forwardedClient returns the client that a trusted peer's
// X-Forwarded-For values (in the order the headers came) name
// (invariants 2 and 3).
func forwardedClient(peer netip.Addr, values [][]byte, proxies []netip.Prefix) netip.Addr {
	client := peer
	for i := len(values) - 1; i >= 0; i-- {
		v := values[i]
		for len(v) > 0 {
			var e []byte
			if k := bytes.LastIndexByte(v, ','); k >= 0 {
				v, e = v[:k], v[k+1:]
			} else {
				v, e = nil, v
			}
			e = bytes.TrimSpace(e)
			if len(e) == 0 {
				continue
			}
			a, ok := parseForwardedAddr(e)
			if !ok {
				return peer // invariant 3
			}
			if client = a; !trusted(a, proxies) {
				return a
			}
		}
	}
	return client // every entry a trusted proxy: the leftmost
}

// parseForwardedAddr reads one X-Forwarded-For entry: an address, or an
// address with a port ("1.2.3.4:5", "[::1]:5"), as some proxies write.
func parseForwardedAddr(e []byte) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(string(e)); err == nil && a.Zone() == "" {
		return a.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(string(e)); err == nil && ap.Addr().Zone() == "" {
		return ap.Addr().Unmap(), true
	}
	return netip.Addr{}, false
}

func trusted(a netip.Addr, proxies []netip.Prefix) bool {
	for _, p := range proxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
