package ctl

// smqctl queue redrive DLQ [--to QUEUE]: the messages of a dead-letter
// queue back to the queues they were dead-lettered from (or all to --to),
// as SQS's dead-letter redrive does. It uses the public API only (receive,
// batch send, batch delete), so it works on a single node and through any
// node of a cluster, and under the caller's access policy.
//
// Invariants:
//  1. Nothing is lost. A message leaves the dead-letter queue (its delete)
//     only after its copy's send was acknowledged with the MD5 of the body
//     that was received. A crash, an interrupt or a lost answer in between
//     leaves it in both queues (at least once), never in neither.
//  2. A copy is the message as its source's consumers first read it: the
//     same body bytes, priority, user properties, and system properties
//     other than the three DLQ ones, which are dropped (a later move to a
//     dead-letter queue sets them again). It is a new message: a new id, a
//     dequeue count of 0, the target queue's delay.
//  3. Bounded: a run handles at most the messages visible in the queue
//     when it starts (and at most --max). Messages dead-lettered again
//     meanwhile wait for the next run.
//  4. Without --to, a message goes back only to a queue whose dead-letter
//     queue is this one (sourceCheck): the DLQ properties are set by
//     whoever sends a message, not only by the broker.
//  5. A message that cannot move (no source queue named, a target missing
//     or refusing it) stays in the dead-letter queue, is made visible again
//     when the run ends, and the run names it with the reason and exits 1.
//     So does a run that stored a copy whose original it could not delete
//     (the delete came after the dead-letter queue's visibility timeout):
//     the original is moved again by the next run, a duplicate.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The dead-letter system properties (topic spec §3.8; engine/deadletter.go).
const (
	sysDLQMessageType = "DLQMessageType"
	sysDLQSourceArn   = "DLQSourceArn"
	sysDLQOriginID    = "DLQOriginMessageId"
)

// redriveLeft is a message a run left in its queue.
type redriveLeft struct {
	MessageID string `json:"message_id"`
	Reason    string `json:"reason"`
	handle    string
}

// redriveResult is what a run (of a redrive, or of one queue's migration)
// did.
type redriveResult struct {
	Moved int            `json:"moved"`
	To    map[string]int `json:"to"`
	// Copied: copies stored whose original the delete missed (its
	// visibility timeout ran out during the run): it is still in the
	// dead-letter queue, and a later run moves it again.
	Copied int `json:"copied_not_deleted"`
	// Resent: copies sent again after a send that got no definite answer
	// (a timeout, a dropped connection, a 503 "may or may not have run"):
	// the destination may have stored the first send too, so they may be
	// twice there.
	Resent int           `json:"resent_unanswered,omitempty"`
	Left   []redriveLeft `json:"left"`
}

func (r *run) queueRedrive(ctx context.Context, name string, args []string) error {
	fs := flag.NewFlagSet("queue redrive DLQ [flags]", flag.ContinueOnError)
	to := fs.String("to", "", "send every message to this queue (default: each to the queue its DLQSourceArn names)")
	maxN := fs.Int("max", 0, "move at most this many messages (0: every message visible at the start)")
	rate := fs.Float64("rate", 0, "at most this many messages a second (0: as fast as the server takes them)")
	parallel := fs.Int("parallel", 4, "batches in flight at once, 1..16")
	pos, err := r.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	dlq := pos[0]
	switch {
	case *to == dlq:
		return usagef("queue redrive: --to names the dead-letter queue itself")
	case *maxN < 0:
		return usagef("queue redrive: --max must not be negative")
	case *rate < 0:
		return usagef("queue redrive: --rate must not be negative")
	case *parallel < 1 || *parallel > 16:
		return usagef("queue redrive: --parallel must be between 1 and 16")
	}
	c, err := r.client()
	if err != nil {
		return err
	}
	rctx, cancel := r.reqCtx(ctx, 0)
	q, err := c.getQueue(rctx, dlq)
	cancel()
	if err != nil {
		return err
	}
	limit := int(q.ActiveMessages)
	if *maxN > 0 {
		limit = min(limit, *maxN)
	}
	to0 := *to
	sources := newSourceCheck(ctx, r, c, dlq)
	res, runErr := moveAll(ctx, r, *parallel, limit, func(n int) *mover {
		mv := newMover(c, c, dlq, *rate/float64(n), func(m *Message) (string, string) {
			q, why := redriveTarget(m, dlq, to0)
			if q != "" && to0 == "" {
				why = sources.check(q)
				if why != "" {
					q = ""
				}
			}
			return q, why
		}, redriveCopy)
		mv.visibility = time.Duration(q.VisibilityTimeout) * time.Second
		return mv
	})
	if err := r.printRedrive(dlq, &res); err != nil {
		return err
	}
	if runErr != nil {
		return runErr
	}
	// Either leaves work for the next run, which a script must see: a
	// message that stays, or an original whose copy is stored and whose
	// delete missed (the next run moves it again, a duplicate).
	switch n := len(res.Left); {
	case n > 0 && res.Copied > 0:
		return fmt.Errorf("%d message(s) left in %s, and %d copied whose original stays there", n, dlq, res.Copied)
	case n > 0:
		return fmt.Errorf("%d message(s) left in %s", n, dlq)
	case res.Copied > 0:
		return fmt.Errorf("%d message(s) copied whose original stays in %s (its delete missed): the next run moves them again", res.Copied, dlq)
	case res.Resent > 0:
		return fmt.Errorf("%d message(s) sent again after a send that got no definite answer: they may be twice at their target", res.Resent)
	}
	return nil
}

