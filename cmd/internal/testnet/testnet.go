// Package testnet holds a network helper shared by the commands' tests.
package testnet

import (
	"fmt"
	"math/rand/v2"
	"net"
	"testing"
)

// FreeLoopback returns a 127.0.0.1 address that was free a moment ago, for
// a daemon or node the test starts later. It picks below the kernel's
// ephemeral range (32768-60999 by default): a port from that range, free
// when checked, can be taken by a connection's source port or another
// test's listener before the daemon binds it ("address already in use");
// engine/cluster/chaos does the same.
func FreeLoopback(t testing.TB) string {
	t.Helper()
	for range 100 {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(12000)))
		if err == nil {
			addr := ln.Addr().String()
			ln.Close()
			return addr
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
