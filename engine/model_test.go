package engine

// Model-based randomized test.
//
// A plain reference model (maps and slices, no wheel, no lanes, no log) and
// the engine are driven by the same seeded random sequence of every
// operation — send, receive, peek, delete, change visibility, attributes,
// set attributes, purge, delete and re-create a queue — plus clock jumps, including
// jumps to just before, at and after visibility, delay and retention ends.
// Every observable result must match after every step. On a mismatch the
// test prints the seed and the operation log.
//
// Ordering: with one stripe the engine must return messages exactly in the
// model's order (priority, then the time the message became Active, sends in
// send order); messages that became Active through timers in the same
// millisecond may come in any order among themselves. With several stripes
// only the priorities are checked: the engine must return the best
// priorities available (DESIGN.md: no FIFO promise across stripes).

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smqd/smqd/index"
	"github.com/smqd/smqd/wal"
)

type mMsg struct {
	id      MessageID
	body    []byte
	md5     [16]byte
	prio    int
	enq     int64
	visAt   int64 // delay end (Delayed) or visibility end (Inactive)
	expAt   int64
	first   int64 // first receive time; 0 before it
	deq     int
	state   MessageState
	actAt   int64 // when it last became Active
	actKind int   // 0: by a timer, 1: by a send
	actSeq  int64 // send order, for sends in the same millisecond
	sendSeq int64 // send order, forever
	handle  ReceiptHandle
}

type mQueue struct {
	name     string
	inc      int // incarnation: bumps on delete + re-create
	cfg      QueueConfig
	createMs int64
	modifyMs int64
	msgs     map[MessageID]*mMsg
	dead     []mHandle // handles that must now fail with MessageNotExist
}

type mHandle struct {
	h   ReceiptHandle
	inc int
}

type model struct {
	now     int64
	sendSeq int64
	queues  map[string]*mQueue // existing queues
	oldInc  map[string]int     // last incarnation of each name ever created
	forged  []mHandle          // handles of deleted incarnations: ReceiptHandleError
}

func (m *model) advance(to int64) {
	m.now = to
	for _, q := range m.queues {
		for id, g := range q.msgs {
			if g.expAt <= to {
				q.addDead(g.handle, q.inc) // a receive's or a delayed send's
				delete(q.msgs, id)
				continue
			}
			if (g.state == Delayed || g.state == Inactive) && g.visAt <= to {
				q.addDead(g.handle, q.inc)
				g.handle = ReceiptHandle{}
				g.state = Active
				g.actAt, g.actKind = g.visAt, 0
			}
		}
	}
}

func (q *mQueue) addDead(h ReceiptHandle, inc int) {
	if h.IsZero() {
		return
	}
	q.dead = append(q.dead, mHandle{h, inc})
	if len(q.dead) > 64 {
		q.dead = q.dead[1:]
	}
}

// active returns the queue's Active messages in the model's order.
func (q *mQueue) active() []*mMsg {
	var out []*mMsg
	for _, g := range q.msgs {
		if g.state == Active {
			out = append(out, g)
		}
	}
	sort.Slice(out, func(i, j int) bool { return mLess(out[i], out[j]) })
	return out
}

func mLess(a, b *mMsg) bool {
	if a.prio != b.prio {
		return a.prio < b.prio
	}
	if a.actAt != b.actAt {
		return a.actAt < b.actAt
	}
	if a.actKind != b.actKind {
		return a.actKind < b.actKind
	}
	if a.actKind == 1 {
		return a.actSeq < b.actSeq
	}
	return string(a.id[:]) < string(b.id[:])
}

// mEquiv reports whether the engine may return a and b in either order.
func mEquiv(a, b *mMsg) bool {
	return a.prio == b.prio && a.actAt == b.actAt && a.actKind == 0 && b.actKind == 0
}

func (q *mQueue) counts() (a, i, d int64) {
	for _, g := range q.msgs {
		switch g.state {
		case Active:
			a++
		case Inactive:
			i++
		case Delayed:
			d++
		}
	}
	return
}

// modelRun drives engine and model with one seed.
type modelRun struct {
	t       testing.TB
	seed    uint64
	rnd     *rand.Rand
	b       *Broker
	clk     *FakeClock
	m       *model
	stripes int
	dir     string // durable mode: the data directory ("" in memory)
	log     []string
	names   []string
	buf     []Message
	res     []SendResult

	// Durable mode: the power-loss layer (powerloss_test.go). The log lives
	// on fs; the index is snapshotted at every completed commit.
	fs      *wal.MemFS
	idxLast *idxSnap // the index as of its last completed commit
	lost    *idxSnap // set when a commit lost power (its images: fs.CrashClone, lost)
	lostFS  *wal.MemFS
	midCP   bool // the next commit loses power after its data part
}

