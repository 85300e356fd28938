//go:build unix

package ports

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
)

// FreeAddr hands out only ports whose reservation nobody holds, each once,
// takes one whose holder is gone, and says so when none is left. The test
// narrows the range to 16 ports free on this machine now and holds the
// reservations of 12 of them "as another process" (locks on descriptors of
// its own, which FreeAddr's cannot take either); one of the other four has
// a file left by a process that is gone (not locked).
func TestFreeAddrHandsOutReservedPortsOnce(t *testing.T) {
	oldDir, oldLow, oldSpan := reserveDir, portLow, portSpan
	defer func() { reserveDir, portLow, portSpan = oldDir, oldLow, oldSpan }()
	reserveDir = t.TempDir()

	// 16 consecutive ports free now.
	portSpan = 16
	found := false
	for portLow = 24000 + 16*int(os.Getpid()%100); portLow < 32000-16 && !found; portLow += 16 {
		free := 0
		for p := portLow; p < portLow+portSpan; p++ {
			if ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p)); err == nil {
				ln.Close()
				free++
			}
		}
		found = free == portSpan
	}
	if portLow -= 16; !found {
		t.Skip("no 16 consecutive free ports in 24000..31999")
	}
	want := []int{portLow + 1, portLow + 6, portLow + 11, portLow + 15}
	for p := portLow; p < portLow+portSpan; p++ {
		f, err := os.OpenFile(filepath.Join(reserveDir, strconv.Itoa(p)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if slices.Contains(want, p) {
			continue // want[*]'s file is there, as a process that is gone leaves it
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			t.Fatal(err)
		}
	}

	var got []int
	for range len(want) {
		addr, err := FreeAddr()
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		_, ps, _ := net.SplitHostPort(addr)
		p, _ := strconv.Atoi(ps)
		if !slices.Contains(want, p) || slices.Contains(got, p) {
			t.Fatalf("FreeAddr gave %s (unreserved: %v; given before: %v)", addr, want, got)
		}
		got = append(got, p)
	}
	if addr, err := FreeAddr(); err == nil {
		t.Fatalf("every port is reserved, and FreeAddr gave %s", addr)
	}
}
