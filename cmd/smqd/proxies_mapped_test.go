package main

import (
	"io"
	"strings"
	"testing"
)

// An IPv4-mapped prefix shorter than /96 reaches past the mapped
// addresses; it was taken without a word and became an invalid prefix,
// which holds no address: the proxy it was written for was not trusted
// (with --proxy-protocol its header was served as a request). It is
// refused, as a name is (proxy audit, 2026-12-07).
func TestTrustedProxiesMappedPrefixTooShort(t *testing.T) {
	for _, v := range []string{"::ffff:0:0/90", "10.0.0.1,::ffff:10.0.0.0/95"} {
		c, err := parseConfig([]string{"--trusted-proxies", v}, env(nil), io.Discard)
		if err == nil {
			t.Errorf("--trusted-proxies %s: taken as %v", v, c.proxies)
			continue
		}
		if !strings.Contains(err.Error(), "--trusted-proxies") {
			t.Errorf("--trusted-proxies %s: %v", v, err)
		}
	}
	for _, p := range []struct{ in, want string }{{"::ffff:0:0/96", "0.0.0.0/0"}, {"::ffff:10.0.0.0/104", "10.0.0.0/8"}} {
		c, err := parseConfig([]string{"--trusted-proxies", p.in}, env(nil), io.Discard)
		if err != nil || len(c.proxies) != 1 || !c.proxies[0].IsValid() || c.proxies[0].String() != p.want {
			t.Errorf("--trusted-proxies %s: %v, %v; want %s", p.in, c, err, p.want)
		}
	}
}
