package chaos

import (
	"strings"
	"testing"
	"time"
)

// hist builds a hand-made history on a fake timeline: each op takes one
// second from its invoke, and ops run one after another unless concurrent
// says otherwise.
type hist struct {
	ops []Op
	now int // seconds from the zero time
}

func (h *hist) add(op Op) *hist {
	op.ID = len(h.ops)
	op.Invoke = time.Time{}.Add(time.Duration(h.now) * time.Second)
	op.Complete = op.Invoke.Add(time.Second)
	h.now += 2
	h.ops = append(h.ops, op)
	return h
}

// concurrent makes the next op start at the same time as the last one.
func (h *hist) concurrent() *hist { h.now -= 2; return h }

func (h *hist) send(body, id string, o Outcome) *hist {
	return h.add(Op{Kind: OpSend, Body: body, MessageID: id, Outcome: o})
}

func (h *hist) recv(o Outcome, ms ...Received) *hist {
	return h.add(Op{Kind: OpReceive, Received: ms, Outcome: o})
}

func (h *hist) del(body, id string, o Outcome) *hist {
	return h.add(Op{Kind: OpDelete, Body: body, MessageID: id, Handle: "h-" + body, Outcome: o})
}

func msg(body, id string, dc int) Received {
	return Received{MessageID: id, Body: body, DequeueCount: dc, Handle: "h-" + body}
}

func TestCheckerRules(t *testing.T) {
	for _, tc := range []struct {
		name  string
		h     *hist
		valid bool
		want  func(r *Result) int // a count that must be exactly 1
	}{
		{"clean", new(hist).send("a", "1", Ok).recv(Ok, msg("a", "1", 1)).del("a", "1", Ok).recv(Ok), true, nil},
		{"clean with an unknown send never seen and a failed one", new(hist).send("a", "1", Unknown).send("b", "", Fail).recv(Ok), true, nil},
		{"redelivery is a duplicate, not a violation",
			new(hist).send("a", "1", Ok).recv(Ok, msg("a", "1", 1)).recv(Ok, msg("a", "1", 2)).del("a", "1", Ok),
			true, func(r *Result) int { return r.Duplicates }},
		{"an undone receive hands the message out again with the same count",
			new(hist).send("a", "1", Ok).recv(Ok, msg("a", "1", 2)).recv(Ok, msg("a", "1", 2)), true, nil},
		{"lost: an acknowledged send never received",
			new(hist).send("a", "1", Ok).send("b", "2", Ok).recv(Ok, msg("b", "2", 1)),
			false, func(r *Result) int { return len(r.Lost) }},
		{"lost: a receive that failed does not count",
			new(hist).send("a", "1", Ok).recv(Unknown, msg("a", "1", 1)),
			false, func(r *Result) int { return len(r.Lost) }},
		{"unexpected: a message nobody sent",
			new(hist).recv(Ok, msg("zzz", "9", 1)),
			false, func(r *Result) int { return len(r.Unexpected) }},
		{"phantom: a send that certainly failed shows up",
			new(hist).send("a", "", Fail).recv(Ok, msg("a", "1", 1)),
			false, func(r *Result) int { return len(r.Phantom) }},
		{"resurrected: received after its delete was acknowledged",
			new(hist).send("a", "1", Ok).recv(Ok, msg("a", "1", 1)).del("a", "1", Ok).recv(Ok, msg("a", "1", 2)),
			false, func(r *Result) int { return len(r.Resurrected) }},
		{"a receive concurrent with the delete is not a resurrection",
			new(hist).send("a", "1", Ok).recv(Ok, msg("a", "1", 1)).del("a", "1", Ok).concurrent().recv(Ok, msg("a", "1", 2)),
			true, nil},
		{"a delete of unknown outcome does not forbid later receives",
			new(hist).send("a", "1", Ok).recv(Ok, msg("a", "1", 1)).del("a", "1", Unknown).recv(Ok, msg("a", "1", 2)),
			true, nil},
		{"DequeueCount decreased",
			new(hist).send("a", "1", Ok).recv(Ok, msg("a", "1", 1)).recv(Ok, msg("a", "1", 3)).recv(Ok, msg("a", "1", 2)),
			false, func(r *Result) int { return len(r.Decreased) }},
		{"DequeueCount of concurrent receives is not ordered",
			new(hist).send("a", "1", Ok).recv(Ok, msg("a", "1", 3)).concurrent().recv(Ok, msg("a", "1", 2)),
			true, nil},
		{"identity: received with another MessageId than its send's",
			new(hist).send("a", "1", Ok).recv(Ok, msg("a", "7", 1)),
			false, func(r *Result) int { return len(r.Identity) }},
		{"identity: two ids for a message of unknown send",
			new(hist).send("a", "", Unknown).recv(Ok, msg("a", "7", 1)).recv(Ok, msg("a", "8", 2)),
			false, func(r *Result) int { return len(r.Identity) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Check(tc.h.ops)
			if r.Valid() != tc.valid {
				t.Fatalf("valid %v, want %v:\n%s", r.Valid(), tc.valid, r.String())
			}
			if tc.want != nil && tc.want(&r) != 1 {
				t.Fatalf("want exactly one finding of the rule:\n%s", r.String())
			}
			if !tc.valid && !strings.Contains(r.String(), "\n") {
				t.Fatalf("a violation is not in the summary: %s", r.String())
			}
		})
	}
}

