package chaos

// The history checker, as Jepsen's queue checkers do: a queue with
// redelivery is not linearizable, so instead of a model it counts what
// went wrong. Messages are told apart by their bodies (every send's body is
// unique in a history).
//
// Rules (a violation of any makes the history invalid):
//  1. Lost: every acknowledged send (Ok) was received by some Ok receive.
//     A history ends with a drain that receives until every queue stays
//     empty, so "received, or still present at the end" is "received".
//  2. Unexpected: every message received was sent by some invoked send
//     (whatever its outcome: an Unknown or a 503 send may have happened).
//  3. Phantom: no message whose send certainly failed (Fail) is received.
//  4. Resurrected: no Ok receive invoked after an Ok delete of a message
//     completed returns that message.
//  5. DequeueCount never decreases: for two Ok receives of a message where
//     the second was invoked after the first completed, the second's
//     DequeueCount is at least the first's. (Equal is allowed: a receive
//     a leader answered but that never committed — it lost the lead, or it
//     was killed — is undone, and the next leader hands the message out
//     again with the same count, as a single node does after a crash.)
//  6. Identity: a message keeps one MessageId: the one its Ok send was
//     given, in every receive from the queue it was sent to.
//  7. Misplaced: a message is received only from the queue it was sent
//     to, or from that queue's dead-letter queue (CheckWith).
//
// Topics (CheckTopics): a published message is a new message in each
// queue subscribed to its topic (a copy: its own MessageId, DequeueCount
// from 1), at least once in each, so there may be several copies in one.
// Rule 1 requires a delivery from every subscribed queue (or its
// dead-letter queue); rules 4 and 5 hold for each copy; rule 6 does not
// apply; rule 7 allows the subscribed queues and their dead-letter queues.
//
// Dead letters (CheckWith): a message moved to its queue's dead-letter
// queue is a new message there (another MessageId, DequeueCount from 1);
// a move is at least once, so there may be several copies. Rules 4 and 5
// hold for each copy (its queue and MessageId); rule 1 is met by a
// delivery from either queue.
//
// Counted, not violations: duplicates (deliveries of a message after its
// first: at-least-once), sends of unknown outcome and whether they showed
// up, client timeouts.

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Result is what the checker found.
type Result struct {
	Sends, SendsOk, SendsFailed, SendsUnknown int
	UnknownSeen                               int // unknown sends that were received
	Receives, Deliveries, Distinct            int // Ok receives; messages they returned; distinct messages
	Duplicates                                int // deliveries beyond each message's first (each copy's, for a moved one)
	DuplicatedMessages                        int // messages delivered more than once
	DeadLettered                              int // messages received from a dead-letter queue
	DeadLetterCopies                          int // their copies beyond one each
	Publishes, PublishesOk                    int // publishes invoked; acknowledged
	PublishCopies                             int // copies of published messages beyond one per subscribed queue
	DeletesOk                                 int
	TimedOut                                  int // operations whose client timed out
	Slowest                                   time.Duration
	SlowestOp                                 string // the slowest completed operation

	Lost        []string // bodies
	Unexpected  []string
	Phantom     []string
	Resurrected []string
	Decreased   []string
	Identity    []string
	Misplaced   []string
}

// Valid reports whether no rule was violated.
func (r *Result) Valid() bool {
	return len(r.Lost)+len(r.Unexpected)+len(r.Phantom)+len(r.Resurrected)+len(r.Decreased)+len(r.Identity)+len(r.Misplaced) == 0
}