func (r *modelRun) logf(format string, args ...any) {
	r.log = append(r.log, fmt.Sprintf("%6d @%d ", len(r.log), r.m.now-t0.UnixMilli())+fmt.Sprintf(format, args...))
}

func (r *modelRun) fail(format string, args ...any) {
	r.t.Helper()
	start := 0
	if len(r.log) > 300 {
		start = len(r.log) - 300
	}
	r.t.Fatalf("model mismatch (seed %d, stripes %d, rerun with SMQD_MODEL_SEED=%d): %s\nlast operations:\n%s",
		r.seed, r.stripes, r.seed, fmt.Sprintf(format, args...), strings.Join(r.log[start:], "\n"))
}

func newModelRun(t testing.TB, seed uint64, stripes int, dir string) *modelRun {
	r := &modelRun{
		t: t, seed: seed, rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		clk: NewFakeClock(t0), stripes: stripes, dir: dir,
		m:     &model{now: t0.UnixMilli(), queues: map[string]*mQueue{}, oldInc: map[string]int{}},
		names: []string{"qa", "qb", "qc"},
	}
	if dir != "" {
		r.fs = wal.NewMemFS()
	}
	r.b = r.open()
	t.Cleanup(func() { r.b.Close() })
	return r
}

// open opens the broker under test: in memory, or durable in r.dir with
// its log on r.fs (sync mode none: the model checks logic; the crash and
// power-loss tests check durability).
func (r *modelRun) open() *Broker {
	o := Options{Clock: r.clk, Stripes: r.stripes, MemSegmentBytes: 64 << 10, Dir: r.dir}
	if r.fs != nil {
		o.WAL.FS = r.fs
		o.testCommit = r.commit
	}
	o.WAL.SegmentBytes = 64 << 10
	o.WAL.BufferBytes = 1 << 20
	o.WAL.Sync = wal.SyncNone
	o.CheckpointBytes = 256 << 10
	// Checkpoints run on the fake clock (job.go): one per fake minute at
	// most keeps their fsyncs from dominating the run.
	o.CheckpointInterval = time.Minute
	b, err := Open(o)
	if err != nil {
		r.t.Fatal(err)
	}
	return b
}

// commit is the durable broker's index commit: it snapshots the index
// after each one, and when midCP is set loses power after the data part.
func (r *modelRun) commit(idx *index.Store, b *index.Batch) error {
	if r.lost != nil {
		return idx.Commit(b) // the dead incarnation's last gasps
	}
	if err := idx.Commit(b); err != nil {
		return err
	}
	s, err := snapIndex(idx)
	if err != nil {
		return err
	}
	if r.midCP && r.idxLast != nil {
		r.midCP = false
		s.pos, s.hasPos = r.idxLast.pos, r.idxLast.hasPos
		r.lost, r.lostFS = s, r.fs.CrashClone(nil)
		return errPowerLost
	}
	r.idxLast = s
	return nil
}

// restart closes the broker and opens it again on the same directory, or
// (durable mode, one time in two) loses power after a Sync and opens it on
// what survived: the log as CrashClone leaves it and the index as of its
// last commit, or, one time in three, as a commit in progress left it
// (midCP: the next checkpoint dies after its data part). The state must
// survive exactly; Active messages come back in send order.
func (r *modelRun) restart() {
	switch k := r.rnd.IntN(6); {
	case r.fs == nil || k < 3:
		r.logf("restart")
		if err := r.b.Close(); err != nil {
			r.fail("close: %v", err)
		}
		r.b = r.open()
	case k < 5:
		r.logf("power loss after a sync")
		if err := r.b.Sync(); err != nil {
			r.fail("sync: %v", err)
		}
		r.lost, r.lostFS = r.idxLast, r.fs.CrashClone(r.rnd)
		r.reopenLost()
	default:
		r.logf("power loss inside a checkpoint")
		if err := r.b.Sync(); err != nil {
			r.fail("sync: %v", err)
		}
		r.midCP = true
		if err := durableOf(r.b).checkpoint(); err == nil {
			// Nothing to checkpoint: lose power now instead.
			r.midCP = false
			r.lost, r.lostFS = r.idxLast, r.fs.CrashClone(r.rnd)
		}
		r.reopenLost()
	}
	r.t.Cleanup(func() { r.b.Close() })
	for _, q := range r.m.queues {
		for _, g := range q.msgs {
			if g.state == Active {
				g.actAt, g.actKind, g.actSeq = r.m.now, 1, g.sendSeq
			}
		}
	}
}

