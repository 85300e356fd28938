package wal

import (
	"bytes"
	"testing"
)

// TestRemoveSegmentIfDead: records appended with Live count in their
// segment at once, and a segment with live bytes is never removed by
// RemoveSegmentIfDead; once they are released it goes.
func TestRemoveSegmentIfDead(t *testing.T) {
	opts := testOptions(t, NewMemFS())
	opts.SegmentBytes = 64 << 10
	l := mustOpen(t, "log", opts)
	defer l.Close()
	body := bytes.Repeat([]byte("b"), 1000)
	var live []Record
	for i := 0; i < 200; i++ {
		recs := []Record{{Type: 1, Body: body, Live: i%50 == 0}, {Type: 2, Body: []byte("state")}}
		if err := l.Append(recs); err != nil {
			t.Fatal(err)
		}
		if recs[0].Live {
			live = append(live, recs[0])
		}
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	segs := l.Segments()
	if len(segs) < 3 {
		t.Fatalf("want several segments, have %d", len(segs))
	}
	var sum int64
	for _, s := range segs {
		sum += s.Live
	}
	if want := int64(len(live)) * int64(live[0].Size); sum != want {
		t.Fatalf("live bytes %d, want %d", sum, want)
	}
	removed := 0
	for _, s := range segs {
		ok, err := l.RemoveSegmentIfDead(s.Start)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case ok && (s.Live != 0 || s.Active):
			t.Fatalf("segment %d removed with %d live bytes (active %v)", s.Start, s.Live, s.Active)
		case ok:
			removed++
		}
	}
	// Release the live records: every inactive segment can go now.
	for _, r := range live {
		l.AddLive(r.Pos, -int64(r.Size))
	}
	for _, s := range l.Segments() {
		ok, err := l.RemoveSegmentIfDead(s.Start)
		if err != nil {
			t.Fatal(err)
		}
		if ok == s.Active {
			t.Fatalf("segment %d (active %v): removed %v", s.Start, s.Active, ok)
		}
	}
	if n := len(l.Segments()); n != 1 {
		t.Fatalf("%d segments left, want the active one", n)
	}
}