// String summarises the result.
func (r *Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sends %d (ok %d, failed %d, unknown %d of which %d seen); receives %d: %d deliveries of %d messages, %d duplicates (%d messages); deletes ok %d; client timeouts %d; slowest %v (%s)",
		r.Sends, r.SendsOk, r.SendsFailed, r.SendsUnknown, r.UnknownSeen, r.Receives, r.Deliveries, r.Distinct,
		r.Duplicates, r.DuplicatedMessages, r.DeletesOk, r.TimedOut, r.Slowest.Round(time.Millisecond), r.SlowestOp)
	if r.DeadLettered > 0 {
		fmt.Fprintf(&b, "; dead-lettered %d messages (%d extra copies)", r.DeadLettered, r.DeadLetterCopies)
	}
	if r.Publishes > 0 {
		fmt.Fprintf(&b, "; publishes %d (ok %d), %d extra copies in subscribed queues", r.Publishes, r.PublishesOk, r.PublishCopies)
	}
	for _, v := range []struct {
		name string
		l    []string
	}{{"LOST", r.Lost}, {"UNEXPECTED", r.Unexpected}, {"PHANTOM", r.Phantom}, {"RESURRECTED", r.Resurrected},
		{"DEQUEUECOUNT DECREASED", r.Decreased}, {"IDENTITY", r.Identity}, {"MISPLACED", r.Misplaced}} {
		if len(v.l) > 0 {
			l := v.l
			if len(l) > 20 {
				l = l[:20]
			}
			fmt.Fprintf(&b, "\n%s: %d: %s", v.name, len(v.l), strings.Join(l, "; "))
		}
	}
	return b.String()
}

// delivery is one message in one Ok receive.
type delivery struct {
	op  *Op
	msg Received
}

// Check checks a history (see the file comment) of queues without
// dead-letter policies.
func Check(ops []Op) Result { return CheckWith(ops, nil) }

// CheckWith checks a history whose queues move messages to the dead-letter
// queues deadLetters names (a queue's name → its dead-letter queue's).
func CheckWith(ops []Op, deadLetters map[string]string) Result {
	return CheckTopics(ops, deadLetters, nil)
}

