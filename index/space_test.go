package index

import (
	"errors"
	"runtime"
	"testing"
)

// TestFreeBytes: the free bytes of the store's file system are reported on
// linux (and "unsupported" elsewhere), also after Close.
func TestFreeBytes(t *testing.T) {
	s := openT(t, t.TempDir(), testOptions(t))
	n, err := s.FreeBytes()
	if runtime.GOOS != "linux" {
		if !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("FreeBytes off linux: %d, %v", n, err)
		}
		return
	}
	if err != nil || n <= 0 {
		t.Fatalf("FreeBytes = %d, %v", n, err)
	}
	_ = s.Close()
	if n, err := s.FreeBytes(); err != nil || n <= 0 {
		t.Fatalf("FreeBytes after Close = %d, %v", n, err)
	}
}

// TestReserveBytes pins the reserve's terms (see ReserveBytes) for the
// defaults and checks that it follows the memtable size and count.
func TestReserveBytes(t *testing.T) {
	const mib = 1 << 20
	d := DefaultOptions()
	// (2+2)×2×8 + 8 + 8×8 + 16 + 1×2×11 + 2×1 + 1 MiB.
	if got, want := d.ReserveBytes(), int64(64+8+64+16+22+2+1)*mib; got != want {
		t.Fatalf("default reserve %d MiB, want %d MiB", got/mib, want/mib)
	}
	big := d
	big.MemTableBytes, big.NumMemtables = 64*mib, 4
	if got, want := big.ReserveBytes()-d.ReserveBytes(), int64((6*2*64-4*2*8)+(64-8)+8*(64-8))*mib; got != want {
		t.Fatalf("reserve grows by %d MiB for 4 memtables of 64 MiB, want %d MiB", got/mib, want/mib)
	}
}
