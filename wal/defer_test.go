package wal

import (
	"testing"
	"time"
)

// TestDeferredWritesGoWithTheWait (Options.DeferWrites): an Append does
// not wake the writer; the next wait writes everything appended so far in
// one write (a cluster leader's records and its entry header); a
// WaitWritten and a ring a quarter full wake it.
func TestDeferredWritesGoWithTheWait(t *testing.T) {
	l := mustOpen(t, t.TempDir(), Options{DeferWrites: true, BufferBytes: 256 << 10, SegmentBytes: 1 << 20})
	defer l.Close()
	recs := []Record{{Type: 1, Body: []byte("the leader's records")}}
	if err := l.Append(recs); err != nil {
		t.Fatal(err)
	}
	// Nothing wakes the writer: after a pause the records are still only
	// in the ring. (A pause can only hide a write, never invent one.)
	time.Sleep(50 * time.Millisecond)
	if w, end := l.written.Load(), l.endPos.Load(); w >= end {
		t.Fatalf("written %d of %d with no wait: the append woke the writer", w, end)
	}
	before := l.Stats().WriteCalls
	hdr := []Record{{Type: 2, Body: []byte("the entry header")}}
	if err := l.Append(hdr); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if n := l.Stats().WriteCalls - before; n != 1 {
		t.Fatalf("the sync took %d writes, want 1 for both appends", n)
	}

	// WaitWritten wakes the writer itself.
	more := []Record{{Type: 1, Body: []byte("a follower's records")}}
	if err := l.Append(more); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.WaitWritten(more[0].Pos) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second): // a bound, not a timing assertion
		t.Fatal("WaitWritten did not return: nothing woke the writer")
	}

	// A quarter of the ring unwritten wakes it too.
	big := make([]Record, 8)
	for i := range big {
		big[i] = Record{Type: 1, Body: testPayload(uint64(i), 8<<10, false)}
	}
	if err := l.Append(big); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second) // a bound, not a timing assertion
	for l.written.Load() < l.endPos.Load() {
		if time.Now().After(deadline) {
			t.Fatalf("written %d of %d: a quarter of the ring unwritten did not wake the writer", l.written.Load(), l.endPos.Load())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestDeferWritesOnlyWithSyncAlways: in the other modes nothing waits
// for a write, and the interval's fsync comes only after one, so the
// option is ignored there.
func TestDeferWritesOnlyWithSyncAlways(t *testing.T) {
	for _, m := range []SyncMode{SyncInterval, SyncNone} {
		l := mustOpen(t, t.TempDir(), Options{DeferWrites: true, Sync: m})
		if l.deferWrites {
			t.Errorf("%v: writes deferred", m)
		}
		l.Close()
	}
}