// CheckTopics is CheckWith for a history that also publishes to the
// topics topics names (a topic's name → the queues subscribed to it).
func CheckTopics(ops []Op, deadLetters map[string]string, topics map[string][]string) Result {
	var r Result
	sends := map[string]*Op{}     // body → its send
	deletes := map[string][]*Op{} // queue NUL body, and queue NUL MessageId → its Ok deletes
	var deliveries []delivery
	for i := range ops {
		op := &ops[i]
		if op.TimedOut {
			r.TimedOut++
		}
		if d := op.Complete.Sub(op.Invoke); op.Outcome != Pending && d > r.Slowest {
			r.Slowest = d
			r.SlowestOp = fmt.Sprintf("%s through node %d: %s %s", op.Kind, op.Node, op.Outcome, op.Err)
		}
		switch op.Kind {
		case OpPublish:
			r.Publishes++
			sends[op.Body] = op
			if op.Outcome == Ok {
				r.PublishesOk++
			}
		case OpSend:
			r.Sends++
			sends[op.Body] = op
			switch op.Outcome {
			case Ok:
				r.SendsOk++
			case Fail:
				r.SendsFailed++
			default:
				r.SendsUnknown++
			}
		case OpReceive:
			if op.Outcome != Ok {
				continue
			}
			r.Receives++
			for _, m := range op.Received {
				deliveries = append(deliveries, delivery{op, m})
			}
		case OpDelete:
			if op.Outcome == Ok {
				r.DeletesOk++
				deletes[op.Queue+"\x00"+op.Body] = append(deletes[op.Queue+"\x00"+op.Body], op)
				deletes[op.Queue+"\x00"+op.MessageID] = append(deletes[op.Queue+"\x00"+op.MessageID], op)
			}
		}
	}
	r.Deliveries = len(deliveries)
	byBody := map[string][]delivery{}
	for _, d := range deliveries {
		byBody[d.msg.Body] = append(byBody[d.msg.Body], d)
	}
	r.Distinct = len(byBody)
	for body, s := range sends {
		if s.Kind == OpPublish {
			continue // checkPublished
		}
		if s.Outcome == Ok && len(byBody[body]) == 0 {
			r.Lost = append(r.Lost, fmt.Sprintf("%s (id %s, sent through node %d at %s)", body, s.MessageID, s.Node, stamp(s.Complete)))
		}
	}
	for body, ds := range byBody {
		s := sends[body]
		switch {
		case s == nil:
			r.Unexpected = append(r.Unexpected, fmt.Sprintf("%q (id %s)", body, ds[0].msg.MessageID))
			continue
		case s.Outcome == Fail:
			r.Phantom = append(r.Phantom, fmt.Sprintf("%s (send failed: %s)", body, s.Err))
		case s.Outcome != Ok:
			r.UnknownSeen++
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i].op.Invoke.Before(ds[j].op.Invoke) })
		if s.Kind == OpPublish {
			r.checkPublished(body, s, ds, deletes, deadLetters, topics[s.Queue])
			continue
		}
		home, dlq := s.Queue, deadLetters[s.Queue]
		id := ds[0].msg.MessageID
		if s.Outcome == Ok {
			id = s.MessageID
		}
		copies := map[string]bool{} // MessageIds in the dead-letter queue
		homeN, dlqN := 0, 0         // deliveries from either queue
		for i, d := range ds {
			var dels []*Op
			switch q := d.op.Queue; {
			case q == home:
				if d.msg.MessageID != id {
					r.Identity = append(r.Identity, fmt.Sprintf("%s: id %s, received as %s (receive %d)", body, id, d.msg.MessageID, d.op.ID))
				}
				dels = deletes[q+"\x00"+body]
				homeN++
			case dlq != "" && q == dlq:
				dels = deletes[q+"\x00"+d.msg.MessageID]
				copies[d.msg.MessageID] = true
				dlqN++
			default:
				r.Misplaced = append(r.Misplaced, fmt.Sprintf("%s: sent to %s, received from %s (receive %d, id %s)", body, home, q, d.op.ID, d.msg.MessageID))
				continue
			}
			for _, prev := range ds[:i] {
				if prev.op.Queue != d.op.Queue || (d.op.Queue != home && prev.msg.MessageID != d.msg.MessageID) {
					continue // another copy
				}
				if d.op.Invoke.After(prev.op.Complete) && d.msg.DequeueCount < prev.msg.DequeueCount {
					r.Decreased = append(r.Decreased, fmt.Sprintf("%s: DequeueCount %d (receive %d, node %d, %s) after %d (receive %d, node %d, %s)",
						body, d.msg.DequeueCount, d.op.ID, d.op.Node, stamp(d.op.Invoke), prev.msg.DequeueCount, prev.op.ID, prev.op.Node, stamp(prev.op.Complete)))
					break
				}
			}
			for _, del := range dels {
				if d.op.Invoke.After(del.Complete) {
					r.Resurrected = append(r.Resurrected, fmt.Sprintf("%s: deleted (op %d, node %d, done %s), then received (op %d, node %d, invoked %s, DequeueCount %d)",
						body, del.ID, del.Node, stamp(del.Complete), d.op.ID, d.op.Node, stamp(d.op.Invoke), d.msg.DequeueCount))
					break
				}
			}
		}
		extra := homeN - 1 // deliveries beyond the first
		if len(copies) > 0 {
			// Its receives in its own queue were the way there, not
			// duplicates: count its copies' beyond one each.
			r.DeadLettered++
			r.DeadLetterCopies += len(copies) - 1
			extra = dlqN - len(copies)
		}
		if extra > 0 {
			r.Duplicates += extra
			r.DuplicatedMessages++
		}
	}
	for body, s := range sends {
		if s.Kind == OpPublish && s.Outcome == Ok && len(byBody[body]) == 0 {
			r.checkPublished(body, s, nil, deletes, deadLetters, topics[s.Queue])
		}
	}
	for _, l := range [][]string{r.Lost, r.Unexpected, r.Phantom, r.Resurrected, r.Decreased, r.Identity, r.Misplaced} {
		sort.Strings(l)
	}
	return r
}

