package wal

import (
	"bytes"
	"errors"
	"fmt"
	"syscall"
	"testing"
)

// TestResyncAfterLostWriteback: an fsync fails as on Linux, losing the
// writes it was to make durable though reads still see them (MemFS
// FailSyncsLosingWrites). The log is reopened in place on the same files
// and takes more records, acknowledged durable; then the power fails.
// Every record acknowledged after the reopen must survive, and the log
// must open without damage. With Resync before the reopen it does; seen
// failing without it: the crash image has a hole where the lost record
// was, and the records after it are gone (or the open reports damage).
func TestResyncAfterLostWriteback(t *testing.T) {
	for _, resync := range []bool{true, false} {
		t.Run(fmt.Sprintf("resync=%v", resync), func(t *testing.T) {
			fs := NewMemFS()
			l := mustOpen(t, crashDir, testOptions(t, fs))
			var acked [][]byte
			for i := range 10 {
				body := bytes.Repeat([]byte{byte('a' + i)}, 100)
				appendWait(t, l, 1, body)
				acked = append(acked, body)
			}
			fs.FailSyncsLosingWrites(syscall.EIO)
			lost := []Record{{Type: 1, Body: bytes.Repeat([]byte{'x'}, 100)}}
			if err := l.Append(lost); err != nil {
				t.Fatal(err)
			}
			if err := l.WaitDurable(lost[0].Pos); !errors.Is(err, syscall.EIO) {
				t.Fatalf("WaitDurable after a failed fsync: %v, want EIO", err)
			}
			fs.FailSyncsLosingWrites(nil) // the disk works again
			if resync {
				if err := l.Resync(); err != nil {
					t.Fatal(err)
				}
			}
			l.Close()

			// The reopen in place reads the page cache: the lost record is there.
			l = mustOpen(t, crashDir, testOptions(t, fs))
			for i := range 5 {
				body := bytes.Repeat([]byte{byte('A' + i)}, 100)
				appendWait(t, l, 1, body)
				acked = append(acked, body)
			}
			l.Close()

			crashed := fs.CrashClone(nil) // only what was made durable
			l2, err := Open(crashDir, testOptions(t, crashed))
			if err != nil {
				if resync {
					t.Fatalf("open after the power loss: %v", err)
				}
				t.Logf("without a resync: the open after the power loss failed: %v", err)
				return
			}
			defer l2.Close()
			got, _, err := readAll(t, l2, 0)
			if err != nil && resync {
				t.Fatalf("reading the log after the power loss: %v", err)
			}
			have := map[string]bool{}
			for _, b := range got {
				have[string(b)] = true
			}
			missing := 0
			for _, b := range acked {
				if !have[string(b)] {
					missing++
				}
			}
			switch {
			case resync && missing > 0:
				t.Fatalf("%d of %d acknowledged records lost after the power loss", missing, len(acked))
			case !resync && missing == 0:
				t.Fatalf("without a resync every acknowledged record survived: the test does not model the lost writeback")
			case !resync:
				t.Logf("without a resync: %d of %d acknowledged records lost", missing, len(acked))
			}
		})
	}
}