func (r *modelRun) randConfig() QueueConfig {
	c := DefaultQueueConfig()
	c.VisibilityTimeout = time.Duration(1+r.rnd.IntN(90)) * time.Second
	c.Retention = time.Duration(60+r.rnd.IntN(600)) * time.Second
	if r.rnd.IntN(3) == 0 {
		c.Delay = time.Duration(r.rnd.IntN(20)) * time.Second
	}
	if r.rnd.IntN(4) == 0 {
		c.MaxMessageBytes = 1024 + r.rnd.IntN(2048)
	}
	return c
}

func (r *modelRun) createQueue(name string) {
	cfg := r.randConfig()
	mq := r.m.queues[name]
	created, err := r.b.CreateQueue(name, cfg)
	r.logf("create %s %+v -> %v %v", name, cfg, created, err)
	switch {
	case mq == nil:
		if err != nil || !created {
			r.fail("create new queue %s: created=%v err=%v", name, created, err)
		}
		inc := r.m.oldInc[name] + 1
		r.m.oldInc[name] = inc
		r.m.queues[name] = &mQueue{name: name, inc: inc, cfg: cfg, createMs: r.m.now, modifyMs: r.m.now, msgs: map[MessageID]*mMsg{}}
	case mq.cfg == cfg:
		if err != nil || created {
			r.fail("create identical %s: created=%v err=%v", name, created, err)
		}
	default:
		if !errors.Is(err, ErrQueueAlreadyExist) {
			r.fail("create different %s: err=%v", name, err)
		}
	}
	// The same attributes again must be "exists, same".
	if mq := r.m.queues[name]; mq != nil {
		if created, err := r.b.CreateQueue(name, mq.cfg); created || err != nil {
			r.fail("re-create %s with its own attributes: %v %v", name, created, err)
		}
	}
}

func (r *modelRun) queue(name string) (*Queue, *mQueue) {
	q, err := r.b.Queue(name)
	mq := r.m.queues[name]
	if mq == nil {
		if !errors.Is(err, ErrQueueNotExist) {
			r.fail("Queue(%s) of missing queue: %v", name, err)
		}
		return nil, nil
	}
	if err != nil {
		r.fail("Queue(%s): %v", name, err)
	}
	return q, mq
}

func (r *modelRun) step() {
	name := r.names[r.rnd.IntN(len(r.names))]
	q, mq := r.queue(name)
	if mq == nil {
		r.createQueue(name)
		return
	}
	switch k := r.rnd.IntN(100); {
	case k < 26:
		r.send(q, mq)
	case k < 40:
		r.receive(q, mq)
	case k < 44:
		r.longPoll(q, mq)
	case k < 50:
		r.peek(q, mq)
	case k < 64:
		r.del(q, mq)
	case k < 71:
		r.changeVis(q, mq)
	case k < 88:
		r.advance(mq)
	case k < 93:
		r.attrs(q, mq)
	case k < 97:
		r.setAttrs(name, mq)
	case k < 97+1 && r.rnd.IntN(2) == 0:
		if r.rnd.IntN(2) == 0 {
			r.deleteQueue(q, name, mq)
		} else {
			r.purge(q, mq)
		}
	case k < 98 && r.dir != "" && r.rnd.IntN(3) == 0:
		r.restart()
	case k < 98:
		removed, moved, err := r.b.compactOnce(0)
		r.logf("compact -> removed %d relocated %d %v", removed, moved, err)
		if err != nil {
			r.fail("compact: %v", err)
		}
	default:
		r.createQueue(name)
	}
}

func (r *modelRun) body(max int) []byte {
	n := 1 + r.rnd.IntN(min(max, 1500))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + r.rnd.IntN(26))
	}
	return b
}

