package engine

// Damage tests: a damaged body is dropped once and never blocks anything
// (poison.go), and a repaired log starts and loses exactly the damaged
// records, reporting them (repair.go).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/smqd/smqd/wal"
)

// countingHandler counts log records whose message contains a text.
type countingHandler struct {
	mu   sync.Mutex
	text string
	n    int
	next slog.Handler
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(ctx context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.text) {
		h.mu.Lock()
		h.n++
		h.mu.Unlock()
	}
	return h.next.Handle(ctx, r)
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

func (h *countingHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// flipBody flips a byte of the body that starts with prefix in the first
// segment file of dir.
func flipBody(t *testing.T, dir, prefix string) {
	t.Helper()
	segs := walSegments(t, dir)
	f, err := os.OpenFile(segs[0], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	n, _ := f.ReadAt(buf, 0)
	i := bytes.Index(buf[:n], []byte(prefix))
	if i < 0 {
		t.Fatalf("body %q not found in the first segment", prefix)
	}
	buf[i+10] ^= 0x01
	if _, err := f.WriteAt(buf[i+10:i+11], int64(i+10)); err != nil {
		t.Fatal(err)
	}
}

// TestPoisonBody: a flipped body in an old segment (not checked at open)
// belongs to the only visible message at some point. It is dropped at the
// first read: counted once, logged once, never served; no receive or peek
// fails because of it; compaction then reclaims its segment with no error.
func TestPoisonBody(t *testing.T) {
	dir := t.TempDir()
	clk, bodies := writeTestData(t, dir, 600)
	flipBody(t, dir, "m-00003-")
	counter := &countingHandler{text: "message body unreadable", next: testLogger(t).Handler()}
	b := openDurableTest(t, dir, clk, func(o *Options) {
		o.WAL.SegmentBytes = 64 << 10
		o.Logger = slog.New(counter)
	})
	defer b.Close()
	q, _ := b.Queue("c")
	// Leave the damaged message the only Active one: receive the others
	// first (peeking would meet it early: do that at the end).
	seen := map[string]bool{}
	for len(seen) < len(bodies)-1 {
		msgs, err := q.Receive(context.Background(), ReceiveOptions{Max: MaxBatch, HasWait: true}, nil)
		if err != nil {
			t.Fatalf("receive after %d messages: %v", len(seen), err)
		}
		hs := make([]ReceiptHandle, len(msgs))
		for i, m := range msgs {
			if strings.HasPrefix(string(m.Body), "m-00003-") {
				t.Fatalf("damaged body served: %q", m.Body[:12])
			}
			seen[string(m.Body)] = true
			hs[i] = m.Handle
		}
		if _, err := q.Delete(hs, make([]error, len(hs))); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		if _, err := q.Receive(context.Background(), ReceiveOptions{Max: MaxBatch, HasWait: true}, nil); !errors.Is(err, ErrMessageNotExist) {
			t.Fatalf("receive with only the damaged message left: %v", err)
		}
		if _, err := q.Peek(MaxBatch, nil); !errors.Is(err, ErrMessageNotExist) {
			t.Fatalf("peek with only the damaged message left: %v", err)
		}
	}
	st := b.Stats()
	if st.Storage.Unreadable != 1 || st.Queues[0].Unreadable != 1 || counter.count() != 1 {
		t.Fatalf("damaged message counted %d (queue %d) and logged %d times, want once each",
			st.Storage.Unreadable, st.Queues[0].Unreadable, counter.count())
	}
	if info, _ := q.Attributes(); info.Active+info.Inactive+info.Delayed != 0 {
		t.Fatalf("the damaged message is still counted: %+v", info)
	}
	// Compaction reclaims every segment but the active one, the damaged
	// one included, without an error.
	for i := 0; i < 4; i++ {
		if err := durableOf(b).checkpoint(); err != nil {
			t.Fatal(err)
		}
		if _, _, err := b.compactOnce(0); err != nil {
			t.Fatalf("compaction pass: %v", err)
		}
	}
	if n := len(b.store.segments(nil)); n != 1 {
		t.Fatalf("%d segments left after draining, want the active one only", n)
	}
}

// TestPoisonBodyCompaction: a damaged body in a mostly dead segment, never
// received. Compaction's scan meets the damage: it drops that message
// (once), relocates the segment's other live bodies, and reclaims it.
func TestPoisonBodyCompaction(t *testing.T) {
	dir := t.TempDir()
	clk, bodies := writeTestData(t, dir, 600)
	flipBody(t, dir, "m-00003-")
	b := openDurableTest(t, dir, clk, func(o *Options) { o.WAL.SegmentBytes = 64 << 10 })
	defer b.Close()
	q, _ := b.Queue("c")
	// Delete most of the first segment's messages (but 0..9, the damaged
	// one among them) by receiving in order and deleting the rest.
	keep := map[string]bool{}
	for i := 0; i < 10; i++ {
		keep[bodies[i]] = true
	}
	for done := 0; done < len(bodies)-1; {
		msgs, err := q.Receive(context.Background(), ReceiveOptions{Max: MaxBatch, HasWait: true}, nil)
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		var hs []ReceiptHandle
		for _, m := range msgs {
			done++
			if keep[string(m.Body)] {
				continue // stays Inactive, live in the first segment
			}
			hs = append(hs, m.Handle)
		}
		if len(hs) > 0 {
			if _, err := q.Delete(hs, make([]error, len(hs))); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The receive above met the damaged body and dropped it: put the test
	// where compaction meets damage by flipping another kept body now.
	if b.Stats().Storage.Unreadable != 1 {
		t.Fatalf("unreadable %d after the drain", b.Stats().Storage.Unreadable)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	flipBody(t, dir, "m-00007-")
	b = openDurableTest(t, dir, clk, func(o *Options) { o.WAL.SegmentBytes = 64 << 10 })
	defer b.Close()
	for i := 0; i < 4; i++ {
		if err := durableOf(b).checkpoint(); err != nil {
			t.Fatal(err)
		}
		if _, _, err := b.compactOnce(0); err != nil {
			t.Fatalf("compaction pass over a damaged segment: %v", err)
		}
	}
	if got := b.Stats().Storage.Unreadable; got != 1 {
		t.Fatalf("compaction dropped %d damaged messages, want 1", got)
	}
	segs := b.store.segments(nil)
	if segs[0].start == 0 {
		t.Fatalf("the damaged first segment was not reclaimed: %+v", segs)
	}
	got := bodiesIn(t, b, "c")
	for i := 0; i < 10; i++ {
		if want := i != 3 && i != 7; got[bodies[i]] != want {
			t.Fatalf("message %d present=%v after compaction, want %v", i, got[bodies[i]], want)
		}
	}
}

// walRecord is a record of a closed log, for the repair matrix.
type walRecord struct {
	pos, size uint64
	typ       uint8
}

// listRecords lists the records of the log in dir.
func listRecords(t *testing.T, dir string) []walRecord {
	t.Helper()
	l, err := wal.Open(filepath.Join(dir, "wal"), wal.Options{SegmentBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	segs := l.Segments()
	r, err := l.NewReader(segs[0].Start, l.WrittenEnd())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []walRecord
	for {
		p, typ, _, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, walRecord{uint64(p), uint64(r.NextPos() - p), uint8(typ)})
	}
}

// copyDir copies a closed data directory.
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o700)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// damageAt overwrites bytes [off, off+n) of the log at position pos with
// f's output (flip or zero).
func damageAt(t *testing.T, dir string, pos uint64, n int, f func([]byte)) {
	t.Helper()
	segs := walSegments(t, dir)
	for i := len(segs) - 1; i >= 0; i-- {
		start := walSegStart(t, segs[i])
		if pos < start {
			continue
		}
		fh, err := os.OpenFile(segs[i], os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer fh.Close()
		buf := make([]byte, n)
		fh.ReadAt(buf, int64(pos-start))
		f(buf)
		if _, err := fh.WriteAt(buf, int64(pos-start)); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("no segment holds %d", pos)
}

// readReport returns the repair report written in dir (nil if none).
func readReport(t *testing.T, dir string) *repairReport {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(dir, "repair-*.json"))
	if len(names) == 0 {
		return nil
	}
	sort.Strings(names)
	b, err := os.ReadFile(names[len(names)-1])
	if err != nil {
		t.Fatal(err)
	}
	var r repairReport
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// repairFixture writes a queue and n one-message sends, then stops the
// broker cleanly (a final checkpoint: the index holds everything) or like
// kill -9 after a Sync (the log tail holds everything). It returns the
// directory, the clock, the bodies and the records of the log.
func repairFixture(t *testing.T, clean bool, n int) (string, *FakeClock, []string, []walRecord) {
	dir := t.TempDir()
	clk := NewFakeClock(t0)
	b := openDurableTest(t, dir, clk, func(o *Options) { o.WAL.SegmentBytes = 64 << 10 })
	q := mustQueue(t, b, "r", DefaultQueueConfig())
	var bodies []string
	for i := 0; i < n; i++ {
		body := fmt.Sprintf("r-%03d-%s", i, strings.Repeat("z", 90))
		if _, err := q.Send([]SendEntry{{Body: []byte(body)}}, nil); err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, body)
	}
	if clean {
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	} else {
		if err := b.Sync(); err != nil {
			t.Fatal(err)
		}
		crashBroker(b)
	}
	return dir, clk, bodies, listRecords(t, dir)
}

// openRepaired opens dir with or without --wal-repair and returns the
// bodies present (nil and the error if it did not open).
func openRepaired(t *testing.T, dir string, clk *FakeClock, repair bool) (map[string]bool, error) {
	o := Options{Dir: dir, Clock: clk, Stripes: 2}
	o.WAL.SegmentBytes = 64 << 10
	o.WAL.Repair = repair
	b, err := Open(o)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	if _, err := b.Queue("r"); err != nil {
		return map[string]bool{}, nil
	}
	return bodiesIn(t, b, "r"), nil
}

// TestRepairEveryRecord: a byte flipped inside each record of a small log
// in turn, after a clean stop and after kill -9. With --wal-repair the
// broker starts and loses exactly the damaged record: the one message whose
// send it was (the queue itself when it was the queue's record, after
// kill -9), and the report names it. Without it, start refuses and names the
// option, unless the damage is in the last record (a torn tail, always cut).
func TestRepairEveryRecord(t *testing.T) {
	for _, clean := range []bool{true, false} {
		t.Run(map[bool]string{true: "clean-stop", false: "kill-9"}[clean], func(t *testing.T) {
			src, clk, bodies, recs := repairFixture(t, clean, 12)
			sends := 0
			for k, rec := range recs {
				dir := t.TempDir()
				copyDir(t, src, dir)
				// The record's last payload byte: its body (sends), its
				// name (the queue's record).
				damageAt(t, dir, rec.pos+rec.size-1-uint64((rec.size-12)%4), 1, func(b []byte) { b[0] ^= 0x40 })
				last := k == len(recs)-1
				if _, err := openRepaired(t, dir, clk, false); err == nil && !last {
					t.Fatalf("record %d (type %d): a damaged log opened without --wal-repair", k, rec.typ)
				} else if err != nil && !strings.Contains(err.Error(), "wal-repair") {
					t.Fatalf("record %d: the refusal does not name --wal-repair: %v", k, err)
				}
				got, err := openRepaired(t, dir, clk, true)
				if err != nil {
					t.Fatalf("record %d (type %d): open with --wal-repair: %v", k, rec.typ, err)
				}
				report := readReport(t, dir)
				if report == nil {
					t.Fatalf("record %d: no repair report", k)
				}
				switch rec.typ {
				case recSend:
					lost := bodies[sends]
					sends++
					for _, body := range bodies {
						if got[body] == (body == lost) {
							t.Fatalf("record %d: message %q present=%v", k, body[:5], got[body])
						}
					}
					if !reportNames(report, lost[:5], bodies) {
						t.Fatalf("record %d: the report does not name the lost message %s: %+v", k, lost[:5], report)
					}
				case recQueueCreate:
					if clean && len(got) != len(bodies) {
						t.Fatalf("damaged queue record after a clean stop: %d of %d messages", len(got), len(bodies))
					}
					// After kill -9 the queue's only record is gone, so the
					// queue (and its messages) with it: exactly that record.
				}
			}
			if sends != len(bodies) {
				t.Fatalf("damaged %d send records of %d", sends, len(bodies))
			}
		})
	}
}

// reportNames reports whether the repair report names the message whose
// body starts with prefix (by id: sends are numbered from 1 in order).
func reportNames(r *repairReport, prefix string, bodies []string) bool {
	i := 0
	for i < len(bodies) && !strings.HasPrefix(bodies[i], prefix) {
		i++
	}
	want := fmt.Sprintf("%016X", uint64(i+1)) // seq of the (i+1)-th send, boot 1
	for _, l := range r.LostMessages {
		if strings.HasSuffix(l.MessageID, want[len(want)-8:]) && l.Queue == "r" {
			return true
		}
	}
	for _, l := range r.LostRecords {
		if strings.HasSuffix(l.MessageID, want[len(want)-8:]) {
			return true
		}
	}
	return false
}

// TestRepairTruncatedTail: the log cut at every offset of its last two
// records (the segment file truncated there, or the bytes from there zeroed
// as a torn write leaves them), after a clean stop and after kill -9. With
// --wal-repair the broker starts, every message whose record lies wholly
// before the cut is there, and the others are lost and reported whenever
// anything shows they existed: after a clean stop the index names them; after
// kill -9 a cut inside a record leaves a torn header. (A kill -9 log cut
// exactly at a record boundary is indistinguishable from a shorter log.)
// A torn tail also starts without --wal-repair.
func TestRepairTruncatedTail(t *testing.T) {
	step := uint64(29) // and every record boundary; every offset with -tags long
	if modelLong {
		step = 1
	}
	for _, clean := range []bool{true, false} {
		for _, how := range []string{"truncate", "zero"} {
			t.Run(map[bool]string{true: "clean-stop", false: "kill-9"}[clean]+"/"+how, func(t *testing.T) {
				testTruncatedTail(t, clean, how, step)
			})
		}
	}
}

func testTruncatedTail(t *testing.T, clean bool, how string, step uint64) {
	src, clk, bodies, recs := repairFixture(t, clean, 8)
	end := recs[len(recs)-1].pos + recs[len(recs)-1].size
	from := recs[len(recs)-2].pos
	cuts := []uint64{recs[len(recs)-1].pos, end - 1}
	for cut := from; cut < end; cut += step {
		cuts = append(cuts, cut)
	}
	for _, cut := range cuts {
		dir := t.TempDir()
		copyDir(t, src, dir)
		boundary := cut == recs[len(recs)-2].pos || cut == recs[len(recs)-1].pos
		if how == "zero" {
			damageAt(t, dir, cut, int(end-cut), func(b []byte) { clear(b) })
		} else {
			segs := walSegments(t, dir)
			last := segs[len(segs)-1]
			if err := os.Truncate(last, int64(cut-walSegStart(t, last))); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := openRepaired(t, dir, clk, false); err != nil && !(clean && boundary) {
			t.Fatalf("cut at %d: a torn tail did not open without --wal-repair: %v", cut, err)
		}
		{
			got, err := openRepaired(t, dir, clk, true)
			if err != nil {
				t.Fatalf("cut at %d: open: %v", cut, err)
			}
			for i, body := range bodies {
				rec := recs[len(recs)-len(bodies)+i]
				if want := rec.pos+rec.size <= cut; got[body] != want {
					t.Fatalf("cut at %d: message %d (record [%d, %d)) present=%v, want %v",
						cut, i, rec.pos, rec.pos+rec.size, got[body], want)
				}
			}
			r := readReport(t, dir)
			switch {
			case clean && (r == nil || len(r.LostMessages) == 0):
				t.Fatalf("cut at %d after a clean stop: the lost messages are not named: %+v", cut, r)
			case !boundary && (r == nil || len(r.Ranges) == 0):
				t.Fatalf("cut at %d inside a record: no report of the cut", cut)
			}
		}
	}
}
