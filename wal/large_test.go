package wal

// Batches larger than the ring (invariant 12): contiguous while other
// appenders run, read back whole, and a failure in the middle of one
// returns it as not appended with its live bytes taken back.

import (
	"bytes"
	"errors"
	"sync"
	"syscall"
	"testing"
)

// TestAppendLargerThanTheRing appends batches of 6 to 12 times the ring
// while four goroutines append single records all along: each large
// batch's records are back to back (no other record between them), and
// every record reads back as appended. Before invariant 12 such a batch
// was refused (ErrRecordTooLarge); without the large flag the others'
// records land inside it.
func TestAppendLargerThanTheRing(t *testing.T) {
	opts := testOptions(t, NewMemFS()) // 64 KiB segments, a 256 KiB ring
	opts.SegmentBytes = 1 << 20
	l := mustOpen(t, crashDir, opts)
	defer l.Close()

	var mu sync.Mutex
	want := map[Pos][]byte{}
	keep := func(recs []Record) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range recs {
			want[r.Pos] = r.Body
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 20000 {
				select {
				case <-stop:
					return
				default:
				}
				recs := []Record{{Type: 1, Body: testPayload(uint64(g<<32|i), 64+i%200, false)}}
				if err := l.Append(recs); err != nil {
					t.Error(err)
					return
				}
				keep(recs)
			}
		})
	}
	for b := range 3 {
		n := 400 + 200*b // records of 4 KiB: 1.6 to 3.2 MiB
		recs := make([]Record, n)
		for i := range recs {
			recs[i] = Record{Type: 2, Body: testPayload(uint64(1<<40|b<<20|i), 4096, false), Live: true}
		}
		if err := l.Append(recs); err != nil {
			t.Fatalf("a batch of %d x 4 KiB through a 256 KiB ring: %v", n, err)
		}
		for i := 1; i < n; i++ {
			if recs[i].Pos != recs[i-1].Pos+Pos(recs[i-1].Size) {
				t.Fatalf("batch %d: record %d at %d, the one before it ends at %d: another append came between them", b, i, recs[i].Pos, recs[i-1].Pos+Pos(recs[i-1].Size))
			}
		}
		keep(recs)
	}
	close(stop)
	wg.Wait()
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	got, _, err := readAll(t, l, firstStart(l))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("read back %d records, appended %d", len(got), len(want))
	}
	for p, b := range want {
		if !bytes.Equal(got[p], b) {
			t.Fatalf("record at %d reads back otherwise", p)
		}
	}
}

// TestAppendLargerThanTheRingFails: a write that fails while a batch larger
// than the ring is being appended ends it with the log's sticky error; its
// records' Pos and Size are reset and the live bytes its framed records
// added to their segments are taken back, so that compaction's accounting
// does not keep counting records the caller was told are not appended.
// An appender that waited for it gets the error too, and a single record
// larger than the ring is still refused.
func TestAppendLargerThanTheRingFails(t *testing.T) {
	ffs := NewFaultFS(NewMemFS())
	ffs.Filter = segFilesOnly
	opts := testOptions(t, ffs)
	opts.SegmentBytes = 1 << 20
	l := mustOpen(t, crashDir, opts)
	defer l.Close()
	live := func() (n int64) {
		for _, s := range l.Segments() {
			n += s.Live
		}
		return n
	}
	appendWait(t, l, 1, []byte("before"))
	before := live()

	ffs.FailNthWrite(3, syscall.EIO)
	recs := make([]Record, 300) // 1.2 MiB
	for i := range recs {
		recs[i] = Record{Type: 2, Body: testPayload(uint64(i), 4096, false), Live: true}
	}
	err := l.Append(recs)
	if !errors.Is(err, syscall.EIO) || !errors.Is(err, ErrFailed) {
		t.Fatalf("Append of a large batch across a failed write: %v", err)
	}
	for i, r := range recs {
		if r.Pos != 0 || r.Size != 0 {
			t.Fatalf("record %d keeps Pos %d Size %d after the failure", i, r.Pos, r.Size)
		}
	}
	if after := live(); after != before {
		t.Fatalf("live bytes %d after the failed batch, %d before it", after, before)
	}

	big := []Record{{Type: 2, Body: make([]byte, 300<<10)}}
	l2 := mustOpen(t, crashDir+"2", testOptions(t, NewMemFS()))
	defer l2.Close()
	if err := l2.Append(big); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("a single record larger than the ring: %v", err)
	}
}