func (r *modelRun) send(q *Queue, mq *mQueue) {
	n := 1 + r.rnd.IntN(MaxBatch)
	if r.rnd.IntN(3) == 0 {
		n = 1
	}
	entries := make([]SendEntry, n)
	total := 0
	for i := range entries {
		e := &entries[i]
		e.Body = r.body(mq.cfg.MaxMessageBytes)
		total += len(e.Body)
		if r.rnd.IntN(3) > 0 {
			e.Priority = 1 + r.rnd.IntN(16)
		}
		if r.rnd.IntN(3) == 0 {
			e.HasDelay = true
			switch r.rnd.IntN(4) {
			case 0:
				e.Delay = 0
			case 1:
				e.Delay = time.Duration(1+r.rnd.IntN(3000)) * time.Millisecond
			case 2:
				e.Delay = time.Duration(1+r.rnd.IntN(120)) * time.Second
			default:
				e.Delay = mq.cfg.Retention + time.Duration(r.rnd.IntN(3)-1)*time.Millisecond
			}
		}
	}
	invalid := ""
	if r.rnd.IntN(25) == 0 {
		e := &entries[r.rnd.IntN(n)]
		switch r.rnd.IntN(4) {
		case 0:
			e.Body = nil
			invalid = "empty body"
		case 1:
			e.Body = bytes.Repeat([]byte("x"), mq.cfg.MaxMessageBytes+1)
			invalid = "big body"
		case 2:
			e.Priority = 17
			invalid = "priority 17"
		case 3:
			e.HasDelay, e.Delay = true, MaxDelay+time.Second
			invalid = "delay"
		}
	} else if total > MaxBatchBodyBytes && n > 1 {
		invalid = "batch bytes"
	}
	res, err := q.Send(entries, r.res[:0])
	r.res = res[:0]
	r.logf("send %d invalid=%q -> %v", n, invalid, err)
	if invalid != "" {
		if !errors.Is(err, ErrInvalidArgument) || len(res) != 0 {
			r.fail("invalid send (%s): err=%v res=%d", invalid, err, len(res))
		}
		return
	}
	if err != nil || len(res) != n {
		r.fail("send: err=%v res=%d", err, len(res))
	}
	for i, e := range entries {
		if _, dup := mq.msgs[res[i].ID]; dup {
			r.fail("send: duplicate id %s", res[i].ID)
		}
		if res[i].MD5 != md5.Sum(e.Body) {
			r.fail("send: md5")
		}
		prio := e.Priority
		if prio == 0 {
			prio = DefaultPriority
		}
		delay := mq.cfg.Delay.Milliseconds()
		if e.HasDelay {
			delay = e.Delay.Milliseconds()
		}
		r.m.sendSeq++
		g := &mMsg{id: res[i].ID, body: e.Body, md5: res[i].MD5, prio: prio, enq: r.m.now,
			expAt: r.m.now + mq.cfg.Retention.Milliseconds(), actSeq: r.m.sendSeq, sendSeq: r.m.sendSeq}
		if delay > 0 {
			g.state, g.visAt = Delayed, r.m.now+delay
			if g.visAt >= g.expAt { // expires before it ever becomes visible
				g.visAt = g.expAt
			}
			// A delayed send's handle (handle.go): delete and change
			// visibility take it until the delay ends.
			if g.handle = res[i].Handle; g.handle.IsZero() {
				r.fail("send: no handle for delayed message %s", g.id)
			}
		} else {
			g.state, g.actAt, g.actKind = Active, r.m.now, 1
			if !res[i].Handle.IsZero() {
				r.fail("send: a handle for message %s, which is not delayed", g.id)
			}
		}
		if g.expAt <= r.m.now {
			continue
		}
		mq.msgs[g.id] = g
		r.logf("  %s prio=%d delay=%d", g.id, prio, delay)
	}
}

// checkChoice verifies that the engine's choice of messages is one the model
// allows, and returns the model messages chosen.
func (r *modelRun) checkChoice(op string, mq *mQueue, got []Message, want int) []*mMsg {
	act := mq.active()
	n := min(want, len(act))
	if len(got) != n {
		r.fail("%s: got %d messages, model has %d active, asked %d", op, len(got), len(act), want)
	}
	chosen := make([]*mMsg, len(got))
	seen := map[MessageID]bool{}
	for i := range got {
		g := mq.msgs[got[i].ID]
		if g == nil || g.state != Active {
			r.fail("%s: message %s is not Active in the model", op, got[i].ID)
		}
		if seen[g.id] {
			r.fail("%s: message %s returned twice", op, g.id)
		}
		seen[g.id] = true
		chosen[i] = g
		if r.stripes == 1 {
			if g != act[i] && !mEquiv(g, act[i]) {
				r.fail("%s: position %d got %s (prio %d act %d/%d), model wants %s (prio %d act %d/%d)", op, i,
					g.id, g.prio, g.actAt, g.actKind, act[i].id, act[i].prio, act[i].actAt, act[i].actKind)
			}
		} else if g.prio != act[i].prio {
			r.fail("%s: position %d got priority %d, best available is %d", op, i, g.prio, act[i].prio)
		}
	}
	return chosen
}

func (r *modelRun) checkFields(op string, m *Message, g *mMsg) {
	first := g.first
	if first == 0 {
		first = g.enq
	}
	if !bytes.Equal(m.Body, g.body) || m.MD5 != g.md5 || m.Priority != g.prio || m.DequeueCount != g.deq ||
		m.EnqueueTime.UnixMilli() != g.enq || m.FirstDequeueTime.UnixMilli() != first {
		r.fail("%s: %s fields: prio %d/%d deq %d/%d enq %d/%d first %d/%d body %v md5 %v", op, g.id,
			m.Priority, g.prio, m.DequeueCount, g.deq, m.EnqueueTime.UnixMilli(), g.enq,
			m.FirstDequeueTime.UnixMilli(), first, bytes.Equal(m.Body, g.body), m.MD5 == g.md5)
	}
}

