package engine

// Damage tests: a damaged body is dropped once and never blocks anything
// (poison.go), and a repaired log starts and loses exactly the damaged
// records, reporting them (repair.go).

import (
	"bytes"
	"context"
	"encoding/binary"
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
	"time"

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
	qid, seq  uint64 // the queue id of a queue or message record, a message record's seq
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
		p, typ, payload, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		rec := walRecord{pos: uint64(p), size: uint64(r.NextPos() - p), typ: uint8(typ)}
		if len(payload) >= 8 {
			rec.qid = binary.LittleEndian.Uint64(payload)
		}
		if len(payload) >= 16 && recordHasSnapshot(rec.typ) {
			rec.seq = binary.LittleEndian.Uint64(payload[8:])
		}
		out = append(out, rec)
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

// matrixMsg is a message of the repair matrix's fixture.
type matrixMsg struct {
	queue, body, id string
	live            bool // present after an undamaged restart
}

// repairMatrix writes a log with every kind of record: queue "gone" with one
// message, later deleted (queue-create, send, queue-delete); queue "r" with
// a config change after its first sends, one message received and deleted
// and one received (queue-create, send, queue-config, state, delete); queue
// "p" with no record but its create and sends. The last record is a send.
// It stops the broker cleanly or like kill -9 after a Sync, and returns the
// directory, the clock, the messages by (queue id, seq), the queue ids by
// name and the records of the log.
func repairMatrix(t *testing.T, clean bool) (string, *FakeClock, map[msgKey]*matrixMsg, map[string]uint64, []walRecord) {
	dir := t.TempDir()
	clk := NewFakeClock(t0)
	b := openDurableTest(t, dir, clk, func(o *Options) { o.WAL.SegmentBytes = 64 << 10 })
	msgs := map[msgKey]*matrixMsg{}
	qids := map[string]uint64{}
	send := func(q *Queue, body string) {
		t.Helper()
		res, err := q.Send([]SendEntry{{Body: []byte(body + "-" + strings.Repeat("z", 90))}}, nil)
		if err != nil || res[0].Err != nil {
			t.Fatal(err, res)
		}
		id := res[0].ID
		msgs[msgKey{q.id, binary.BigEndian.Uint64(id[8:])}] = &matrixMsg{queue: q.name, body: body, id: id.String(), live: true}
	}
	receive := func(q *Queue) (ReceiptHandle, *matrixMsg) {
		t.Helper()
		got, err := q.Receive(context.Background(), ReceiveOptions{Max: 1, HasWait: true}, nil)
		if err != nil || len(got) != 1 {
			t.Fatalf("receive: %v (%d messages)", err, len(got))
		}
		id := got[0].ID
		return got[0].Handle, msgs[msgKey{q.id, binary.BigEndian.Uint64(id[8:])}]
	}
	g := mustQueue(t, b, "gone", DefaultQueueConfig())
	send(g, "g-0")
	r := mustQueue(t, b, "r", DefaultQueueConfig())
	for i := 0; i < 4; i++ {
		send(r, fmt.Sprintf("r-%d", i))
	}
	vis := 45 * time.Second
	if err := b.SetQueueAttributes("r", ConfigPatch{VisibilityTimeout: &vis}); err != nil {
		t.Fatal(err)
	}
	p := mustQueue(t, b, "p", DefaultQueueConfig())
	for i := 0; i < 3; i++ {
		send(p, fmt.Sprintf("p-%d", i))
	}
	if err := b.DeleteQueue("gone"); err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if m.queue == "gone" {
			m.live = false
		}
	}
	h, m := receive(r)
	if _, err := r.Delete([]ReceiptHandle{h}, make([]error, 1)); err != nil {
		t.Fatal(err)
	}
	m.live = false
	receive(r) // stays Inactive
	send(r, "r-4")
	send(r, "r-5")
	qids["gone"], qids["r"], qids["p"] = g.id, r.id, p.id
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
	return dir, clk, msgs, qids, listRecords(t, dir)
}

