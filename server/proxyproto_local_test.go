package server

import (
	"net/netip"
	"testing"
)

// A connection whose PROXY header names no client (v2 LOCAL, v1 UNKNOWN:
// HAProxy sends UNKNOWN for a client that did not come over TCP/IP) is
// the balancer's, and "the balancer stands" (docs/operations.md, "Behind
// a proxy"): the HTTP headers that follow it came through a layer 4
// balancer that wrote none of them, so an X-Forwarded-Proto or an
// X-Forwarded-For in them must not count, as under a header that names a
// client. They did: the balancer being a trusted proxy, the client's own
// X-Forwarded-Proto: https passed a policy that denies plain HTTP, and
// its own X-Forwarded-For chose its acs:SourceIp (TLS audit, 2026-12-07).
func TestProxyProtocolLocalHeaderIgnoresForwardedHeaders(t *testing.T) {
	for _, tc := range []struct {
		name, policy string
		headers      map[string]string
	}{
		{"X-Forwarded-Proto", `{"Effect": "Allow", "Action": "mns:*", "Resource": "*"},
			{"Effect": "Deny", "Action": "mns:*", "Resource": "*", "Condition": {"Bool": {"acs:SecureTransport": "false"}}}`,
			map[string]string{"X-Forwarded-Proto": "https"}},
		{"X-Forwarded-For", `{"Effect": "Allow", "Action": "mns:*", "Resource": "*",
			"Condition": {"IpAddress": {"acs:SourceIp": "203.0.113.0/24"}}}`,
			map[string]string{"X-Forwarded-For": "203.0.113.5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := authzPolicies(t, authzDoc(tc.policy))
			env := startEnv(t, envConfig{serverOpts: func(o *Options) {
				o.Policies = p
				o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
				o.ProxyProtocol = true
			}})
			via := func(header string) *client {
				c := viaProxyHeader(t, env, header)
				c.id, c.secret = "other", "othersecret"
				return c
			}
			for name, h := range map[string]string{
				"v1 UNKNOWN": "PROXY UNKNOWN\r\n",
				"v2 LOCAL":   proxyV2(0, 0x00, netip.AddrPort{}, netip.AddrPort{}, nil),
			} {
				authzDenied(t, via(h).get("/queues/q")) // the control: without the header
				r := via(h).do(req{method: "GET", target: "/queues/q", headers: tc.headers})
				if r.status != 403 {
					t.Errorf("%s, then %v: %d %s, want 403", name, tc.headers, r.status, r.body)
				}
			}
		})
	}
}