// moveAll runs up to n movers made by mk (given how many run) side by side
// on one queue, each on its share of limit, then releases what each left,
// and returns their results together.
func moveAll(ctx context.Context, r *run, n, limit int, mk func(n int) *mover) (redriveResult, error) {
	n = max(1, min(n, (limit+MaxBatchMessages-1)/MaxBatchMessages)) // no more movers than batches
	movers := make([]*mover, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range movers {
		share := limit / n
		if i < limit%n {
			share++
		}
		movers[i] = mk(n)
		wg.Add(1)
		go func(mv *mover, err *error) {
			defer wg.Done()
			*err = mv.run(ctx, r, share)
		}(movers[i], &errs[i])
	}
	wg.Wait()
	// Only now: a message left and released early would be received again
	// by a mover still running, and use up its share.
	for i, mv := range movers {
		if err := mv.release(ctx, r); errs[i] == nil {
			errs[i] = err
		}
	}
	res := redriveResult{To: map[string]int{}}
	seen := map[string]bool{}
	for _, mv := range movers {
		res.Moved += mv.res.Moved
		res.Copied += mv.res.Copied
		res.Resent += mv.res.Resent
		for q, k := range mv.res.To {
			res.To[q] += k
		}
		for _, l := range mv.res.Left {
			if !seen[l.MessageID] { // received again by another mover
				seen[l.MessageID] = true
				res.Left = append(res.Left, l)
			}
		}
	}
	return res, errors.Join(errs...)
}

// callTries is how many times call runs a request that keeps failing for
// a transient reason, waiting 0.25 s, then twice as long each time (7.75 s
// in all): longer than a cluster takes to elect a shard's leader.
const callTries = 6

// call runs f with a request deadline (--timeout), and again after a
// transient failure: 503 (a shard without a leader, a node shutting
// down) or no answer at all. A send retried after its answer was lost
// stores a second copy, as at-least-once allows; the original leaves once.
func call(ctx context.Context, r *run, f func(context.Context) error) error {
	wait := 250 * time.Millisecond
	for try := 1; ; try++ {
		rctx, cancel := r.reqCtx(ctx, 0)
		err := f(rctx)
		cancel()
		var ae *APIError
		if err == nil || try == callTries || ctx.Err() != nil || errors.As(err, &ae) && ae.Status != 503 {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
		wait *= 2
	}
}

// MaxBatchMessages is the most messages one receive, send or delete takes.
const MaxBatchMessages = 16

// mover moves the visible messages of one queue (from, of src) to queues
// of dst, each as target says, as copy makes it: the redrive, and each
// queue of a migration (migrate.go).
type mover struct {
	src, dst *client
	from     string
	target   func(*Message) (queue, why string) // queue "": it stays, for why
	copy     func(Message) Message
	delay    int // the copies' DelaySeconds; < 0: the target queue's
	// visibility: the source queue's VisibilityTimeout, for keep (keep.go)
	visibility time.Duration
	rate       float64
	start      time.Time
	res        redriveResult
	left       map[string]int // message id → index in res.Left
}

func newMover(src, dst *client, from string, rate float64, target func(*Message) (string, string), copy func(Message) Message) *mover {
	return &mover{src: src, dst: dst, from: from, target: target, copy: copy, delay: -1, rate: rate,
		res: redriveResult{To: map[string]int{}}, left: map[string]int{}}
}

// run moves messages until limit were handled or the queue has no more
// visible ones.
//
// With a rate, it waits for the rate's room before it receives, and
// receives about a second's worth at a time: a batch is invisible at the
// source from its receive to its delete, and one held back by the rate
// for longer than the queue's visibility timeout was received again (its
// handles stale): every message copied and none deleted.
func (rd *mover) run(ctx context.Context, r *run, limit int) error {
	rd.start = time.Now()
	batch := MaxBatchMessages
	if rd.rate > 0 {
		batch = max(1, min(MaxBatchMessages, int(rd.rate)))
	}
	for handled := 0; handled < limit; {
		n := min(batch, limit-handled)
		if err := rd.pace(ctx, n); err != nil {
			return err
		}
		var msgs []Message
		received := time.Now() // at most when the source hid them
		err := call(ctx, r, func(rctx context.Context) (err error) {
			received = time.Now()
			msgs, err = rd.src.receive(rctx, rd.from, n, 0)
			return err
		})
		if err != nil {
			return err
		}
		if len(msgs) == 0 {
			return nil
		}
		handled += len(msgs)
		if err := rd.batch(ctx, r, msgs, received); err != nil {
			return err
		}
	}
	return nil
}

// pace waits until n more messages keep the run within its rate.
func (rd *mover) pace(ctx context.Context, n int) error {
	if rd.rate == 0 {
		return nil
	}
	done := rd.res.Moved + rd.res.Copied + len(rd.res.Left)
	due := rd.start.Add(time.Duration(float64(done+n) / rd.rate * float64(time.Second)))
	t := time.NewTimer(time.Until(due))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// batch moves one batch, received at received: a send per target, then
// one delete of the messages whose copies were stored, kept invisible at
// the source meanwhile (keep.go).
func (rd *mover) batch(ctx context.Context, r *run, msgs []Message, received time.Time) error {
	byTarget := map[string][]Message{}
	for _, m := range msgs {
		target, why := rd.target(&m)
		if target == "" {
			rd.leave(m, why)
			continue
		}
		byTarget[target] = append(byTarget[target], rd.copy(m))
	}
	var stored []string         // handles
	into := map[string]string{} // handle → its copy's queue
	k := rd.keep(ctx, r, msgs, received)
	for target, ms := range byTarget {
		res, err := rd.send(ctx, r, target, ms)
		if err != nil {
			k.end()
			// The copies stored for other targets stay, and so do their
			// originals: counted, so that the result says so.
			rd.res.Copied += len(stored)
			return err
		}
		for i, s := range res {
			m := ms[i]
			switch {
			case s.ErrorCode != "":
				rd.leave(m, fmt.Sprintf("%s refused it: %s: %s", target, s.ErrorCode, s.ErrorMessage))
			case !strings.EqualFold(s.MessageBodyMD5, m.MessageBodyMD5):
				// Stored, but not the body received: leave the original
				// (invariant 1); the copy is there to look at.
				rd.leave(m, fmt.Sprintf("%s stored message %s with body MD5 %s, not %s", target, s.MessageID, s.MessageBodyMD5, m.MessageBodyMD5))
			default:
				stored = append(stored, m.ReceiptHandle)
				into[m.ReceiptHandle] = target
			}
		}
	}
	cur := k.end()
	for i := range rd.res.Left { // release (below) needs their latest handles
		if h, ok := cur[rd.res.Left[i].handle]; ok {
			rd.res.Left[i].handle = h
		}
	}
	if len(stored) == 0 {
		return nil
	}
	latest := make([]string, len(stored))
	for i, h := range stored {
		latest[i] = cur[h]
	}
	var failed map[string]*APIError
	err := call(ctx, r, func(rctx context.Context) (err error) {
		failed, err = rd.src.batchDelete(rctx, rd.from, latest)
		return err
	})
	if err != nil {
		// Refused whole (AccessDenied, say) or not answered: the copies
		// are stored and their originals stay, as when each delete missed
		// (a run that ended here reported none of them copied).
		rd.res.Copied += len(stored)
		return err
	}
	for i, h := range stored {
		if failed[latest[i]] != nil {
			rd.res.Copied++
			continue
		}
		rd.res.Moved++
		rd.res.To[into[h]]++
	}
	return nil
}

// send sends ms to target, one by one if the batch is refused whole for
// a bad entry (a body over the target's size limit, say), so that one
// message does not hold back the rest. A missing target refuses each.
func (rd *mover) send(ctx context.Context, r *run, target string, ms []Message) ([]sent, error) {
	var res []sent
	unanswered := false
	err := call(ctx, r, func(rctx context.Context) (err error) {
		res, err = rd.dst.batchSend(rctx, target, ms, rd.delay)
		unanswered = unanswered || uncertain(err)
		return err
	})
	if err == nil && unanswered {
		// An earlier try may have been stored: its answer was lost, not
		// its request (backups2 audit: 48 of 20000 twice, exit 0).
		rd.res.Resent += len(ms)
	}
	var ae *APIError
	if err == nil || !errors.As(err, &ae) {
		return res, err
	}
	if ae.Code == "QueueNotExist" || ae.Code == "InvalidArgument" && len(ms) == 1 {
		res = make([]sent, len(ms))
		for i := range res {
			res[i] = sent{ErrorCode: ae.Code, ErrorMessage: ae.Message}
		}
		return res, nil
	}
	if ae.Code != "InvalidArgument" {
		return nil, err
	}
	res = make([]sent, 0, len(ms))
	for i := range ms {
		one, err := rd.send(ctx, r, target, ms[i:i+1])
		if err != nil {
			return nil, err
		}
		res = append(res, one...)
	}
	return res, nil
}

// uncertain reports whether err leaves open whether the destination did
// what the request asked: no answer at all (not an API error, and not a
// connection the destination refused), or a cluster node's 503 saying the
// request "may or may not have run" (its shard's leader gave it up, or did
// not answer the node that forwarded it).
func uncertain(err error) bool {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status == 503 && strings.Contains(ae.Message, "may or may not have run")
	}
	return err != nil && !errors.Is(err, syscall.ECONNREFUSED)
}

// redriveTarget is the queue m, in dead-letter queue dlq, goes to: to,
// else the queue its DLQSourceArn names; or "" and why it stays.
func redriveTarget(m *Message, dlq, to string) (string, string) {
	if to != "" {
		return to, ""
	}
	arn := m.system(sysDLQSourceArn)
	switch {
	case arn == "":
		return "", "no DLQSourceArn (not dead-lettered here): give --to"
	case m.system(sysDLQMessageType) == "TOPIC":
		return "", fmt.Sprintf("dead-lettered from topic subscription %s: give --to", arn)
	}
	i := strings.LastIndex(arn, ":/queues/")
	if i < 0 || strings.Contains(arn[i+len(":/queues/"):], "/") {
		return "", fmt.Sprintf("DLQSourceArn %q names no queue: give --to", arn)
	}
	if q := arn[i+len(":/queues/"):]; q != "" && q != dlq {
		return q, ""
	}
	return "", fmt.Sprintf("DLQSourceArn %q names this queue: give --to", arn)
}

// sourceCheck tells whether a queue named by a message's DLQSourceArn
// dead-letters into dlq (its DeadLetterTargetQueue), asking once per
// queue. Any client may set DLQSourceArn when it sends (the spec lists it
// among the system properties a sender gives): taken on trust, a key that
// may write only to the dead-letter queue, or to a topic feeding it, chose
// where the operator's redrive wrote (security audit, 2026-12-06).
type sourceCheck struct {
	ctx  context.Context
	r    *run
	c    *client
	dlq  string
	mu   sync.Mutex
	seen map[string]string // guarded by mu: queue → why its messages stay ("" to move)
}

func newSourceCheck(ctx context.Context, r *run, c *client, dlq string) *sourceCheck {
	return &sourceCheck{ctx: ctx, r: r, c: c, dlq: dlq, seen: map[string]string{}}
}

// check returns why a message whose DLQSourceArn names q stays, or "".
func (s *sourceCheck) check(q string) string {
	s.mu.Lock()
	why, ok := s.seen[q]
	s.mu.Unlock()
	if ok {
		return why
	}
	rctx, cancel := s.r.reqCtx(s.ctx, 0)
	a, err := s.c.getQueue(rctx, q)
	cancel()
	var ae *APIError
	switch {
	case errors.As(err, &ae) && ae.Code == "QueueNotExist":
		why = fmt.Sprintf("its DLQSourceArn names queue %s: QueueNotExist: give --to", q)
	case err != nil:
		return fmt.Sprintf("its DLQSourceArn names queue %s, whose dead-letter queue could not be read (%v): give --to, or run again", q, err) // not kept: the next message asks again
	case !sameQueue(a.DeadLetterTargetQueue, s.dlq):
		why = fmt.Sprintf("its DLQSourceArn names queue %s, whose dead-letter queue is not %s (any sender may set the property): give --to", q, s.dlq)
	}
	s.mu.Lock()
	s.seen[q] = why
	s.mu.Unlock()
	return why
}

// sameQueue reports whether a dead-letter target (a queue's name, or an
// ARN ending in /queues/NAME) is queue name.
func sameQueue(target, name string) bool {
	return target == name || strings.HasSuffix(target, ":/queues/"+name)
}

// redriveCopy is m as a redrive sends it again (invariant 2).
func redriveCopy(m Message) Message {
	var sys []Property
	for _, p := range m.SystemProperties {
		switch p.Name {
		case sysDLQMessageType, sysDLQSourceArn, sysDLQOriginID:
		default:
			sys = append(sys, p)
		}
	}
	m.SystemProperties = sys
	return m
}

// leave records that m stays; a message received again later in the run
// (its visibility ran out) keeps one entry, with its latest handle.
func (rd *mover) leave(m Message, why string) {
	if i, ok := rd.left[m.MessageID]; ok {
		rd.res.Left[i].handle, rd.res.Left[i].Reason = m.ReceiptHandle, why
		return
	}
	rd.left[m.MessageID] = len(rd.res.Left)
	rd.res.Left = append(rd.res.Left, redriveLeft{MessageID: m.MessageID, Reason: why, handle: m.ReceiptHandle})
}

// release makes the messages left visible again (1 s, the API's least),
// rather than hidden for the rest of the queue's visibility timeout.
func (rd *mover) release(ctx context.Context, r *run) error {
	ctx = context.WithoutCancel(ctx) // an interrupted run releases too
	var errs []error
	for _, l := range rd.res.Left {
		err := call(ctx, r, func(rctx context.Context) error {
			_, _, err := rd.src.changeVisibility(rctx, rd.from, l.handle, 1)
			return err
		})
		var ae *APIError
		if err != nil && !(errors.As(err, &ae) && ae.Code == "MessageNotExist") {
			errs = append(errs, err) // MessageNotExist: visible again already
		}
	}
	return errors.Join(errs...)
}

func (r *run) printRedrive(dlq string, res *redriveResult) error {
	if r.g.json {
		if res.Left == nil {
			res.Left = []redriveLeft{}
		}
		return r.printJSON(res)
	}
	w := r.env.Stdout
	targets := make([]string, 0, len(res.To))
	for t := range res.To {
		targets = append(targets, t)
	}
	sort.Strings(targets)
	var parts []string
	for _, t := range targets {
		parts = append(parts, fmt.Sprintf("%d to %s", res.To[t], t))
	}
	fmt.Fprintf(w, "moved %d message(s) from %s", res.Moved, dlq)
	if len(parts) > 0 {
		fmt.Fprintf(w, ": %s", strings.Join(parts, ", "))
	}
	fmt.Fprintln(w)
	if res.Resent > 0 {
		fmt.Fprintf(w, "%d message(s) sent again after a send that got no definite answer (a timeout, a dropped connection, a 503 \"may or may not have run\"): the first send may have been stored too, so they may be twice at their target\n", res.Resent)
	}
	if res.Copied > 0 {
		fmt.Fprintf(w, "%d message(s) copied but still in %s (their delete failed, or missed because their receive had expired: the queue's visibility timeout ended, or another consumer received them): a later run moves them again, a duplicate\n", res.Copied, dlq)
	}
	if len(res.Left) > 0 {
		rows := [][]string{{"LEFT IN " + dlq, "REASON"}}
		for _, l := range res.Left {
			rows = append(rows, []string{l.MessageID, l.Reason})
		}
		r.table(rows)
	}
	return nil
}
