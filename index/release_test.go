package index

import (
	"bytes"
	"errors"
	"runtime"
	"testing"
)

// TestReleaseMemory: after a scan has mapped the tables in, ReleaseMemory
// advises their pages away (on Linux) and loses nothing: a second scan reads
// every value back; on a closed store it reports ErrClosed.
func TestReleaseMemory(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, testOptions(t))
	const n = 20000
	for base := uint64(0); base < n; base += 1000 {
		b := s.NewBatch()
		for seq := base; seq < base+1000; seq++ {
			b.PutMessage(1, seq, msgVal(1, seq, 0))
		}
		if err := s.Commit(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil { // flush: the messages are in tables now
		t.Fatal(err)
	}
	s = openT(t, dir, testOptions(t))
	check := func() {
		t.Helper()
		next := uint64(0)
		err := s.Messages(func(q, seq uint64, v []byte) error {
			if q != 1 || seq != next || !bytes.Equal(v, msgVal(1, seq, 0)) {
				t.Fatalf("message (%d, %d) = %q, want (1, %d)", q, seq, v, next)
			}
			next++
			return nil
		})
		if err != nil || next != n {
			t.Fatalf("scan: %d messages, %v", next, err)
		}
	}
	check()
	advised, err := s.ReleaseMemory()
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS == "linux" && advised <= 0 {
		t.Fatalf("advised %d bytes of table mappings, want > 0", advised)
	}
	check()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReleaseMemory(); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
}
