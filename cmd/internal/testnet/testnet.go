// Package testnet holds a network helper shared by the commands' tests.
package testnet

import (
	"testing"

	"github.com/smqd/smqd/engine/cluster/chaos"
)

// FreeLoopback returns a 127.0.0.1 address for a daemon or node the test
// starts later: free a moment ago, below the kernel's range for
// connections' local ports, and handed to no other test of this run
// (chaos.FreeAddr, which the fault harness uses too, reserves it across
// the test processes go test runs at once).
func FreeLoopback(t testing.TB) string {
	t.Helper()
	addr, err := chaos.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}