// in puts the last op on queue q.
func (h *hist) in(q string) *hist { h.ops[len(h.ops)-1].Queue = q; return h }

// Dead letters: a message of queue q moved to its dead-letter queue d is a
// new message there (another id, a count from 1), maybe more than once;
// each copy keeps rules 4 and 5, and a message shows up in no other queue.
func TestCheckerDeadLetters(t *testing.T) {
	dl := map[string]string{"q": "d"}
	moved := func() *hist {
		return new(hist).send("a", "1", Ok).in("q").recv(Ok, msg("a", "1", 1)).in("q").recv(Ok, msg("a", "1", 2)).in("q").
			recv(Ok, msg("a", "9", 1)).in("d")
	}
	for _, tc := range []struct {
		name  string
		h     *hist
		valid bool
		want  func(r *Result) int // a count that must be exactly 1
	}{
		{"moved: a new id and count in the dead-letter queue", moved().del("a", "9", Ok).in("d"), true,
			func(r *Result) int { return r.DeadLettered + r.Duplicates }},
		{"moved twice: a second copy", moved().recv(Ok, msg("a", "10", 1)).in("d"), true,
			func(r *Result) int { return r.DeadLetterCopies }},
		{"a copy received twice is a duplicate", moved().recv(Ok, msg("a", "9", 2)).in("d"), true,
			func(r *Result) int { return r.Duplicates }},
		{"another copy after a copy's delete is no resurrection", moved().del("a", "9", Ok).in("d").recv(Ok, msg("a", "10", 1)).in("d"), true, nil},
		{"resurrected: a copy received after its delete", moved().del("a", "9", Ok).in("d").recv(Ok, msg("a", "9", 2)).in("d"), false,
			func(r *Result) int { return len(r.Resurrected) }},
		{"a copy's DequeueCount decreased", moved().recv(Ok, msg("a", "9", 3)).in("d").recv(Ok, msg("a", "9", 2)).in("d"), false,
			func(r *Result) int { return len(r.Decreased) }},
		{"misplaced: received from a queue it was not sent to", moved().recv(Ok, msg("a", "11", 1)).in("e"), false,
			func(r *Result) int { return len(r.Misplaced) }},
		{"identity still holds in its own queue", moved().recv(Ok, msg("a", "2", 3)).in("q"), false,
			func(r *Result) int { return len(r.Identity) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := CheckWith(tc.h.ops, dl)
			if r.Valid() != tc.valid {
				t.Fatalf("valid %v, want %v:\n%s", r.Valid(), tc.valid, r.String())
			}
			if tc.want != nil && tc.want(&r) != 1 {
				t.Fatalf("want exactly one:\n%s", r.String())
			}
		})
	}
	// Without the policy, the dead-letter queue's delivery is misplaced.
	if r := Check(moved().ops); len(r.Misplaced) != 1 {
		t.Fatalf("a move checked without its policy: %s", r.String())
	}
}