// brokerContents returns, for every message of every queue of b, its body
// (the fixture's short form) and its queue's name; and each queue's
// visibility timeout.
func brokerContents(t *testing.T, b *Broker) (map[string]string, map[string]time.Duration) {
	t.Helper()
	names, _, err := b.ListQueues("", "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	got, vis := map[string]string{}, map[string]time.Duration{}
	for _, name := range names {
		q, err := b.Queue(name)
		if err != nil {
			t.Fatal(err)
		}
		vis[name] = q.meta().cfg.VisibilityTimeout
		err = dumpQueue(q, func(_ MessageID, body []byte, _ string, _ uint32, _ int64) {
			got[strings.SplitN(string(body), "-z", 2)[0]] = name
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return got, vis
}

// reported reports whether the repair report names message id as lost.
func reported(r *repairReport, id string) bool {
	for _, l := range r.LostMessages {
		if l.MessageID == id {
			return true
		}
	}
	for _, l := range r.LostRecords {
		if l.MessageID == id {
			return true
		}
	}
	return false
}

// TestRepairEveryRecord: a byte flipped inside each record of a small log
// holding every kind of record, in turn, after a clean stop and after
// kill -9. Without --wal-repair start refuses and names the option, unless
// the damage is in the last record (a torn tail, always cut). With it the
// broker starts and holds exactly the messages the rules of repair.go and
// repair_queues.go say, every message it lost is named in the report, and
// every lost queue record of the log tail is reported with its outcome:
//
//   - a send: its message is lost if it was live (both stops);
//   - after a clean stop anything else loses nothing (the index holds it);
//   - after kill -9: a queue-create with a later config record: the queue
//     as that record says; one without: the queue recreated as
//     "recovered-queue-<id>" with every message, and kept by a restart; a
//     queue-config: the earlier config; a queue-delete: the queue and its
//     message kept and named; a delete: the message back (at least once);
//     a state: nothing visible.
func TestRepairEveryRecord(t *testing.T) {
	for _, clean := range []bool{true, false} {
		t.Run(map[bool]string{true: "clean-stop", false: "kill-9"}[clean], func(t *testing.T) {
			src, clk, msgs, qids, recs := repairMatrix(t, clean)
			seen := map[uint8]int{}
			for k, rec := range recs {
				seen[rec.typ]++
				dir := t.TempDir()
				copyDir(t, src, dir)
				// The record's last payload byte: a body, a queue name,
				// the id of a deleted queue, a snapshot's last byte.
				at := rec.pos + rec.size - 1 - uint64((rec.size-12)%4)
				damageAt(t, dir, at, 1, func(b []byte) { b[0] ^= 0x40 })
				last := k == len(recs)-1
				if _, err := openRepaired(t, dir, clk, false); err == nil && !last {
					t.Fatalf("record %d (type %d): a damaged log opened without --wal-repair", k, rec.typ)
				} else if err != nil && !strings.Contains(err.Error(), "wal-repair") {
					t.Fatalf("record %d: the refusal does not name --wal-repair: %v", k, err)
				}
				checkRepairedRecord(t, dir, clk, clean, k, rec, at, msgs, qids)
			}
			for _, typ := range []uint8{recQueueCreate, recQueueConfig, recQueueDelete, recSend, recState, recDelete} {
				if seen[typ] == 0 {
					t.Fatalf("the log holds no record of type %d: %v", typ, seen)
				}
			}
		})
	}
}

// checkRepairedRecord opens dir, whose record k is damaged, with
// --wal-repair and checks what it holds and reports (TestRepairEveryRecord).
func checkRepairedRecord(t *testing.T, dir string, clk *FakeClock, clean bool, k int, rec walRecord, at uint64,
	msgs map[msgKey]*matrixMsg, qids map[string]uint64) {
	t.Helper()
	o := Options{Dir: dir, Clock: clk, Stripes: 2, Logger: testLogger(t)}
	o.WAL.SegmentBytes = 64 << 10
	o.WAL.Repair = true
	b, err := Open(o)
	if err != nil {
		t.Fatalf("record %d (type %d): open with --wal-repair: %v", k, rec.typ, err)
	}
	got, vis := brokerContents(t, b)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	report := readReport(t, dir)
	if report == nil {
		t.Fatalf("record %d: no repair report", k)
	}
	want := map[string]string{} // body -> queue
	for _, m := range msgs {
		if m.live {
			want[m.body] = m.queue
		}
	}
	wantVis := map[string]time.Duration{"r": 45 * time.Second, "p": 30 * time.Second}
	var wantQueue *reportedQueue // the report's entry for a lost queue record of the tail
	var wantNamed []*matrixMsg   // messages whose (lost) record the report must name
	m := msgs[msgKey{rec.qid, rec.seq}]
	byName := func(id uint64) string {
		for n, q := range qids {
			if q == id {
				return n
			}
		}
		return ""
	}
	switch {
	case rec.typ == recSend:
		if m.live {
			delete(want, m.body)
		}
		if m.live || !clean {
			wantNamed = append(wantNamed, m)
		}
	case clean:
		if rec.typ == recQueueCreate || rec.typ == recQueueConfig || rec.typ == recQueueDelete {
			// The report gives the id as read from the damaged record.
			readID := rec.qid
			if off := at - rec.pos - 12; off < 8 {
				readID ^= 0x40 << (8 * off)
			}
			wantQueue = &reportedQueue{QueueID: readID, Outcome: outcomeInIndex}
			if n := byName(readID); n == "r" || n == "p" {
				wantQueue.Name = n
			}
		}
	case rec.typ == recDelete:
		want[m.body] = m.queue // its delete is lost: the message is back
		wantNamed = append(wantNamed, m)
	case rec.typ == recState:
		wantNamed = append(wantNamed, m)
	case rec.typ == recQueueConfig:
		wantVis["r"] = 30 * time.Second
		wantQueue = &reportedQueue{QueueID: rec.qid, Name: "r", Outcome: outcomePrevConfig}
	case rec.typ == recQueueDelete:
		for _, m := range msgs {
			if m.queue == "gone" {
				want[m.body] = "gone"
			}
		}
		wantVis["gone"] = 30 * time.Second
		wantQueue = &reportedQueue{QueueID: rec.qid, Name: "gone", Outcome: outcomeKeptLive}
	case rec.typ == recQueueCreate && byName(rec.qid) == "r":
		wantQueue = &reportedQueue{QueueID: rec.qid, Name: "r", Outcome: outcomeFromConfig}
	case rec.typ == recQueueCreate && byName(rec.qid) == "p":
		name := fmt.Sprintf("recovered-queue-%d", rec.qid)
		for body, q := range want {
			if q == "p" {
				want[body] = name
			}
		}
		delete(wantVis, "p")
		wantVis[name] = DefaultQueueConfig().VisibilityTimeout
		wantQueue = &reportedQueue{QueueID: rec.qid, Name: name, Outcome: outcomeRecreated}
	case rec.typ == recQueueCreate: // "gone": its delete survives
		wantQueue = &reportedQueue{QueueID: rec.qid, Outcome: outcomeGone}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("record %d (type %d): holds %v, want %v", k, rec.typ, got, want)
	}
	if fmt.Sprint(vis) != fmt.Sprint(wantVis) {
		t.Fatalf("record %d (type %d): queues and visibility timeouts %v, want %v", k, rec.typ, vis, wantVis)
	}
	// Every message lost is reported, and so is the damaged record.
	for _, m := range msgs {
		if _, ok := got[m.body]; m.live && !ok && !reported(report, m.id) {
			t.Fatalf("record %d: message %s (%s) lost and not reported: %+v", k, m.body, m.id, report)
		}
	}
	for _, m := range wantNamed {
		if !reported(report, m.id) {
			t.Fatalf("record %d (type %d): the report does not name message %s (%s): %+v", k, rec.typ, m.body, m.id, report)
		}
	}
	if wantQueue == nil {
		if len(report.Queues) != 0 {
			t.Fatalf("record %d (type %d): queues reported: %+v", k, rec.typ, report.Queues)
		}
		return
	}
	if len(report.Queues) != 1 {
		t.Fatalf("record %d (type %d): %d queues reported, want 1: %+v", k, rec.typ, len(report.Queues), report.Queues)
	}
	rq := report.Queues[0]
	if rq.QueueID != wantQueue.QueueID || rq.Name != wantQueue.Name || rq.Outcome != wantQueue.Outcome || rq.Reason == "" {
		t.Fatalf("record %d (type %d): queue reported %+v, want %+v", k, rec.typ, rq, *wantQueue)
	}
	// The queue's messages, by id, when it is loaded and it was not
	// checkpointed.
	var ids []string
	for _, m := range msgs {
		if q, ok := got[m.body]; ok && q == rq.Name && rq.Outcome != outcomeInIndex {
			ids = append(ids, m.id)
		}
	}
	sort.Strings(ids)
	sort.Strings(rq.Messages)
	if fmt.Sprint(ids) != fmt.Sprint(rq.Messages) {
		t.Fatalf("record %d (type %d): the report lists messages %v of queue %q, want %v", k, rec.typ, rq.Messages, rq.Name, ids)
	}
	if rq.Outcome == outcomeRecreated {
		// The name the damaged record still reads is reported, as a
		// hint, unless the damage is in it.
		nameAt := rec.pos + 12 + queueValFixed
		if inName := at >= nameAt && at < nameAt+uint64(len("p")); (rq.NameFound == "p") == inName || rq.Pos != rec.pos {
			t.Fatalf("record %d: the recreated queue's entry reads name %q at %d (damage at %d, name at %d): %+v",
				k, rq.NameFound, rq.Pos, at, nameAt, rq)
		}
		// A restart (no repair, nothing damaged now) keeps the queue.
		b, err := Open(Options{Dir: dir, Clock: clk, Stripes: 2, Logger: testLogger(t), WAL: o.WAL})
		if err != nil {
			t.Fatal(err)
		}
		again, _ := brokerContents(t, b)
		b.Close()
		if fmt.Sprint(again) != fmt.Sprint(want) {
			t.Fatalf("record %d: after a restart the broker holds %v, want %v", k, again, want)
		}
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
// A torn tail (zeroed bytes) also starts without --wal-repair; a file cut
// short inside a record whose header it keeps does not (no crash shortens
// a preallocated segment: wal recovery.go), so its acknowledged records
// past the cut are not dropped without the operator's word.
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
		// The record the cut falls in keeps its whole header (12 bytes).
		headerKept := false
		for _, r := range recs[len(recs)-2:] {
			headerKept = headerKept || cut >= r.pos+12 && cut < r.pos+r.size
		}
		_, err := openRepaired(t, dir, clk, false)
		switch {
		case how == "truncate" && headerKept:
			if err == nil || !strings.Contains(err.Error(), "cut short") {
				t.Fatalf("cut at %d: a file cut short inside a record opened without --wal-repair: %v", cut, err)
			}
		case err != nil && !(clean && boundary):
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
			for _, body := range bodies {
				if clean && !got[body] && !reportNames(r, body[:5], bodies) {
					t.Fatalf("cut at %d after a clean stop: lost message %s is not named: %+v", cut, body[:5], r)
				}
			}
		}
	}
}

// TestRepairSettleQueuesEdges: the cases of repair_queues.go the matrix
// does not reach. Messages of a queue id at or below the index's high-water
// mark (a deleted queue's racing send) recreate nothing; a damaged queue id
// near no loaded queue, or near several, is reported as such; in a
// replicated log the messages of a queue whose create was lost are reported
// lost instead of recreating it.
func TestRepairSettleQueuesEdges(t *testing.T) {
	send := func(f *fold, pos, qid, seq uint64) {
		t.Helper()
		p := make([]byte, snapLen+16+4)
		binary.LittleEndian.PutUint64(p[0:], qid)
		binary.LittleEndian.PutUint64(p[8:], seq)
		p[49] = MinPriority
		if err := f.apply(pos, uint32(len(p)+12), recSend, p); err != nil {
			t.Fatal(err)
		}
	}
	damaged := func() *repairState {
		return &repairState{skipped: true, changed: true}
	}
	b := &Broker{opts: Options{Stripes: 4}}

	// A deleted queue's send after the checkpoint: id 3 <= high-water mark 5.
	f := newFold(^uint64(0))
	send(f, 100, 3, 7)
	rs := damaged()
	d := &durableStore{b: b}
	vals := map[uint64]queueVal{1: {id: 1, name: "a"}}
	create, maxID := d.settleQueues(rs, f, vals, 0, 5, 0)
	if len(create) != 0 || len(rs.report.Queues) != 0 || len(vals) != 1 || maxID != 3 {
		t.Fatalf("a deleted queue's message: created %+v, reported %+v, vals %v, max id %d", create, rs.report.Queues, vals, maxID)
	}

	// Above the mark: recreated, with enough stripes.
	f = newFold(^uint64(0))
	send(f, 100, 6, 7)
	rs = damaged()
	vals = map[uint64]queueVal{1: {id: 1, name: "recovered-queue-6"}}
	create, _ = d.settleQueues(rs, f, vals, 0, 5, 0)
	if len(create) != 1 || create[0].name != "recovered-queue-6-2" || create[0].stripes != 4 || vals[6].name != "recovered-queue-6-2" {
		t.Fatalf("recreated %+v (the placeholder name is taken by queue 1)", create)
	}

	// Replicated: reported lost, not recreated.
	rs = damaged()
	vals = map[uint64]queueVal{}
	dr := &durableStore{b: b, repl: &replStore{}}
	create, _ = dr.settleQueues(rs, f, vals, 0, 5, 0)
	if len(create) != 0 || len(vals) != 0 || len(rs.report.LostMessages) != 1 ||
		rs.report.LostMessages[0].MessageID != makeMessageID(6, 7).String() || rs.report.LostMessages[0].QueueID != 6 ||
		len(rs.report.Queues) != 1 || rs.report.Queues[0].Outcome != outcomeMessageLost {
		t.Fatalf("replicated: created %+v, vals %v, report %+v", create, vals, rs.report)
	}

	// A lost delete whose id is damaged: one queue one byte apart, none,
	// several.
	for _, c := range []struct {
		id      uint64
		outcome string
		name    string
	}{
		{1 | 0x40<<56, outcomeKeptLive, "a"},
		{0x4242 << 40, outcomeIDDamaged, ""}, // none
		{3, outcomeIDDamaged, ""},            // 1 and 2 both one byte apart
	} {
		rs = damaged()
		rs.report.LostRecords = []reportedRecord{{Pos: 10, Type: recordTypeName(recQueueDelete), QueueID: c.id}}
		vals = map[uint64]queueVal{1: {id: 1, name: "a"}, 2: {id: 2, name: "b"}}
		d.settleQueues(rs, newFold(^uint64(0)), vals, 0, 2, 0)
		if len(rs.report.Queues) != 1 || rs.report.Queues[0].Outcome != c.outcome || rs.report.Queues[0].Name != c.name {
			t.Fatalf("lost delete of damaged id %#x: %+v, want outcome %s name %q", c.id, rs.report.Queues, c.outcome, c.name)
		}
	}
}
