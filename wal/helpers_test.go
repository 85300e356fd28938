package wal

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// tlogWriter routes slog output to t.Log until the test ends.
type tlogWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *tlogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Helper()
		w.t.Log(string(bytes.TrimRight(p, "\n")))
	}
	return len(p), nil
}

// testLogger returns a slog.Logger that writes to t.Log.
func testLogger(t testing.TB) *slog.Logger {
	w := &tlogWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// testOptions are small options for tests: 64 KiB segments, a 256 KiB ring.
func testOptions(t testing.TB, fs FS) Options {
	return Options{
		FS:           fs,
		SegmentBytes: MinSegmentBytes,
		BufferBytes:  256 << 10,
		Logger:       testLogger(t),
	}
}

func mustOpen(t testing.TB, dir string, opts Options) *Log {
	t.Helper()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return l
}

// testPayload returns a deterministic payload of n bytes for seed; it embeds
// the seed so that a misplaced payload is noticed. If compressible, the
// bytes repeat.
func testPayload(seed uint64, n int, compressible bool) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, 7))
	for i := range b {
		if compressible {
			b[i] = byte('a' + (i/16)%8)
		} else {
			b[i] = byte(r.Uint32())
		}
	}
	if n >= 8 {
		binary.LittleEndian.PutUint64(b, seed)
	}
	return b
}

// appendWait appends one record and waits for it.
func appendWait(t testing.TB, l *Log, typ RecordType, payload []byte) Record {
	t.Helper()
	recs := []Record{{Type: typ, Body: payload}}
	if err := l.Append(recs); err != nil {
		t.Fatalf("Append: %v", err)
	}
	if err := l.WaitDurable(recs[0].Pos); err != nil {
		t.Fatalf("WaitDurable(%d): %v", recs[0].Pos, err)
	}
	return recs[0]
}

// readAll replays [from, End) and returns the records by position.
func readAll(t testing.TB, l *Log, from Pos) (map[Pos][]byte, []Pos, error) {
	t.Helper()
	r, err := l.NewReader(from, l.WrittenEnd())
	if err != nil {
		t.Fatalf("NewReader: %v", err)
	}
	defer r.Close()
	out := map[Pos][]byte{}
	var order []Pos
	for {
		p, _, payload, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, order, nil
		}
		if err != nil {
			return out, order, err
		}
		out[p] = bytes.Clone(payload)
		order = append(order, p)
	}
}

// waitUntil polls cond until it holds or the deadline passes.
func waitUntil(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

// firstStart returns the start of the oldest live segment.
func firstStart(l *Log) Pos { return l.Segments()[0].Start }

// checkSkipped asserts that the log holds every record of w outside the
// skipped or cut ranges, at its original position with its payload, and
// that no record inside them is served (invariants 7 and 11).
func checkSkipped(t testing.TB, l *Log, w written, ranges []RepairedRange) {
	t.Helper()
	lost := func(p Pos) bool {
		for _, r := range ranges {
			if p >= r.Start && (p < r.End || r.Cut) {
				return true
			}
		}
		return false
	}
	got, order, err := readAll(t, l, firstStart(l))
	if err != nil {
		t.Fatalf("replay after repair: %v", err)
	}
	var want []Pos
	for _, r := range w.recs {
		if r.Pos >= firstStart(l) && !lost(r.Pos) {
			want = append(want, r.Pos)
		}
	}
	if len(order) != len(want) {
		t.Fatalf("replayed %d records, want %d (ranges %+v)", len(order), len(want), ranges)
	}
	for i, p := range order {
		if p != want[i] || !bytes.Equal(got[p], w.payload[p]) {
			t.Fatalf("record %d replayed at %d, want %d with its payload", i, p, want[i])
		}
	}
	for _, r := range w.recs {
		_, payload, err := l.ReadAt(r.Pos, 0, nil)
		switch {
		case !lost(r.Pos) && (err != nil || !bytes.Equal(payload, w.payload[r.Pos])):
			t.Fatalf("ReadAt(%d) of a kept record: %v", r.Pos, err)
		case lost(r.Pos) && r.Pos < l.End() && !errors.Is(err, ErrCorrupt):
			t.Fatalf("ReadAt(%d) of a lost record: %v, want ErrCorrupt", r.Pos, err)
		}
	}
}
