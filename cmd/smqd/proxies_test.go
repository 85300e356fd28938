package main

import (
	"io"
	"slices"
	"strings"
	"testing"
)

// --trusted-proxies (or SMQD_TRUSTED_PROXIES) takes addresses and CIDR
// prefixes; anything else stops the start with the flag's name.
// --proxy-protocol needs it.
func TestTrustedProxiesFlag(t *testing.T) {
	c, err := parseConfig([]string{"--trusted-proxies", " 10.0.0.0/8, 192.168.1.5 ,::1,::ffff:172.16.0.0/108,"}, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range c.proxies {
		got = append(got, p.String())
	}
	if want := []string{"10.0.0.0/8", "192.168.1.5/32", "::1/128", "172.16.0.0/12"}; !slices.Equal(got, want) {
		t.Fatalf("parsed %v, want %v", got, want)
	}
	c, err = parseConfig(nil, env(map[string]string{"SMQD_TRUSTED_PROXIES": "10.1.0.0/16"}), io.Discard)
	if err != nil || len(c.proxies) != 1 || c.proxies[0].String() != "10.1.0.0/16" {
		t.Fatalf("from the environment: %v, %v", c, err)
	}
	if _, err := parseConfig([]string{"--trusted-proxies", "10.0.0.0/8,proxy.example"}, env(nil), io.Discard); err == nil || !strings.Contains(err.Error(), "--trusted-proxies") {
		t.Fatalf("a name: %v", err)
	}
	if _, err := parseConfig([]string{"--proxy-protocol"}, env(nil), io.Discard); err == nil || !strings.Contains(err.Error(), "needs --trusted-proxies") {
		t.Fatalf("--proxy-protocol alone: %v", err)
	}
	if c, err := parseConfig([]string{"--proxy-protocol", "--trusted-proxies", "10.0.0.1"}, env(nil), io.Discard); err != nil || !c.proxyProtocol {
		t.Fatalf("--proxy-protocol: %v", err)
	}
}
