package wal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fakeAfter is a manual timer for the spare goroutine's backoff: every call
// records its delay and returns a channel that fires only on fire().
type fakeAfter struct {
	mu     sync.Mutex
	delays []time.Duration
	chans  []chan time.Time
}

func (f *fakeAfter) after(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := make(chan time.Time, 1)
	f.delays = append(f.delays, d)
	f.chans = append(f.chans, c)
	return c
}

// asked returns how many timers were asked for.
func (f *fakeAfter) asked() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.delays)
}

// fire fires every timer asked for so far.
func (f *fakeAfter) fire() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.chans {
		select {
		case c <- time.Time{}:
		default:
		}
	}
}

// countingHandler counts records by level and message, and forwards them.
type countingHandler struct {
	slog.Handler
	mu     *sync.Mutex
	counts map[string]int
}

func newCountingLogger(t testing.TB) (*slog.Logger, func(level slog.Level, msgPrefix string) int) {
	h := &countingHandler{Handler: testLogger(t).Handler(), mu: &sync.Mutex{}, counts: map[string]int{}}
	count := func(level slog.Level, prefix string) int {
		h.mu.Lock()
		defer h.mu.Unlock()
		n := 0
		for k, c := range h.counts {
			if strings.HasPrefix(k, level.String()+" "+prefix) {
				n += c
			}
		}
		return n
	}
	return slog.New(h), count
}

func (h *countingHandler) Handle(ctx context.Context, r slog.Record) error {
	h.mu.Lock()
	h.counts[r.Level.String()+" "+r.Message]++
	h.mu.Unlock()
	return h.Handler.Handle(ctx, r)
}

func (h *countingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &countingHandler{Handler: h.Handler.WithAttrs(as), mu: h.mu, counts: h.counts}
}

func (h *countingHandler) WithGroup(name string) slog.Handler {
	return &countingHandler{Handler: h.Handler.WithGroup(name), mu: h.mu, counts: h.counts}
}

// isRetryable: the error of a stalled roll, never the sticky one.
func isRetryable(err error, cause error) bool {
	return errors.Is(err, ErrSpareFailed) && errors.Is(err, cause) && !errors.Is(err, ErrFailed)
}

// spareSetup is a log whose segment-file preparation fails until heal is
// called: either injected ENOSPC (FaultFS) or a full MemFS.
type spareSetup struct {
	name   string
	arm    func(t *testing.T, fs *MemFS, ffs *FaultFS) // before Open
	heal   func(fs *MemFS, ffs *FaultFS)
	expect error // the cause seen in errors
}

func spareSetups() []spareSetup {
	return []spareSetup{
		{
			name: "faultfs-enospc",
			arm: func(t *testing.T, _ *MemFS, ffs *FaultFS) {
				ffs.Filter = func(name string) bool { return strings.HasSuffix(name, spareSuffix) }
				ffs.FailPreallocate(syscall.ENOSPC)
			},
			heal:   func(_ *MemFS, ffs *FaultFS) { ffs.Disarm() },
			expect: syscall.ENOSPC,
		},
		{
			name: "memfs-full",
			arm: func(t *testing.T, fs *MemFS, _ *FaultFS) {
				// Room for the first segment and a bit, not for a spare.
				fs.SetCapacity(MinSegmentBytes + MinSegmentBytes/2)
			},
			heal:   func(fs *MemFS, _ *FaultFS) { fs.SetCapacity(0) },
			expect: syscall.ENOSPC,
		},
	}
}

// TestSpareFailureRecovers (invariant 10): a spare segment file that cannot
// be prepared (ENOSPC) never fails the log. The spare goroutine retries with
// a doubling, bounded backoff and logs the streak once; a roll without a
// spare stalls: records before it are durable, waiters after it get a
// retryable error (not ErrFailed), Append fails instead of blocking once the
// ring is full; Health reports it. Once space is back the next retry ends
// the stall without a reopen, and nothing appended is lost.
func TestSpareFailureRecovers(t *testing.T) {
	for _, setup := range spareSetups() {
		t.Run(setup.name, func(t *testing.T) { spareRecoverRun(t, setup) })
	}
}