func (r *modelRun) receive(q *Queue, mq *mQueue) {
	max := 1 + r.rnd.IntN(MaxBatch)
	if r.rnd.IntN(40) == 0 {
		msgs, err := q.Receive(context.Background(), ReceiveOptions{Max: 17, HasWait: true}, nil)
		if !errors.Is(err, ErrInvalidArgument) || len(msgs) != 0 {
			r.fail("receive 17: %v", err)
		}
		return
	}
	msgs, err := q.Receive(context.Background(), ReceiveOptions{Max: max, HasWait: true}, r.buf[:0])
	r.buf = msgs
	r.logf("receive %d -> %d %v", max, len(msgs), err)
	if len(mq.active()) == 0 {
		if !errors.Is(err, ErrMessageNotExist) {
			r.fail("receive on empty: %v", err)
		}
		return
	}
	r.received("receive", mq, msgs, max, err)
}

// received checks a receive that found messages against the model and
// applies it there.
func (r *modelRun) received(op string, mq *mQueue, msgs []Message, max int, err error) {
	if err != nil {
		r.fail("%s: %v", op, err)
	}
	chosen := r.checkChoice(op, mq, msgs, max)
	vis := mq.cfg.VisibilityTimeout.Milliseconds()
	for i, g := range chosen {
		g.deq++
		if g.first == 0 {
			g.first = r.m.now
		}
		g.state = Inactive
		g.visAt = r.m.now + vis
		// If g expires before it becomes visible again, the engine still
		// reports the NextVisibleTime the receive set.
		g.handle = msgs[i].Handle
		r.checkFields(op, &msgs[i], g)
		if msgs[i].NextVisibleTime.UnixMilli() != r.m.now+vis {
			r.fail("%s: NextVisibleTime %d want %d", op, msgs[i].NextVisibleTime.UnixMilli(), r.m.now+vis)
		}
		r.logf("  got %s prio=%d deq=%d", g.id, g.prio, g.deq)
	}
}

func (r *modelRun) peek(q *Queue, mq *mQueue) {
	max := 1 + r.rnd.IntN(MaxBatch)
	msgs, err := q.Peek(max, r.buf[:0])
	r.buf = msgs
	r.logf("peek %d -> %d %v", max, len(msgs), err)
	if len(mq.active()) == 0 {
		if !errors.Is(err, ErrMessageNotExist) {
			r.fail("peek on empty: %v", err)
		}
		return
	}
	if err != nil {
		r.fail("peek: %v", err)
	}
	chosen := r.checkChoice("peek", mq, msgs, max)
	for i, g := range chosen {
		r.checkFields("peek", &msgs[i], g)
		if !msgs[i].Handle.IsZero() {
			r.fail("peek returned a handle")
		}
	}
}

// pickHandle returns a handle to use and what the model expects of it.
func (r *modelRun) pickHandle(mq *mQueue) (ReceiptHandle, *mMsg, error) {
	var live []*mMsg
	for _, g := range mq.msgs {
		if g.state == Inactive || g.state == Delayed && !g.handle.IsZero() {
			live = append(live, g)
		}
	}
	sort.Slice(live, func(i, j int) bool { return string(live[i].id[:]) < string(live[j].id[:]) })
	switch k := r.rnd.IntN(10); {
	case k < 6 && len(live) > 0:
		g := live[r.rnd.IntN(len(live))]
		return g.handle, g, nil
	case k < 8 && len(mq.dead) > 0:
		d := mq.dead[r.rnd.IntN(len(mq.dead))]
		return d.h, nil, ErrMessageNotExist
	case k < 9 && len(live) > 0:
		h := live[r.rnd.IntN(len(live))].handle
		h.check ^= 1 << uint(r.rnd.IntN(32))
		return h, nil, ErrReceiptHandleError
	case len(r.m.forged) > 0:
		return r.m.forged[r.rnd.IntN(len(r.m.forged))].h, nil, ErrReceiptHandleError
	}
	if len(live) > 0 {
		g := live[0]
		return g.handle, g, nil
	}
	return ReceiptHandle{stripe: 0, slot: 1, seq: 1, gen: 1, check: 12345}, nil, ErrReceiptHandleError
}