// checkPublished checks the deliveries ds (in invocation order) of the
// message published by s to the queues subs (the file comment, "Topics").
func (r *Result) checkPublished(body string, s *Op, ds []delivery, deletes map[string][]*Op, deadLetters map[string]string, subs []string) {
	home := map[string]string{} // a queue a copy may be received from → the subscribed queue it stands for
	for _, q := range subs {
		home[q] = q
		if d := deadLetters[q]; d != "" {
			home[d] = q
		}
	}
	reached := map[string]bool{}
	copies := map[string]int{} // queue NUL MessageId → deliveries
	for i, d := range ds {
		q := d.op.Queue
		h, ok := home[q]
		if !ok {
			r.Misplaced = append(r.Misplaced, fmt.Sprintf("%s: published to %s, received from %s (receive %d, id %s)", body, s.Queue, q, d.op.ID, d.msg.MessageID))
			continue
		}
		reached[h] = true
		key := q + "\x00" + d.msg.MessageID
		copies[key]++
		for _, prev := range ds[:i] {
			if prev.op.Queue != q || prev.msg.MessageID != d.msg.MessageID {
				continue // another copy
			}
			if d.op.Invoke.After(prev.op.Complete) && d.msg.DequeueCount < prev.msg.DequeueCount {
				r.Decreased = append(r.Decreased, fmt.Sprintf("%s: DequeueCount %d (receive %d, node %d, %s) after %d (receive %d, node %d, %s) in %s",
					body, d.msg.DequeueCount, d.op.ID, d.op.Node, stamp(d.op.Invoke), prev.msg.DequeueCount, prev.op.ID, prev.op.Node, stamp(prev.op.Complete), q))
				break
			}
		}
		for _, del := range deletes[key] {
			if d.op.Invoke.After(del.Complete) {
				r.Resurrected = append(r.Resurrected, fmt.Sprintf("%s: deleted from %s (op %d, node %d, done %s), then received (op %d, node %d, invoked %s, DequeueCount %d)",
					body, q, del.ID, del.Node, stamp(del.Complete), d.op.ID, d.op.Node, stamp(d.op.Invoke), d.msg.DequeueCount))
				break
			}
		}
	}
	if s.Outcome == Ok {
		for _, q := range subs {
			if !reached[q] {
				r.Lost = append(r.Lost, fmt.Sprintf("%s (published to %s through node %d at %s, id %s): no copy in %s", body, s.Queue, s.Node, stamp(s.Complete), s.MessageID, q))
			}
		}
	}
	perQueue := map[string]int{}
	for key, n := range copies {
		q, _, _ := strings.Cut(key, "\x00")
		perQueue[q]++
		if n > 1 {
			r.Duplicates += n - 1
			r.DuplicatedMessages++
		}
	}
	for _, n := range perQueue {
		r.PublishCopies += n - 1
	}
}

func stamp(t time.Time) string { return t.Format("15:04:05.000") }

// PushResult is what CheckPushes found.
type PushResult struct {
	Published, Pushed, Duplicates int      // acknowledged publishes; distinct bodies pushed; pushes beyond each body's first
	Lost                          []string // acknowledged publishes never pushed
	Unexpected                    []string // pushed bodies no publish sent
	Phantom                       []string // pushed bodies whose publish certainly failed
}

// Valid reports whether no rule was violated.
func (r *PushResult) Valid() bool { return len(r.Lost)+len(r.Unexpected)+len(r.Phantom) == 0 }

func (r *PushResult) String() string {
	s := fmt.Sprintf("%d acknowledged publishes, %d pushed (%d duplicate pushes)", r.Published, r.Pushed, r.Duplicates)
	for _, v := range []struct {
		name string
		l    []string
	}{{"LOST", r.Lost}, {"UNEXPECTED", r.Unexpected}, {"PHANTOM", r.Phantom}} {
		if len(v.l) > 0 {
			s += fmt.Sprintf("\n%s: %d: %s", v.name, len(v.l), strings.Join(v.l[:min(20, len(v.l))], "; "))
		}
	}
	return s
}