func TestCheckerCounts(t *testing.T) {
	h := new(hist).send("a", "1", Ok).send("b", "", Unknown).send("c", "", Fail).
		recv(Ok, msg("a", "1", 1), msg("b", "2", 1)).recv(Ok, msg("a", "1", 2)).recv(Ok, msg("a", "1", 3)).
		del("a", "1", Ok).recv(Unknown)
	h.ops[len(h.ops)-1].TimedOut = true
	r := Check(h.ops)
	if !r.Valid() {
		t.Fatal(r.String())
	}
	got := [...]int{r.Sends, r.SendsOk, r.SendsUnknown, r.SendsFailed, r.UnknownSeen, r.Receives, r.Deliveries, r.Distinct, r.Duplicates, r.DuplicatedMessages, r.DeletesOk, r.TimedOut}
	want := [...]int{3, 1, 1, 1, 1, 3, 4, 2, 2, 1, 1, 1}
	if got != want {
		t.Fatalf("counts %v, want %v: %s", got, want, r.String())
	}
}

// DuringStops reports an Unknown outcome through a surviving node while
// another stops, a long poll already waiting at the SIGTERM included, and
// nothing else: not the stopping node's own, not a Fail, not one that ran
// wholly before or after the stop.
func TestDuringStops(t *testing.T) {
	at := func(s int) time.Time { return time.Time{}.Add(time.Duration(s) * time.Second) }
	ops := []Op{
		{Kind: OpSend, Node: 1, Invoke: at(5), Outcome: Unknown, Err: "503 on the stopping node"},
		{Kind: OpSend, Node: 2, Invoke: at(5), Outcome: Ok},
		{Kind: OpDelete, Node: 3, Invoke: at(6), Outcome: Fail, Err: "404"},
		{Kind: OpReceive, Node: 2, Invoke: at(7), Outcome: Unknown, Err: "503 ServiceUnavailable"},
		{Kind: OpSend, Node: 3, Invoke: at(12), Complete: at(13), Outcome: Unknown, Err: "after the stop"},
		{Kind: OpSend, Node: 3, Invoke: at(1), Complete: at(2), Outcome: Unknown, Err: "before the stop"},
		{Kind: OpReceive, Node: 3, Invoke: at(3), Complete: at(5), Outcome: Unknown, Err: "a long poll waiting at the SIGTERM"},
	}
	bad, checked := DuringStops(ops, []StopWindow{{Node: 1, Start: at(4), End: at(10)}})
	if checked != 4 || len(bad) != 2 || !strings.Contains(bad[0], "receive through node 2 during node 1's stop") ||
		!strings.Contains(bad[1], "a long poll waiting") {
		t.Fatalf("checked %d, bad %q", checked, bad)
	}
	if bad, _ := DuringStops(ops, nil); len(bad) != 0 {
		t.Fatalf("no stop, yet %q", bad)
	}
}