func (r *modelRun) del(q *Queue, mq *mQueue) {
	n := 1 + r.rnd.IntN(MaxBatch)
	if r.rnd.IntN(2) == 0 {
		n = 1
	}
	hs := make([]ReceiptHandle, n)
	want := make([]error, n)
	gs := make([]*mMsg, n)
	for i := range hs {
		hs[i], gs[i], want[i] = r.pickHandle(mq)
		if r.rnd.IntN(20) == 0 && i > 0 {
			hs[i], gs[i], want[i] = hs[i-1], gs[i-1], want[i-1] // duplicate in one batch
		}
	}
	errs := make([]error, n)
	failed, err := q.Delete(hs, errs)
	r.logf("delete %d -> failed %d %v", n, failed, err)
	if err != nil {
		r.fail("delete: %v", err)
	}
	wantFailed := 0
	for i := range hs {
		w := want[i]
		if w == nil {
			g := gs[i]
			if cur := mq.msgs[g.id]; cur != g || g.state != Inactive && g.state != Delayed || g.handle != hs[i] {
				w = ErrMessageNotExist // used earlier in this batch
			}
		}
		if w != nil {
			wantFailed++
			if !errors.Is(errs[i], w) {
				r.fail("delete entry %d: got %v want %v", i, errs[i], w)
			}
			continue
		}
		if errs[i] != nil {
			r.fail("delete entry %d (%s): got %v want success", i, gs[i].id, errs[i])
		}
		mq.addDead(hs[i], mq.inc)
		delete(mq.msgs, gs[i].id)
		r.logf("  deleted %s", gs[i].id)
	}
	if failed != wantFailed {
		r.fail("delete: failed %d want %d", failed, wantFailed)
	}
}

func (r *modelRun) changeVis(q *Queue, mq *mQueue) {
	h, g, want := r.pickHandle(mq)
	timeout := time.Duration(1+r.rnd.IntN(120)) * time.Second
	if r.rnd.IntN(5) == 0 {
		timeout = time.Duration(1000+r.rnd.IntN(4000)) * time.Millisecond
	}
	if r.rnd.IntN(30) == 0 {
		timeout, want = 0, ErrInvalidArgument
	}
	nh, next, err := q.ChangeVisibility(h, timeout)
	r.logf("changevis %v -> %v", timeout, err)
	if want != nil {
		if !errors.Is(err, want) {
			r.fail("changevis: got %v want %v", err, want)
		}
		return
	}
	if err != nil {
		r.fail("changevis %s: %v", g.id, err)
	}
	mq.addDead(h, mq.inc)
	g.handle = nh
	g.visAt = r.m.now + timeout.Milliseconds()
	if next.UnixMilli() != g.visAt {
		r.fail("changevis: next %d want %d", next.UnixMilli(), g.visAt)
	}
}

func (r *modelRun) advance(mq *mQueue) {
	var d int64
	switch k := r.rnd.IntN(10); {
	case k < 4:
		d = 1 + r.rnd.Int64N(100)
	case k < 6:
		d = 1000 + r.rnd.Int64N(60000)
	case k < 9:
		// Just before, at or after some message's next event.
		var evs []int64
		for _, g := range mq.msgs {
			if g.state != Active {
				evs = append(evs, g.visAt)
			}
			evs = append(evs, g.expAt)
		}
		if len(evs) > 0 {
			sort.Slice(evs, func(i, j int) bool { return evs[i] < evs[j] })
			e := evs[r.rnd.IntN(min(len(evs), 8))]
			d = e - r.m.now + r.rnd.Int64N(3) - 1
		}
	default:
		d = 3600_000 * (1 + r.rnd.Int64N(30))
	}
	if d < 1 {
		d = 1
	}
	r.logf("advance %d", d)
	r.clk.Advance(time.Duration(d) * time.Millisecond)
	r.m.advance(r.m.now + d)
}

func (r *modelRun) attrs(q *Queue, mq *mQueue) {
	info, err := q.Attributes()
	if err != nil {
		r.fail("attributes: %v", err)
	}
	a, i, d := mq.counts()
	r.logf("attrs -> %d/%d/%d", info.Active, info.Inactive, info.Delayed)
	if info.Active != a || info.Inactive != i || info.Delayed != d {
		r.fail("counts: engine %d/%d/%d model %d/%d/%d", info.Active, info.Inactive, info.Delayed, a, i, d)
	}
	if info.Config != mq.cfg || info.CreateTime.Unix() != mq.createMs/1000 || info.LastModifyTime.Unix() != mq.modifyMs/1000 {
		r.fail("attributes: %+v, model %+v create %d modify %d", info, mq.cfg, mq.createMs, mq.modifyMs)
	}
	checkInvariants(r.t, q)
}

func (r *modelRun) setAttrs(name string, mq *mQueue) {
	var p ConfigPatch
	cfg := mq.cfg
	invalid := false
	switch r.rnd.IntN(5) {
	case 0:
		v := time.Duration(1+r.rnd.IntN(90)) * time.Second
		p.VisibilityTimeout, cfg.VisibilityTimeout = &v, v
	case 1:
		v := time.Duration(r.rnd.IntN(10)) * time.Second
		p.Delay, cfg.Delay = &v, v
	case 2:
		v := time.Duration(60+r.rnd.IntN(600)) * time.Second
		p.Retention, cfg.Retention = &v, v
	case 3:
		v := 1024 + r.rnd.IntN(4096)
		p.MaxMessageBytes, cfg.MaxMessageBytes = &v, v
	case 4:
		v := 43201 * time.Second
		p.VisibilityTimeout = &v
		invalid = true
	}
	err := r.b.SetQueueAttributes(name, p)
	r.logf("setattrs invalid=%v -> %v", invalid, err)
	if invalid {
		if !errors.Is(err, ErrInvalidArgument) {
			r.fail("invalid set: %v", err)
		}
		return
	}
	if err != nil {
		r.fail("set: %v", err)
	}
	mq.cfg = cfg
	mq.modifyMs = r.m.now
}

