package chaos

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"
)

// FreeAddr hands out only ports nobody holds a fresh reservation of, each
// once, takes over a stale reservation, and says so when none is left.
// Every port of the range but four is reserved "by another process" (a
// fresh file), one of the four by a process long gone (a file older than
// reserveTTL).
func TestFreeAddrHandsOutReservedPortsOnce(t *testing.T) {
	old := reserveDir
	reserveDir = t.TempDir()
	defer func() { reserveDir = old }()

	var want []int // four ports free on this machine now
	for p := portLow + 17; len(want) < 4 && p < portLow+portSpan; p += 2999 {
		if ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p)); err == nil {
			ln.Close()
			want = append(want, p)
		}
	}
	if len(want) < 4 {
		t.Skipf("found only %d free ports to test with", len(want))
	}
	for p := portLow; p < portLow+portSpan; p++ {
		if slices.Contains(want[1:], p) {
			continue
		}
		if err := os.WriteFile(filepath.Join(reserveDir, strconv.Itoa(p)), nil, 0o666); err != nil {
			t.Fatal(err)
		}
	}
	stale := filepath.Join(reserveDir, strconv.Itoa(want[0]))
	long := time.Now().Add(-reserveTTL - time.Minute)
	if err := os.Chtimes(stale, long, long); err != nil {
		t.Fatal(err)
	}

	var got []int
	for range 4 {
		addr, err := FreeAddr()
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		_, ps, _ := net.SplitHostPort(addr)
		p, _ := strconv.Atoi(ps)
		if !slices.Contains(want, p) || slices.Contains(got, p) {
			t.Fatalf("FreeAddr gave %s (free and unreserved: %v; given before: %v)", addr, want, got)
		}
		got = append(got, p)
	}
	if addr, err := FreeAddr(); err == nil {
		t.Fatalf("every port is reserved, and FreeAddr gave %s", addr)
	}
}
