package wal

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
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
			loseWrite(t, fs, l, []Record{{Type: 1, Body: bytes.Repeat([]byte{'x'}, 100)}})
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

// TestResyncTailAfterKill: the process dies after the failed fsync,
// before any Resync (Close without one stands in for the kill), and the
// next start reads the lost record from the page cache. ResyncTail at that
// start, from the first segment still present (segment 0 was removed: the
// range starts in a hole), over a tail of several segments, makes it
// durable: after more acknowledged records and a power loss, the log opens
// and holds every acknowledged record. The range must cover the whole tail
// (the returned count), and ResyncTail after an append is refused.
func TestResyncTailAfterKill(t *testing.T) {
	fs := NewMemFS()
	l := mustOpen(t, crashDir, testOptions(t, fs))
	var acked [][]byte
	for i := range 200 { // about 1 KiB each: 3+ segments of 64 KiB
		body := bytes.Repeat([]byte{byte(i)}, 1000+i)
		appendWait(t, l, 1, body)
		acked = append(acked, body)
	}
	segs := l.Segments()
	if len(segs) < 4 {
		t.Fatalf("%d segments, want at least 4", len(segs))
	}
	if err := l.RemoveSegment(segs[0].Start); err != nil {
		t.Fatal(err)
	}
	acked = acked[:0]         // what the removed segment held is gone on purpose; check from here on
	from := segs[0].Start + 1 // inside the hole
	lost := []Record{{Type: 1, Body: bytes.Repeat([]byte{'x'}, 100)}}
	loseWrite(t, fs, l, lost)
	l.Close() // killed: no Resync

	l = mustOpen(t, crashDir, testOptions(t, fs))
	firstKept := l.Segments()[0].Start
	n, err := l.ResyncTail(from)
	if err != nil {
		t.Fatal(err)
	}
	if min := int64(l.WrittenEnd() - firstKept); n < min || n > min+headerSize {
		t.Fatalf("ResyncTail rewrote %d bytes; the tail from %d to %d is %d", n, firstKept, l.WrittenEnd(), min)
	}
	for i := range 5 {
		body := bytes.Repeat([]byte{byte('A' + i)}, 100)
		appendWait(t, l, 1, body)
		acked = append(acked, body)
	}
	if _, err := l.ResyncTail(from); !errors.Is(err, ErrResyncAfterAppend) {
		t.Fatalf("ResyncTail after an append: %v, want ErrResyncAfterAppend", err)
	}
	l.Close()

	l2, err := Open(crashDir, testOptions(t, fs.CrashClone(nil)))
	if err != nil {
		t.Fatalf("open after the power loss: %v", err)
	}
	defer l2.Close()
	got, _, err := readAll(t, l2, firstKept)
	if err != nil {
		t.Fatalf("reading the log after the power loss: %v", err)
	}
	have := map[string]bool{}
	for _, b := range got {
		have[string(b)] = true
	}
	for i, b := range acked {
		if !have[string(b)] {
			t.Fatalf("acknowledged record %d of %d lost after the power loss", i, len(acked))
		}
	}
	if !have[string(lost[0].Body)] {
		t.Fatal("the record the start-up read from the page cache is not on disk")
	}
}

// TestResyncTailLargerThanAChunk: the start-up rewrite goes a chunk at a
// time (rewriteChunk); writes lost by a failed fsync that span several
// chunks of one segment all reach the disk. Seen failing with the rewrite
// stopped after its first chunk ("record at 984232 not on disk").
func TestResyncTailLargerThanAChunk(t *testing.T) {
	fs := NewMemFS()
	opts := testOptions(t, fs)
	opts.SegmentBytes = 8 * rewriteChunk
	opts.BufferBytes = 4 * rewriteChunk
	l := mustOpen(t, crashDir, opts)
	appendWait(t, l, 1, bytes.Repeat([]byte{'a'}, 1000))
	var lost []Record
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 40 { // 40 × 64 KiB, incompressible: 2.5 chunks, in one segment
		body := make([]byte, 64<<10)
		for j := range body {
			body[j] = byte(rnd.Uint32())
		}
		lost = append(lost, Record{Type: 1, Body: body})
	}
	loseWrite(t, fs, l, lost)
	l.Close() // killed: no Resync

	l = mustOpen(t, crashDir, opts)
	n, err := l.ResyncTail(0)
	if err != nil {
		t.Fatal(err)
	}
	if n < 2*rewriteChunk {
		t.Fatalf("ResyncTail rewrote %d bytes, want over %d", n, 2*rewriteChunk)
	}
	l.Close()
	l2, err := Open(crashDir, testOptions(t, fs.CrashClone(nil)))
	if err != nil {
		t.Fatalf("open after the power loss: %v", err)
	}
	defer l2.Close()
	got, _, err := readAll(t, l2, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range lost {
		if !bytes.Equal(got[r.Pos], r.Body) {
			t.Fatalf("record at %d not on disk after the power loss", r.Pos)
		}
	}
}

// loseWrite appends recs while every fsync fails as on Linux (the writes
// stay readable but never reach the disk: MemFS FailSyncsLosingWrites),
// checks that the log reports it, and lets the disk work again. The log
// is failed afterwards.
func loseWrite(t *testing.T, fs *MemFS, l *Log, recs []Record) {
	t.Helper()
	fs.FailSyncsLosingWrites(syscall.EIO)
	defer fs.FailSyncsLosingWrites(nil)
	if err := l.Append(recs); err != nil {
		t.Fatal(err)
	}
	if err := l.WaitDurable(recs[len(recs)-1].Pos); !errors.Is(err, syscall.EIO) {
		t.Fatalf("WaitDurable after a failed fsync: %v, want EIO", err)
	}
}