// purge: every message goes, as by deletes; their handles stop working.
func (r *modelRun) purge(q *Queue, mq *mQueue) {
	n, err := q.Purge()
	r.logf("purge -> %d %v", n, err)
	if err != nil || n != len(mq.msgs) {
		r.fail("purge: %d, %v; want %d", n, err, len(mq.msgs))
	}
	for id, g := range mq.msgs {
		if !g.handle.IsZero() {
			mq.addDead(g.handle, mq.inc)
		}
		delete(mq.msgs, id)
	}
}

func (r *modelRun) deleteQueue(q *Queue, name string, mq *mQueue) {
	err := r.b.DeleteQueue(name)
	r.logf("deletequeue %s -> %v", name, err)
	if err != nil {
		r.fail("delete queue: %v", err)
	}
	for _, g := range mq.msgs {
		if !g.handle.IsZero() {
			r.m.forged = append(r.m.forged, mHandle{g.handle, mq.inc})
		}
	}
	delete(r.m.queues, name)
	if _, err := q.Receive(context.Background(), ReceiveOptions{HasWait: true}, nil); !errors.Is(err, ErrQueueNotExist) {
		r.fail("receive on deleted queue: %v", err)
	}
	if err := r.b.DeleteQueue(name); !errors.Is(err, ErrQueueNotExist) {
		r.fail("delete deleted queue: %v", err)
	}
}

func runModel(t *testing.T, seed uint64, stripes, ops int, dir string) {
	r := newModelRun(t, seed, stripes, dir)
	for i := 0; i < ops; i++ {
		r.step()
	}
	for _, name := range r.names {
		if q, mq := r.queue(name); mq != nil {
			r.attrs(q, mq)
		}
	}
}

// modelRuns picks a model test's seeds and operations: def, short under
// -short, long with -tags long; SMQD_MODEL_SEED replays one seed.
func modelRuns(t *testing.T, def, short, long modelSize) ([]uint64, int) {
	r := def
	if testing.Short() {
		r = short
	}
	if modelLong {
		r = long
	}
	return seedsFromEnv(t, r.seeds), r.ops
}

// modelSize is a model test's seeds and operations per seed.
type modelSize struct {
	seeds []uint64
	ops   int
}