func spareRecoverRun(t *testing.T, setup spareSetup) {
	mem := NewMemFS()
	ffs := NewFaultFS(mem)
	setup.arm(t, mem, ffs)
	fa := &fakeAfter{}
	logger, count := newCountingLogger(t)
	opts := testOptions(t, ffs)
	opts.Logger = logger
	opts.BufferBytes = minBufferBytes
	opts.after = fa.after
	l := mustOpen(t, crashDir, opts)

	// The spare goroutine fails, backs off, fails again: one Error line.
	waitUntil(t, 10*time.Second, "first spare failure", func() bool { return fa.asked() == 1 })
	if err := l.Health(); !isRetryable(err, setup.expect) || !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Health with no spare: %v", err)
	}
	for n := 2; n <= 4; n++ {
		fa.fire()
		waitUntil(t, 10*time.Second, "spare retry", func() bool { return fa.asked() == n })
	}
	fa.mu.Lock()
	delays := append([]time.Duration(nil), fa.delays...)
	fa.mu.Unlock()
	want := []time.Duration{spareRetryMin, 2 * spareRetryMin, 4 * spareRetryMin, 8 * spareRetryMin}
	if fmt.Sprint(delays) != fmt.Sprint(want) {
		t.Fatalf("backoff delays %v, want %v", delays, want)
	}
	if n := nextBackoff(spareRetryMax); n != spareRetryMax {
		t.Fatalf("backoff not bounded: %v", n)
	}
	if c := count(slog.LevelError, "wal cannot prepare a spare"); c != 1 {
		t.Fatalf("%d Error lines for one failure streak, want 1", c)
	}

	// Fill the first segment; the record that needs the next one stalls.
	payloads := map[Pos][]byte{}
	var before, after []Record
	for i := 0; ; i++ {
		body := testPayload(uint64(i), 3000, false)
		recs := []Record{{Type: 1, Body: body}}
		if err := l.Append(recs); err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
		payloads[recs[0].Pos] = body
		err := l.WaitDurable(recs[0].Pos)
		if err == nil {
			before = append(before, recs[0])
			continue
		}
		if !isRetryable(err, setup.expect) || !errors.Is(err, ErrNoSpace) {
			t.Fatalf("WaitDurable across a roll without spare: %v", err)
		}
		after = append(after, recs[0])
		break
	}
	if len(l.Segments()) != 2 || l.WrittenEnd() != after[0].Pos || l.SyncedEnd() != after[0].Pos {
		t.Fatalf("stalled at %d: segments %v written %d synced %d", after[0].Pos, l.Segments(), l.WrittenEnd(), l.SyncedEnd())
	}
	if err := l.Health(); !isRetryable(err, setup.expect) {
		t.Fatalf("Health while stalled: %v", err)
	}
	if free, err := l.FreeBytes(); err != nil || (setup.name == "memfs-full" && free >= MinSegmentBytes) {
		t.Fatalf("FreeBytes while stalled on a full MemFS: %d, %v", free, err)
	}
	if err := l.Sync(); !isRetryable(err, setup.expect) {
		t.Fatalf("Sync while stalled: %v", err)
	}
	// Appends are queued while the ring has room, then fail, never block.
	var appendErr error
	for i := 0; appendErr == nil && i < 100; i++ {
		body := testPayload(uint64(1000+i), 3000, false)
		recs := []Record{{Type: 2, Body: body}}
		if appendErr = l.Append(recs); appendErr == nil {
			payloads[recs[0].Pos] = body
			after = append(after, recs[0])
		}
	}
	if !isRetryable(appendErr, setup.expect) {
		t.Fatalf("Append with a full ring while stalled: %v", appendErr)
	}
	st := l.Stats()
	if st.RollStalls != 1 || st.SpareFailures < 5 || st.StickyFailures != 0 {
		t.Fatalf("stats while stalled: stalls %d spare failures %d sticky %d", st.RollStalls, st.SpareFailures, st.StickyFailures)
	}
	// Reads of what was written keep working.
	for _, r := range before {
		if _, got, err := l.ReadAt(r.Pos, 0, nil); err != nil || !bytes.Equal(got, payloads[r.Pos]) {
			t.Fatalf("ReadAt %d while stalled: %v", r.Pos, err)
		}
	}

	// Space is back: the next retry ends the stall without a reopen.
	setup.heal(mem, ffs)
	fa.fire()
	waitUntil(t, 10*time.Second, "the stall to end", func() bool { return l.Health() == nil })
	for _, r := range after {
		if err := l.WaitDurable(r.Pos); err != nil {
			t.Fatalf("WaitDurable(%d) after recovery: %v", r.Pos, err)
		}
	}
	for lvl, msg := range map[slog.Level]string{
		slog.LevelError: "wal cannot start a new segment",
		slog.LevelInfo:  "wal spare segment file prepared again",
	} {
		if c := count(lvl, msg); c != 1 {
			t.Fatalf("%d %v lines %q, want 1", c, lvl, msg)
		}
	}
	waitUntil(t, 10*time.Second, "stall end logged", func() bool {
		return count(slog.LevelInfo, "wal segment file made after a stall") == 1
	})
	// Later rolls work as usual.
	for i := range 40 {
		body := testPayload(uint64(2000+i), 3000, false)
		r := appendWait(t, l, 3, body)
		payloads[r.Pos] = body
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	// Nothing appended is lost, including the records whose wait failed.
	l = mustOpen(t, crashDir, testOptions(t, mem))
	defer l.Close()
	got, order, err := readAll(t, l, 0)
	if err != nil || len(order) != len(payloads) {
		t.Fatalf("replay after recovery: %d records of %d, %v", len(order), len(payloads), err)
	}
	for p, b := range payloads {
		if !bytes.Equal(got[p], b) {
			t.Fatalf("record at %d lost or wrong", p)
		}
	}
}

