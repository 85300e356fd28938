package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/smqd/smqd/wal"
)

// An Open refused for lack of space under an explicit FreeSpaceReserve
// names that reserve as what to lower: it told the embedder to lower the
// segment and memtable sizes, which do not size the guard then.
func TestOpenRefusedUnderAnExplicitReserveNamesIt(t *testing.T) {
	dir := t.TempDir()
	fs := wal.NewMemFS()
	fs.MkdirAll(dir+"/wal", 0o700)
	fs.SetCapacity(1 << 20)
	o := Options{Dir: dir, Clock: NewFakeClock(t0), Logger: testLogger(t), FreeSpaceReserve: 4 << 20}
	o.WAL.FS = fs
	o.WAL.SegmentBytes = 256 << 10
	_, err := Open(o)
	if !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), "FreeSpaceReserve") || strings.Contains(err.Error(), "memtable") {
		t.Fatalf("open with 1 MiB free and a 4 MiB reserve: %v; want it to name FreeSpaceReserve", err)
	}
}