// Topics: a message published to topic t is a new message (its own id, a
// count from 1) in each subscribed queue, at least once in each; each copy
// keeps rules 4 and 5, and a copy in no subscribed queue is misplaced.
func TestCheckerTopics(t *testing.T) {
	topics := map[string][]string{"t": {"q", "r"}}
	dl := map[string]string{"r": "d"}
	pub := func() *hist {
		h := new(hist).add(Op{Kind: OpPublish, Queue: "t", Body: "a", MessageID: "T1", Outcome: Ok})
		return h.recv(Ok, msg("a", "1", 1)).in("q").recv(Ok, msg("a", "2", 1)).in("r")
	}
	for _, tc := range []struct {
		name  string
		h     *hist
		valid bool
		want  func(r *Result) int // a count that must be exactly 1
	}{
		{"a copy in each subscribed queue", pub().del("a", "1", Ok).in("q").del("a", "2", Ok).in("r"), true,
			func(r *Result) int { return r.PublishesOk }},
		{"lost: no copy in one subscribed queue",
			new(hist).add(Op{Kind: OpPublish, Queue: "t", Body: "a", MessageID: "T1", Outcome: Ok}).recv(Ok, msg("a", "1", 1)).in("q"), false,
			func(r *Result) int { return len(r.Lost) }},
		{"lost: no copy anywhere", new(hist).add(Op{Kind: OpPublish, Queue: "t", Body: "a", MessageID: "T1", Outcome: Ok}).recv(Ok), false,
			func(r *Result) int { return len(r.Lost) - 1 }}, // one per queue
		{"an unknown publish never seen is fine", new(hist).add(Op{Kind: OpPublish, Queue: "t", Body: "a", Outcome: Unknown}).recv(Ok), true, nil},
		{"phantom: a failed publish received", new(hist).add(Op{Kind: OpPublish, Queue: "t", Body: "a", Outcome: Fail}).recv(Ok, msg("a", "1", 1)).in("q"), false,
			func(r *Result) int { return len(r.Phantom) }},
		{"a second copy in one queue (a relay's lost answer)", pub().recv(Ok, msg("a", "3", 1)).in("r"), true,
			func(r *Result) int { return r.PublishCopies }},
		{"a copy received twice is a duplicate", pub().recv(Ok, msg("a", "2", 2)).in("r"), true,
			func(r *Result) int { return r.Duplicates }},
		{"a copy in the dead-letter queue of a subscribed queue", pub().recv(Ok, msg("a", "9", 1)).in("d"), true, nil},
		{"resurrected: a copy received after its delete", pub().del("a", "2", Ok).in("r").recv(Ok, msg("a", "2", 2)).in("r"), false,
			func(r *Result) int { return len(r.Resurrected) }},
		{"another queue's copy after a delete is no resurrection", pub().del("a", "2", Ok).in("r").recv(Ok, msg("a", "1", 2)).in("q"), true, nil},
		{"a copy's DequeueCount decreased", pub().recv(Ok, msg("a", "2", 3)).in("r").recv(Ok, msg("a", "2", 2)).in("r"), false,
			func(r *Result) int { return len(r.Decreased) }},
		{"misplaced: a copy in a queue not subscribed", pub().recv(Ok, msg("a", "5", 1)).in("e"), false,
			func(r *Result) int { return len(r.Misplaced) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := CheckTopics(tc.h.ops, dl, topics)
			if r.Valid() != tc.valid {
				t.Fatalf("valid %v, want %v:\n%s", r.Valid(), tc.valid, r.String())
			}
			if tc.want != nil && tc.want(&r) != 1 {
				t.Fatalf("want exactly one:\n%s", r.String())
			}
		})
	}
}

// Pushes: every acknowledged publish pushed at least once, nothing pushed
// that was never published or whose publish failed; an unknown publish
// may or may not be pushed; duplicates are counted.
func TestCheckPushes(t *testing.T) {
	h := new(hist).add(Op{Kind: OpPublish, Queue: "t", Body: "a", Outcome: Ok}).
		add(Op{Kind: OpPublish, Queue: "t", Body: "b", Outcome: Ok}).
		add(Op{Kind: OpPublish, Queue: "t", Body: "c", Outcome: Unknown}).
		add(Op{Kind: OpPublish, Queue: "t", Body: "d", Outcome: Fail}).
		add(Op{Kind: OpPublish, Queue: "u", Body: "e", Outcome: Ok})
	for _, tc := range []struct {
		name   string
		pushed map[string]int
		check  func(r PushResult) bool
	}{
		{"clean, with a duplicate and an unknown pushed", map[string]int{"a": 2, "b": 1, "c": 1},
			func(r PushResult) bool { return r.Valid() && r.Duplicates == 1 && r.Published == 2 }},
		{"lost", map[string]int{"a": 1}, func(r PushResult) bool { return len(r.Lost) == 1 && strings.HasPrefix(r.Lost[0], "b ") }},
		{"unexpected", map[string]int{"a": 1, "b": 1, "x": 1}, func(r PushResult) bool { return len(r.Unexpected) == 1 }},
		{"another topic's publish is unexpected", map[string]int{"a": 1, "b": 1, "e": 1}, func(r PushResult) bool { return len(r.Unexpected) == 1 }},
		{"phantom", map[string]int{"a": 1, "b": 1, "d": 1}, func(r PushResult) bool { return len(r.Phantom) == 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := CheckPushes(h.ops, "t", tc.pushed); !tc.check(r) {
				t.Fatal(r.String())
			}
		})
	}
}
