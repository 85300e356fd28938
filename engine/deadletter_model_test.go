package engine

// Model-based randomized test of dead-letter policies: a plain reference
// model and the engine are driven by the same seeded random sequence of
// sends, receives (with deletes of some of what they got), policy changes
// (set, cleared, chained, aimed at a queue deleted later or never
// created), queue deletes and re-creates, clock jumps past visibility
// timeouts and retention, and in durable mode restarts, crashes and power
// losses (modelRun.restart). One stripe, so the order is exact.
//
// What must hold (deadletter.go):
//  1. A receive from a queue whose policy's target exists moves every
//     message received MaxReceiveCount times that comes before the last
//     message it returns (or every one, when it returns none) to the
//     target, and returns the others in order, as if the moved ones were
//     not there.
//  2. A moved message is Active in the target at once with the source's
//     body, priority, EnqueueTime and expiry, and DequeueCount 0; it is
//     in exactly one of the two queues, whatever crashes.
//  3. A policy whose target is missing is inert: messages are received
//     as if there were none.
// Messages are known by their bodies (unique): a moved message's id is
// the engine's to choose.

import (
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

type dlQueue struct {
	cfg  QueueConfig
	msgs map[string]*mMsg // by body
}

type dlModelRun struct {
	*modelRun
	queues map[string]*dlQueue
	seq    int64
	tie    map[string]int // by body: moved by one receive out of equivalent messages (eq)
}

var dlNames = []string{"a", "b", "c"}

func (r *dlModelRun) pickName() string { return dlNames[r.rnd.IntN(len(dlNames))] }

// policy returns a random dead-letter policy for queue name: none, or a
// target among the names (existing or not; itself now and then).
func (r *dlModelRun) policy(name string) (string, int) {
	if r.rnd.IntN(4) == 0 {
		return "", 0
	}
	t := r.pickName()
	if t == name && r.rnd.IntN(4) > 0 {
		return "", 0
	}
	return t, 1 + r.rnd.IntN(3)
}

// policyError is the model's answer to a policy for queue name whose
// target was old: a target is checked only when it changes (a policy
// whose target was deleted stays, inert, whatever else is set).
func (r *dlModelRun) policyError(name, old, target string) error {
	if target != "" && target != old && (target == name || r.queues[target] == nil) {
		return ErrInvalidArgument
	}
	return nil
}

func (r *dlModelRun) createQueue() {
	name := r.pickName()
	if r.queues[name] != nil {
		return
	}
	cfg := DefaultQueueConfig()
	cfg.VisibilityTimeout = time.Duration(1+r.rnd.IntN(30)) * time.Second
	cfg.Retention = time.Duration(10+r.rnd.IntN(50)) * time.Minute
	cfg.DeadLetterQueue, cfg.MaxReceiveCount = r.policy(name)
	want := r.policyError(name, "", cfg.DeadLetterQueue)
	_, err := r.b.CreateQueue(name, cfg)
	r.logf("create %s policy %s/%d -> %v", name, cfg.DeadLetterQueue, cfg.MaxReceiveCount, err)
	if want != nil {
		if !errors.Is(err, want) {
			r.fail("create %s with policy %s: %v, want %v", name, cfg.DeadLetterQueue, err, want)
		}
		return
	}
	if err != nil {
		r.fail("create %s: %v", name, err)
	}
	r.queues[name] = &dlQueue{cfg: cfg, msgs: map[string]*mMsg{}}
}

func (r *dlModelRun) setPolicy() {
	name := r.pickName()
	mq := r.queues[name]
	if mq == nil {
		return
	}
	cfg := mq.cfg
	cfg.DeadLetterQueue, cfg.MaxReceiveCount = r.policy(name)
	err := r.b.SetQueueAttributes(name, ConfigPatch{DeadLetterQueue: &cfg.DeadLetterQueue, MaxReceiveCount: &cfg.MaxReceiveCount})
	r.logf("set %s policy %s/%d -> %v", name, cfg.DeadLetterQueue, cfg.MaxReceiveCount, err)
	if want := r.policyError(name, mq.cfg.DeadLetterQueue, cfg.DeadLetterQueue); want != nil {
		if !errors.Is(err, want) {
			r.fail("set %s policy %s: %v, want %v", name, cfg.DeadLetterQueue, err, want)
		}
		return
	}
	if err != nil {
		r.fail("set %s policy: %v", name, err)
	}
	mq.cfg = cfg
}

func (r *dlModelRun) deleteQueue() {
	name := r.pickName()
	err := r.b.DeleteQueue(name)
	r.logf("delete %s -> %v", name, err)
	if r.queues[name] == nil {
		if !errors.Is(err, ErrQueueNotExist) {
			r.fail("delete missing %s: %v", name, err)
		}
		return
	}
	if err != nil {
		r.fail("delete %s: %v", name, err)
	}
	delete(r.queues, name)
}

func (r *dlModelRun) queue(name string) (*Queue, *dlQueue) {
	mq := r.queues[name]
	q, err := r.b.Queue(name)
	if (mq == nil) != errors.Is(err, ErrQueueNotExist) || mq != nil && err != nil {
		r.fail("Queue(%s): %v, model has it: %v", name, err, mq != nil)
	}
	return q, mq
}

func (r *dlModelRun) send() {
	q, mq := r.queue(r.pickName())
	if mq == nil {
		return
	}
	n := 1 + r.rnd.IntN(MaxBatch)
	entries := make([]SendEntry, n)
	for i := range entries {
		r.seq++
		entries[i] = SendEntry{Body: fmt.Appendf(nil, "m%d", r.seq), Priority: 1 + r.rnd.IntN(3)}
	}
	res, err := q.Send(entries, nil)
	r.logf("send %d to %s (%s..%s) -> %v", n, q.name, entries[0].Body, entries[n-1].Body, err)
	if err != nil || len(res) != n {
		r.fail("send: %v", err)
	}
	exp := r.m.now + mq.cfg.Retention.Milliseconds()
	for i, e := range entries {
		r.seq++
		mq.msgs[string(e.Body)] = &mMsg{id: res[i].ID, body: e.Body, md5: md5.Sum(e.Body), prio: e.Priority, enq: r.m.now, expAt: exp,
			state: Active, actAt: r.m.now, actKind: 1, actSeq: r.seq, sendSeq: r.seq}
	}
}

// active returns mq's Active messages in the model's order.
func (mq *dlQueue) active() []*mMsg {
	var out []*mMsg
	for _, g := range mq.msgs {
		if g.state == Active {
			out = append(out, g)
		}
	}
	slices.SortFunc(out, func(a, b *mMsg) int {
		switch {
		case mLess(a, b):
			return -1
		case mLess(b, a):
			return 1
		}
		return 0
	})
	return out
}

// eq reports whether the engine may hand out a and b in either order:
// made Active by timers in the same millisecond (mEquiv), or moved by one
// receive out of such a group (the engine walked it in its own order, so
// their order in the target, and after a restart, is the engine's) and
// Active since the move or the restart.
func (r *dlModelRun) eq(a, b *mMsg) bool {
	if mEquiv(a, b) {
		return true
	}
	t := r.tie[string(a.body)]
	return t != 0 && t == r.tie[string(b.body)] && a.actKind == 1 && b.actKind == 1 && a.actAt == b.actAt
}

// plan predicts a receive of up to max from mq: the messages it returns
// and those it moves, in the model's order. The engine walks the Active
// messages in order and hides those due for a move, MaxBatch at a time: a
// round ends at the next one due once it holds MaxBatch, and the receive
// then returns what the round took, or, having taken nothing, moves them
// and walks on. ok is false when the outcome would depend on the engine's
// order inside a group of equivalent messages (eq): the walk would stop
// inside a group that holds one due for a move (which the engine may walk
// before the stop or not) or at a due one with others equivalent to it.
// The caller picks another max.
func (r *dlModelRun) plan(act []*mMsg, live bool, maxRecv, max int) (want, moved []*mMsg, ok bool) {
	due := func(g *mMsg) bool { return live && g.deq >= maxRecv }
	// cut: the walk took max before act[i]; ok unless the group of the
	// last one it returned holds one due.
	cut := func(i int) bool {
		last := i - 1
		for last >= 0 && due(act[last]) {
			last-- // the last one returned
		}
		for j := last; j >= 0 && r.eq(act[j], act[last]); j-- {
			if due(act[j]) {
				return false
			}
		}
		for j := last + 1; j < len(act) && r.eq(act[last], act[j]); j++ {
			if due(act[j]) {
				return false
			}
		}
		return true
	}
	round := 0 // moves hidden in this round
	for i, g := range act {
		if len(want) == max {
			return want, moved, cut(i)
		}
		if due(g) {
			if round == MaxBatch {
				if len(want) > 0 {
					alone := (i == 0 || !r.eq(act[i-1], g)) && (i+1 == len(act) || !r.eq(g, act[i+1]))
					return want, moved, alone
				}
				round = 0
			}
			moved = append(moved, g)
			round++
			continue
		}
		want = append(want, g)
	}
	return want, moved, len(want) < max || cut(len(act))
}

// receive receives up to max from a queue, checks the result against the
// model's prediction (invariants 1-3), and deletes some of what it got.
func (r *dlModelRun) receive() {
	q, mq := r.queue(r.pickName())
	if mq == nil {
		return
	}
	var target *dlQueue
	if t := mq.cfg.DeadLetterQueue; t != "" && t != q.name {
		target = r.queues[t]
	}
	act := mq.active()
	var want, moved []*mMsg
	max, ok := 0, false
	for _, m := range r.rnd.Perm(MaxBatch) {
		if want, moved, ok = r.plan(act, target != nil, mq.cfg.MaxReceiveCount, m+1); ok {
			max = m + 1
			break
		}
	}
	if !ok {
		r.logf("no receive from %s: every batch size ends inside a group of equivalent messages", q.name)
		return
	}
	msgs, err := q.Receive(context.Background(), ReceiveOptions{Max: max, HasWait: true}, nil)
	r.logf("receive %d from %s -> %d %v", max, q.name, len(msgs), err)
	if len(want) == 0 {
		if !errors.Is(err, ErrMessageNotExist) {
			r.fail("receive from %s: %d messages, %v; the model has none to return", q.name, len(msgs), err)
		}
	} else if err != nil || len(msgs) != len(want) {
		r.fail("receive from %s: %d messages, %v; the model returns %d", q.name, len(msgs), err, len(want))
	}
	for i, w := range want {
		m := &msgs[i]
		if g := mq.msgs[string(m.Body)]; g == nil || g != w && !r.eq(g, w) {
			var got, exp []string
			for j := range msgs {
				got = append(got, fmt.Sprintf("%s/%d", msgs[j].Body, msgs[j].Priority))
			}
			for _, w := range want {
				exp = append(exp, fmt.Sprintf("%s/%d(at %d kind %d seq %d deq %d)", w.body, w.prio, w.actAt, w.actKind, w.actSeq, w.deq))
			}
			r.fail("receive from %s: position %d is %q, the model's is %q\n got %v\nwant %v", q.name, i, m.Body, w.body, got, exp)
		}
	}
	vis := mq.cfg.VisibilityTimeout.Milliseconds()
	for i := range want {
		m := &msgs[i]
		g := mq.msgs[string(m.Body)]
		g.deq++
		if g.first == 0 {
			g.first = r.m.now
		}
		g.state, g.visAt = Inactive, r.m.now+vis
		r.checkFields("receive from "+q.name, m, g)
	}
	// Moved out of a group of equivalent messages, they enter the target
	// in the engine's order, which may be any: they are tied there (the
	// groups as they were before the move).
	ties := make([]int, len(moved))
	for i := range moved {
		switch {
		case i > 0 && r.eq(moved[i-1], moved[i]):
			ties[i] = ties[i-1]
		case i+1 < len(moved) && r.eq(moved[i], moved[i+1]):
			ties[i] = int(r.seq) + 1 + i
		}
	}
	for i, g := range moved {
		delete(mq.msgs, string(g.body))
		r.seq++
		delete(r.tie, string(g.body))
		target.msgs[string(g.body)] = &mMsg{body: g.body, md5: g.md5, prio: g.prio, enq: g.enq, expAt: g.expAt,
			state: Active, actAt: r.m.now, actKind: 1, actSeq: r.seq, sendSeq: r.seq}
		if ties[i] != 0 {
			r.tie[string(g.body)] = ties[i]
		}
		r.logf("  moved %s (priority %d) to %s", g.body, g.prio, mq.cfg.DeadLetterQueue)
	}
	// Delete some of what came, the rest comes back after its timeout.
	var hs []ReceiptHandle
	for _, m := range msgs {
		if r.rnd.IntN(3) > 0 {
			hs = append(hs, m.Handle)
			delete(mq.msgs, string(m.Body))
		}
	}
	if len(hs) > 0 {
		errs := make([]error, len(hs))
		if failed, err := q.Delete(hs, errs); err != nil || failed > 0 {
			r.fail("delete %d from %s: %v %v", len(hs), q.name, err, errs)
		}
	}
}

// advance moves the clock: messages expire, and those whose visibility
// timeout ends become Active (by a timer).
func (r *dlModelRun) advance() {
	d := 1 + r.rnd.Int64N(45_000)
	if r.rnd.IntN(10) == 0 {
		d = 1 + r.rnd.Int64N(int64(20*time.Minute/time.Millisecond))
	}
	r.logf("advance %d", d)
	r.clk.Advance(time.Duration(d) * time.Millisecond)
	r.m.now += d
	for _, mq := range r.queues {
		for k, g := range mq.msgs {
			switch {
			case g.expAt <= r.m.now:
				delete(mq.msgs, k)
			case g.state == Inactive && g.visAt <= r.m.now:
				g.state, g.actAt, g.actKind = Active, g.visAt, 0
			}
		}
	}
}

// counts compares every queue's Active and Inactive counts.
func (r *dlModelRun) counts() {
	for _, name := range dlNames {
		q, mq := r.queue(name)
		if mq == nil {
			continue
		}
		info, err := q.Attributes()
		var a, i int64
		for _, g := range mq.msgs {
			if g.state == Active {
				a++
			} else {
				i++
			}
		}
		if err != nil || info.Active != a || info.Inactive != i || info.Delayed != 0 {
			r.fail("attributes of %s: %+v %v, want %d active, %d inactive", name, info, err, a, i)
		}
	}
}

func (r *dlModelRun) step() {
	switch k := r.rnd.IntN(100); {
	case k < 5:
		r.createQueue()
	case k < 10:
		r.setPolicy()
	case k < 12:
		r.deleteQueue()
	case k < 35:
		r.send()
	case k < 70:
		r.receive()
	case k < 92:
		r.advance()
	case k < 97:
		r.counts()
	default:
		if r.dir != "" {
			r.counts()
			r.restart()
			// Active messages come back in the order of their sends (or
			// moves) into their queue.
			for _, mq := range r.queues {
				for _, g := range mq.msgs {
					if g.state == Active {
						g.actAt, g.actKind, g.actSeq = r.m.now, 1, g.sendSeq
					}
				}
			}
			r.counts()
		}
	}
}

func runDeadLetterModel(t *testing.T, seed uint64, ops int, dir string) {
	r := &dlModelRun{modelRun: newModelRun(t, seed, 1, dir), queues: map[string]*dlQueue{}, tie: map[string]int{}}
	for range ops {
		r.step()
	}
	r.counts()
}

// TestDeadLetterModel runs the dead-letter model in memory and durably
// (with restarts, crashes and power losses).
func TestDeadLetterModel(t *testing.T) {
	seeds, ops := modelRuns(t, modelSize{[]uint64{1, 2, 3}, 6_000}, modelSize{[]uint64{1, 2}, 3_000},
		modelSize{[]uint64{11, 12, 13, 14, 15, 16}, 60_000})
	for _, seed := range seeds {
		for _, durable := range []bool{false, true} {
			t.Run(fmt.Sprintf("seed=%d/durable=%v", seed, durable), func(t *testing.T) {
				t.Parallel()
				dir := ""
				if durable {
					dir = t.TempDir()
				}
				runDeadLetterModel(t, seed, ops, dir)
			})
		}
	}
}