// CheckPushes checks what an HTTP endpoint subscribed to topic was pushed
// (pushed: a body → how many times; SIMPLIFIED, so the published body)
// against the history, once the pushes have settled: every acknowledged
// publish was pushed at least once, and nothing else was pushed but what
// a publish of unknown outcome may have sent. Duplicates (at least once)
// are counted.
func CheckPushes(ops []Op, topic string, pushed map[string]int) PushResult {
	var r PushResult
	pubs := map[string]*Op{}
	for i := range ops {
		if op := &ops[i]; op.Kind == OpPublish && op.Queue == topic {
			pubs[op.Body] = op
			if op.Outcome == Ok {
				r.Published++
			}
		}
	}
	for body, op := range pubs {
		if op.Outcome == Ok && pushed[body] == 0 {
			r.Lost = append(r.Lost, fmt.Sprintf("%s (published through node %d at %s, id %s)", body, op.Node, stamp(op.Complete), op.MessageID))
		}
	}
	for body, n := range pushed {
		r.Pushed++
		r.Duplicates += n - 1
		switch op := pubs[body]; {
		case op == nil:
			r.Unexpected = append(r.Unexpected, body)
		case op.Outcome == Fail:
			r.Phantom = append(r.Phantom, fmt.Sprintf("%s (publish failed: %s)", body, op.Err))
		}
	}
	for _, l := range [][]string{r.Lost, r.Unexpected, r.Phantom} {
		sort.Strings(l)
	}
	return r
}

// Trace lists every operation of a history that touched the message with
// body: its send, the receives that returned it, its deletes.
func Trace(ops []Op, body string) string {
	var b strings.Builder
	for i := range ops {
		op := &ops[i]
		touched := op.Body == body
		dc := 0
		for _, m := range op.Received {
			if m.Body == body {
				touched, dc = true, m.DequeueCount
			}
		}
		if !touched {
			continue
		}
		fmt.Fprintf(&b, "  op %d %s p%d node %d %s..%s %s", op.ID, op.Kind, op.Process, op.Node, stamp(op.Invoke), stamp(op.Complete), op.Outcome)
		if op.Kind == OpReceive {
			fmt.Fprintf(&b, " DequeueCount %d", dc)
		}
		if op.Err != "" {
			fmt.Fprintf(&b, " (%s)", op.Err)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// DuringStops checks the promise of a graceful stop (an operator's
// SIGTERM: the node hands its leads over, then lets the requests in flight
// finish): no client of another node sees an error from it. It returns
// the operations sent to a node other than the one stopping that ran while
// it stopped (invoked before it had exited, completed after its SIGTERM:
// a long poll already waiting counts), whose outcome is Unknown (a 5xx, a
// timeout or a broken connection), and how many such operations there
// were in all. A Fail (a
// 4xx, or a receipt handle that had expired) is the request's own and
// not counted; nor is anything sent to the stopping node itself, whose
// clients see its connections close.
func DuringStops(ops []Op, stops []StopWindow) (bad []string, checked int) {
	for _, w := range stops {
		for i := range ops {
			op := &ops[i]
			if op.Node == w.Node || op.Invoke.After(w.End) || (!op.Complete.IsZero() && op.Complete.Before(w.Start)) {
				continue
			}
			checked++
			if op.Outcome == Unknown {
				bad = append(bad, fmt.Sprintf("%s through node %d during node %d's stop (%s..%s): %s",
					op.Kind, op.Node, w.Node, w.Start.Format("15:04:05.000"), w.End.Format("15:04:05.000"), op.Err))
			}
		}
	}
	return bad, checked
}
