// Package ports hands out loopback ports to tests: for processes they
// start later (the fault harness, engine/cluster/chaos; the commands'
// tests, cmd/internal/testnet), and for cluster nodes in a test process
// that stop and bind their port again (engine/cluster and server tests).
// It imports nothing of smqd, so that engine/cluster's own tests can use
// it (chaos imports engine/cluster).
package ports

// Ports for processes a test starts later (FreeAddr).
//
// A port found free is closed again before the process that will use it
// binds it, so something else can take it in between ("bind: address
// already in use", seen once in make test by a cluster node of cmd/smqd's
// SDK test). Two things could: a connection's local port, and another
// test's pick. The first is avoided by picking below the kernel's range for
// local ports (32768-60999 by default). The second is avoided by
// reservations.
//
// Invariant: a port is handed out only while its caller's process holds
// the reservation of it (ports_unix.go: an exclusive lock on the file
// <temp>/smqd-test-ports/<port>, kept until the process exits), so no two
// callers get it at once, whether in one process or in the several that
// go test runs at once. Every picker of these tests goes through FreeAddr
// (cmd/internal/testnet delegates here). A reservation ends with its
// process, and with it the nodes that process started (harness.go,
// invariant 3), which keep their ports across restarts until then
// (invariant 2).

import (
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

var (
	// The range picked from: 20000..31999 (variables for tests).
	portLow, portSpan = 20000, 12000
	// reserveDir holds the reservations of every process.
	reserveDir = filepath.Join(os.TempDir(), "smqd-test-ports")

	heldMu sync.Mutex
	held   []*os.File // guarded by heldMu: this process's reservations, open until it exits
)

// FreeAddr returns a 127.0.0.1 address whose port is free now, is not in
// the range of connections' local ports, and is reserved for the caller
// until this process exits. It looks at the range from a random port on,
// so that it finds a free one while any is left.
func FreeAddr() (string, error) {
	if err := os.MkdirAll(reserveDir, 0o777); err != nil {
		return "", err
	}
	start := mrand.IntN(portSpan)
	for k := range portSpan {
		port := portLow + (start+k)%portSpan
		if !reserve(port) {
			continue
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue // in use by something that does not reserve: keep it reserved, pick again
		}
		ln.Close()
		return ln.Addr().String(), nil
	}
	return "", fmt.Errorf("ports: every port of %d..%d is reserved or in use", portLow, portLow+portSpan-1)
}
