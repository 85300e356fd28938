package server

import (
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// The client a trusted proxy's X-Forwarded-For names (clientaddr.go): from
// the right, the first entry that is not a trusted proxy; what a client
// wrote left of it never counts; an entry that is no address leaves the
// peer.
func TestForwardedClient(t *testing.T) {
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	peer := netip.MustParseAddr("10.0.0.1")
	for _, c := range []struct {
		name   string
		values []string
		want   string
	}{
		{"no header", nil, "10.0.0.1"},
		{"one client", []string{"203.0.113.7"}, "203.0.113.7"},
		{"a client's own entry is left of the proxy's", []string{"198.51.100.1, 203.0.113.7"}, "203.0.113.7"},
		{"two proxies", []string{"203.0.113.7, 10.0.0.2"}, "203.0.113.7"},
		{"every entry a proxy", []string{"10.0.0.3, 10.0.0.2"}, "10.0.0.3"},
		{"an entry that is no address", []string{"203.0.113.7, junk"}, "10.0.0.1"},
		{"junk the client wrote, left of the client", []string{"junk, 203.0.113.7"}, "203.0.113.7"},
		{"several headers, in order", []string{"198.51.100.1", "203.0.113.7"}, "203.0.113.7"},
		{"several headers, the last a proxy's", []string{"203.0.113.7", "10.0.0.9"}, "203.0.113.7"},
		{"with a port", []string{"203.0.113.7:5555"}, "203.0.113.7"},
		{"IPv6 with a port", []string{"[2001:db8::1]:80"}, "2001:db8::1"},
		{"IPv6 proxies", []string{"2001:db8::1, fd00::2"}, "2001:db8::1"},
		{"IPv4-mapped", []string{"::ffff:203.0.113.7"}, "203.0.113.7"},
		{"empty entries", []string{" , ,203.0.113.7 ,"}, "203.0.113.7"},
		{"a zone", []string{"fe80::1%eth0"}, "10.0.0.1"},
	} {
		var vals [][]byte
		for _, v := range c.values {
			vals = append(vals, []byte(v))
		}
		if got := forwardedClient(peer, vals, proxies); got.String() != c.want {
			t.Errorf("%s: %q gives %s, want %s", c.name, c.values, got, c.want)
		}
	}
}

// forwardedModel is forwardedClient written the plain way, for the fuzz
// test.
func forwardedModel(peer netip.Addr, values []string, proxies []netip.Prefix) (netip.Addr, []netip.Addr) {
	var entries []string
	for _, v := range values {
		for _, e := range strings.Split(v, ",") {
			if e = strings.TrimSpace(e); e != "" {
				entries = append(entries, e)
			}
		}
	}
	var named []netip.Addr
	for _, e := range entries {
		if a, ok := parseForwardedAddr([]byte(e)); ok {
			named = append(named, a)
		}
	}
	client := peer
	for i := len(entries) - 1; i >= 0; i-- {
		a, ok := parseForwardedAddr([]byte(entries[i]))
		if !ok {
			return peer, named
		}
		client = a
		if !trusted(a, proxies) {
			return a, named
		}
	}
	return client, named
}

func FuzzForwardedClient(f *testing.F) {
	f.Add("203.0.113.7, 10.0.0.2", "10.0.0.9")
	f.Add("junk, 203.0.113.7", "")
	f.Add("[2001:db8::1]:80,fd00::1", "::ffff:10.1.1.1")
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	peer := netip.MustParseAddr("10.0.0.1")
	f.Fuzz(func(t *testing.T, a, b string) {
		vals := []string{a, b}
		got := forwardedClient(peer, [][]byte{[]byte(a), []byte(b)}, proxies)
		want, named := forwardedModel(peer, vals, proxies)
		if got != want {
			t.Fatalf("%q: %s, the model %s", vals, got, want)
		}
		if got != peer && !slices.Contains(named, got) {
			t.Fatalf("%q: %s is neither the peer nor an address the header names", vals, got)
		}
	})
}

// Through a trusted proxy, acs:SourceIp is the client the proxy names,
// and the audit log says both; from a peer that is not trusted, the
// header is ignored, so a client cannot claim an allowed address.
func TestAuthzSourceIPBehindATrustedProxy(t *testing.T) {
	p := authzPolicies(t, authzDoc(`{"Effect": "Allow", "Action": "mns:*", "Resource": "*",
		"Condition": {"IpAddress": {"acs:SourceIp": "203.0.113.0/24"}}}`))
	start := func(trust string) (*testEnv, *client, *lockedBuffer) {
		logs := &lockedBuffer{}
		env := startEnv(t, envConfig{serverOpts: func(o *Options) {
			o.Policies = p
			o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
			if trust != "" {
				o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix(trust)}
			}
		}})
		other := env.client()
		other.id, other.secret = "other", "othersecret"
		t.Cleanup(other.close)
		return env, other, logs
	}
	via := func(c *client, xff string) *response {
		return c.do(req{method: "PUT", target: "/queues/q", body: "", headers: map[string]string{hdrForwardedFor: xff}})
	}
	// The test's client connects from loopback: trusted here.
	_, other, logs := start("127.0.0.0/8")
	if r := via(other, "203.0.113.7"); r.status != 201 {
		t.Fatalf("through a trusted proxy, from an allowed client: %d %s", r.status, r.body)
	}
	if got := logs.lines("audit"); len(got) != 1 || !strings.Contains(got[0], "client=203.0.113.7 peer=127.0.0.1:") {
		t.Fatalf("the audit log: %q", got)
	}
	authzDenied(t, via(other, "198.51.100.9"))
	authzDenied(t, via(other, "203.0.113.7, 198.51.100.9")) // the client wrote the allowed one
	authzDenied(t, other.get("/queues/q"))                  // no header: the proxy itself
	// Not trusted: the header counts for nothing.
	for _, trust := range []string{"", "10.0.0.0/8"} {
		_, other, _ := start(trust)
		authzDenied(t, via(other, "203.0.113.7"))
	}
}