// seedsFromEnv returns the one seed SMQD_MODEL_SEED names (to replay a
// failure), else seeds.
func seedsFromEnv(t *testing.T, seeds []uint64) []uint64 {
	s := os.Getenv("SMQD_MODEL_SEED")
	if s == "" {
		return seeds
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return []uint64{v}
}

// TestModel runs several seeds; -short keeps the total at 240,000 operations,
// the long suite (-tags long) runs 5,000,000.
func TestModel(t *testing.T) {
	seeds, ops := []uint64{1, 2, 3, 4, 5, 6}, 40_000
	if modelLong {
		seeds, ops = []uint64{11, 12, 13, 14, 15, 16, 17, 18, 19, 20}, 500_000
	}
	seeds = seedsFromEnv(t, seeds)
	for _, seed := range seeds {
		for _, stripes := range []int{1, 4} {
			t.Run(fmt.Sprintf("seed=%d/stripes=%d", seed, stripes), func(t *testing.T) {
				t.Parallel()
				runModel(t, seed, stripes, ops/2, "")
			})
		}
	}
}

// TestModelDurable runs the model against a durable broker, with clean
// restarts among the operations: everything must survive a restart exactly
// (a receipt handle issued before it included).
func TestModelDurable(t *testing.T) {
	seeds, ops := []uint64{101, 102}, 20_000
	if modelLong {
		seeds, ops = []uint64{111, 112, 113, 114}, 200_000
	}
	seeds = seedsFromEnv(t, seeds)
	for _, seed := range seeds {
		for _, stripes := range []int{1, 4} {
			t.Run(fmt.Sprintf("seed=%d/stripes=%d", seed, stripes), func(t *testing.T) {
				runModel(t, seed, stripes, ops/2, t.TempDir())
			})
		}
	}
}

// reopenLost abandons the broker after a power loss and opens the next one
// on the images r.lostFS and r.lost.
func (r *modelRun) reopenLost() {
	r.b.Close() // writes to the abandoned images only
	r.fs = r.lostFS
	dir := filepath.Join(r.dir, "index")
	if err := os.RemoveAll(dir); err != nil {
		r.fail("%v", err)
	}
	if err := r.lost.restore(dir); err != nil {
		r.fail("restore index: %v", err)
	}
	r.idxLast, r.lost, r.lostFS = r.lost, nil, nil
	r.b = r.open()
}

// longPoll receives with a wait above zero. With messages Active it
// returns at once, as a short poll does. Otherwise it sleeps (on the fake
// clock) until, by the model's choice: a send wakes it; the queue's next
// delay or visibility end within the wait makes messages Active (the clock
// is moved exactly there); the wait ends with nothing; or its context is
// cancelled.
func (r *modelRun) longPoll(q *Queue, mq *mQueue) {
	max := 1 + r.rnd.IntN(MaxBatch)
	wait := time.Duration(1+r.rnd.IntN(20_000)) * time.Millisecond
	opt := ReceiveOptions{Max: max, Wait: wait, HasWait: true}
	if len(mq.active()) > 0 {
		msgs, err := q.Receive(context.Background(), opt, nil)
		r.logf("long poll %d %v -> %d %v (messages were Active)", max, wait, len(msgs), err)
		r.received("long poll", mq, msgs, max, err)
		return
	}
	type result struct {
		msgs []Message
		err  error
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan result, 1)
	deadline := r.clk.Now().Add(wait)
	armed := 0
	for _, p := range r.clk.Pending() {
		if p.Equal(deadline) {
			armed++
		}
	}
	go func() {
		msgs, err := q.Receive(ctx, opt, nil)
		done <- result{msgs, err}
	}()
	// Wait until the receive sleeps: its waiter queued, its timer armed.
	for i := 0; ; i++ {
		n := 0
		for _, p := range r.clk.Pending() {
			if p.Equal(deadline) {
				n++
			}
		}
		if n > armed && q.waiters.waiting() == 1 {
			break
		}
		select {
		case res := <-done:
			r.fail("long poll on an empty queue returned at once: %d %v", len(res.msgs), res.err)
		default:
		}
		if i > 10_000_000 {
			r.fail("long poll never went to sleep")
		}
		runtime.Gosched()
	}
	next := int64(-1) // the queue's next delay or visibility end
	for _, g := range mq.msgs {
		if (g.state == Delayed || g.state == Inactive) && g.visAt < g.expAt && (next < 0 || g.visAt < next) {
			next = g.visAt
		}
	}
	waitMs := wait.Milliseconds()
	switch k := r.rnd.IntN(4); {
	case k == 0:
		cancel()
		res := <-done
		r.logf("long poll %d %v cancelled -> %d %v", max, wait, len(res.msgs), res.err)
		if !errors.Is(res.err, context.Canceled) || len(res.msgs) != 0 {
			r.fail("cancelled long poll: %d %v", len(res.msgs), res.err)
		}
	case k == 1:
		// A send wakes it: one message, no delay.
		body := r.body(mq.cfg.MaxMessageBytes)
		prio := 1 + r.rnd.IntN(16)
		res, err := q.Send([]SendEntry{{Body: body, Priority: prio, HasDelay: true}}, nil)
		if err != nil {
			r.fail("send to wake a long poll: %v", err)
		}
		r.m.sendSeq++
		g := &mMsg{id: res[0].ID, body: body, md5: res[0].MD5, prio: prio, enq: r.m.now, state: Active,
			expAt: r.m.now + mq.cfg.Retention.Milliseconds(), actAt: r.m.now, actKind: 1,
			actSeq: r.m.sendSeq, sendSeq: r.m.sendSeq}
		mq.msgs[g.id] = g
		got := <-done
		r.logf("long poll %d %v woken by send of %s -> %d %v", max, wait, g.id, len(got.msgs), got.err)
		r.received("long poll", mq, got.msgs, max, got.err)
	case next >= 0 && next-r.m.now <= waitMs:
		d := next - r.m.now
		r.clk.Advance(time.Duration(d) * time.Millisecond)
		r.m.advance(next)
		got := <-done
		r.logf("long poll %d %v woken after %d ms -> %d %v", max, wait, d, len(got.msgs), got.err)
		r.received("long poll", mq, got.msgs, max, got.err)
	default:
		r.clk.Advance(wait)
		r.m.advance(r.m.now + waitMs)
		got := <-done
		r.logf("long poll %d %v timed out -> %d %v", max, wait, len(got.msgs), got.err)
		if len(mq.active()) > 0 {
			r.received("long poll", mq, got.msgs, max, got.err) // a timer at the deadline
		} else if !errors.Is(got.err, ErrMessageNotExist) || len(got.msgs) != 0 {
			r.fail("long poll timed out: %d %v", len(got.msgs), got.err)
		}
	}
}