// TestSpareWriterMakesOwn (invariant 10): when the spare goroutine is failing
// but a segment file can be made now, the roll makes one itself: no stall.
func TestSpareWriterMakesOwn(t *testing.T) {
	ffs := NewFaultFS(NewMemFS())
	// Only the spare goroutine's files ("<n>.spare") fail.
	ffs.Filter = func(name string) bool {
		b := filepath.Base(name)
		return strings.HasSuffix(b, spareSuffix) && b[0] >= '0' && b[0] <= '9'
	}
	ffs.FailPreallocate(syscall.ENOSPC)
	fa := &fakeAfter{}
	opts := testOptions(t, ffs)
	opts.after = fa.after
	l := mustOpen(t, crashDir, opts)
	defer l.Close()
	waitUntil(t, 10*time.Second, "spare failure", func() bool { return fa.asked() == 1 })
	for i := range 40 {
		appendWait(t, l, 1, testPayload(uint64(i), 3000, false))
	}
	if st := l.Stats(); st.Rolls == 0 || st.RollStalls != 0 {
		t.Fatalf("rolls %d stalls %d, want rolls without stalls", st.Rolls, st.RollStalls)
	}
	if err := l.Health(); !isRetryable(err, syscall.ENOSPC) {
		t.Fatalf("Health while the spare goroutine fails: %v", err)
	}
}

// TestSpareCloseWhileStalled: Close of a stalled log says that appended
// records were not written (retryable class), and the log reopens with
// everything before the stall.
func TestSpareCloseWhileStalled(t *testing.T) {
	mem := NewMemFS()
	ffs := NewFaultFS(mem)
	ffs.Filter = func(name string) bool { return strings.HasSuffix(name, spareSuffix) }
	ffs.FailPreallocate(syscall.ENOSPC)
	opts := testOptions(t, ffs)
	opts.after = (&fakeAfter{}).after
	l := mustOpen(t, crashDir, opts)
	durable := appendUntilStalled(t, l)
	if err := l.Close(); !isRetryable(err, syscall.ENOSPC) {
		t.Fatalf("Close while stalled: %v", err)
	}
	l = mustOpen(t, crashDir, testOptions(t, mem))
	defer l.Close()
	_, order, err := readAll(t, l, 0)
	if err != nil || len(order) != len(durable) {
		t.Fatalf("reopen after a stalled close: %d records, want %d (%v)", len(order), len(durable), err)
	}
}

// TestStalledRollKeepsTheSegmentBeforeIt: while a roll waits for a spare
// (the disk is full), the segment before the new one is not removed, even
// dead: the new one has no file yet, and without the old one the directory
// held no file of the log's newest positions, only a hole marker at its
// start, and the next Open refused ("the newest entry ... is a hole
// marker"). After the stall the log reopens with every durable record.
func TestStalledRollKeepsTheSegmentBeforeIt(t *testing.T) {
	mem := NewMemFS()
	ffs := NewFaultFS(mem)
	ffs.Filter = func(name string) bool { return strings.HasSuffix(name, spareSuffix) }
	ffs.FailPreallocate(syscall.ENOSPC)
	opts := testOptions(t, ffs)
	opts.after = (&fakeAfter{}).after
	opts.RecycleSegments = -1 // a recycled file would end the stall
	l := mustOpen(t, crashDir, opts)
	durable := appendUntilStalled(t, l)
	segs := l.Segments()
	if len(segs) < 2 || segs[len(segs)-1].FileBytes != 0 {
		t.Fatalf("segments %+v: want the last without a file (the stalled roll)", segs)
	}
	// The only one with a file: removed, the directory held no segment,
	// and Open made a new empty log at 0 (the engine then refused: its
	// index checkpoint past the log's end).
	prev := segs[len(segs)-2]
	if removed, err := l.RemoveSegmentIfDead(prev.Start); err != nil || removed {
		t.Fatalf("RemoveSegmentIfDead of the segment before a stalled roll's: removed %v, %v", removed, err)
	}
	if err := l.Close(); !isRetryable(err, syscall.ENOSPC) {
		t.Fatalf("Close while stalled: %v", err)
	}
	l = mustOpen(t, crashDir, testOptions(t, mem))
	defer l.Close()
	_, order, err := readAll(t, l, 0)
	if err != nil || len(order) != len(durable) || l.End() < prev.End {
		t.Fatalf("reopen after a stalled close: %d records, end %d (%v), want %d records and an end at least %d", len(order), l.End(), err, len(durable), prev.End)
	}
}

// appendUntilStalled appends records to l until one is not made durable
// (a roll waits for a segment file), and returns those that were.
func appendUntilStalled(t *testing.T, l *Log) []Record {
	t.Helper()
	var durable []Record
	for i := 0; ; i++ {
		recs := []Record{{Type: 1, Body: testPayload(uint64(i), 3000, false)}}
		if err := l.Append(recs); err != nil {
			t.Fatal(err)
		}
		if err := l.WaitDurable(recs[0].Pos); err != nil {
			return durable
		}
		durable = append(durable, recs[0])
	}
}
