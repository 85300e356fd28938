package chaos

// Ports for processes a test starts later (FreeAddr).
//
// A port found free is closed again before the process that will use it
// binds it, so something else can take it in between ("bind: address
// already in use", seen in make test with cmd/smqd's cluster tests beside
// this harness). Two things could: a connection's local port, and another
// test's pick. The first is avoided by picking below the kernel's range for
// local ports (32768-60999 by default). The second is avoided by
// reservations.
//
// Invariant: a port is handed out only after its caller created the file
// <temp>/smqd-test-ports/<port> with O_EXCL, so no two callers get it
// within reserveTTL, whether in one process or in the several that go
// test runs at once (every picker of these tests goes through FreeAddr;
// cmd/internal/testnet delegates here). A reservation older than
// reserveTTL is stale (its test is over, or its process died) and is taken
// over. Reservations are never removed early, since a node keeps its ports
// across restarts (harness.go, invariant 2); the range holds 12,000 ports,
// and a make test run uses a few hundred.

import (
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

const (
	portLow, portSpan = 20000, 12000 // picked from 20000..31999
	reserveTTL        = 2 * time.Hour
)

// reserveDir is where the processes' reservations are (a variable for
// tests).
var reserveDir = filepath.Join(os.TempDir(), "smqd-test-ports")

// FreeAddr returns a 127.0.0.1 address whose port is free now, is not in
// the range of connections' local ports, and was handed to no other caller
// of FreeAddr within reserveTTL. It looks at the range from a random
// port on, so that it finds a free one while any is left.
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
	return "", fmt.Errorf("chaos: every port of %d..%d is reserved or in use", portLow, portLow+portSpan-1)
}

// reserve claims port for this process: a new reservation file, or a
// stale one taken over.
func reserve(port int) bool {
	name := filepath.Join(reserveDir, strconv.Itoa(port))
	for range 2 {
		f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o666)
		if err == nil {
			fmt.Fprintf(f, "%d\n", os.Getpid())
			f.Close()
			return true
		}
		if !errors.Is(err, os.ErrExist) {
			return false
		}
		st, err := os.Stat(name)
		if err != nil || time.Since(st.ModTime()) < reserveTTL {
			return false
		}
		// Stale: remove it and race the other takers for a new one (O_EXCL
		// lets one win).
		os.Remove(name)
	}
	return false
}
