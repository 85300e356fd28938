package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func dlqConfig(target string, n int) QueueConfig {
	c := DefaultQueueConfig()
	c.VisibilityTimeout = 10 * time.Second
	c.Retention = time.Hour
	c.DeadLetterQueue, c.MaxReceiveCount = target, n
	return c
}

// receiveBatch receives one batch (nil when none is visible).
func receiveBatch(t *testing.T, q *Queue) []Message {
	t.Helper()
	msgs, err := q.Receive(context.Background(), ReceiveOptions{Max: MaxBatch, HasWait: true}, nil)
	if err == ErrMessageNotExist {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

func sysProp(m *Message, name string) (string, bool) {
	for _, p := range m.Properties {
		if p.System && string(p.Name) == name {
			return string(p.Value), true
		}
	}
	return "", false
}

// A message received MaxReceiveCount times moves to the dead-letter queue
// on the next receive: same body and properties, a new MessageId, its
// EnqueueTime and expiry kept, DequeueCount 0, the three DLQ system
// properties; across a crash and restart it stays there.
func TestDeadLetterMove(t *testing.T) {
	bothModes(t, func(t *testing.T) {
		durable := strings.HasSuffix(t.Name(), "durable")
		dir := t.TempDir()
		clk := NewFakeClock(t0)
		open := func() *Broker {
			if durable {
				return openDurableTest(t, dir, clk, nil)
			}
			b, err := Open(Options{Clock: clk, Logger: testLogger(t), Stripes: 2, ARNPrefix: "acs:mns:cn-test:123"})
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		b := open()
		dlq := mustQueue(t, b, "dlq", DefaultQueueConfig())
		src := mustQueue(t, b, "src", dlqConfig("dlq", 2))
		res, err := src.Send([]SendEntry{
			{Body: []byte("poison"), Priority: 3, Properties: testProps(0)},
			{Body: []byte("fine")},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		enq := clk.Now().UnixMilli()
		for round := 1; round <= 2; round++ {
			msgs := receiveBatch(t, src)
			if len(msgs) != 2 || msgs[0].DequeueCount != round {
				t.Fatalf("round %d: %d messages", round, len(msgs))
			}
			if round == 2 { // "fine" is handled
				for _, m := range msgs {
					if string(m.Body) == "fine" {
						if _, err := src.Delete([]ReceiptHandle{m.Handle}, make([]error, 1)); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			clk.Advance(10 * time.Second)
		}
		// The third receive finds nothing: the message moved.
		if msgs := receiveBatch(t, src); len(msgs) != 0 {
			t.Fatalf("received %q a third time", msgs[0].Body)
		}
		if si, _ := src.Attributes(); si.Active+si.Inactive+si.Delayed != 0 {
			t.Fatalf("source still holds %+v", si)
		}
		if src.deadLettered.Load() != 1 {
			t.Fatalf("dead-lettered %d", src.deadLettered.Load())
		}
		check := func(dlq *Queue, what string) *Message {
			t.Helper()
			msgs, err := dlq.Peek(MaxBatch, nil)
			if err != nil || len(msgs) != 1 {
				t.Fatalf("%s: dlq peek %d %v", what, len(msgs), err)
			}
			m := &msgs[0]
			if string(m.Body) != "poison" || m.Priority != 3 || m.DequeueCount != 0 || m.EnqueueTime.UnixMilli() != enq || m.ID == res[0].ID {
				t.Fatalf("%s: dead-lettered message %+v", what, m)
			}
			if want := makeMessageID(dlq.id, 1); [8]byte(m.ID[0:8]) != [8]byte(want[0:8]) {
				t.Fatalf("%s: id %s is not the dead-letter queue's", what, m.ID)
			}
			// Its user properties and traceparent, then the DLQ ones.
			if len(m.Properties) != 6 || string(m.Properties[0].Name) != "order" || string(m.Properties[2].Name) != "traceparent" {
				t.Fatalf("%s: properties %d", what, len(m.Properties))
			}
			arn := "acs:mns:local:0:/queues/src"
			if !durable {
				arn = "acs:mns:cn-test:123:/queues/src"
			}
			for name, want := range map[string]string{SysDLQMessageType: "QUEUE", SysDLQSourceArn: arn, SysDLQOriginMessageID: res[0].ID.String()} {
				if v, ok := sysProp(m, name); !ok || v != want {
					t.Fatalf("%s: %s = %q, want %q", what, name, v, want)
				}
			}
			return m
		}
		check(dlq, "after the move")
		checkInvariants(t, src)
		checkInvariants(t, dlq)
		if durable {
			crashBroker(b)
			b = open()
			dlq, _ = b.Queue("dlq")
			src, _ = b.Queue("src")
			check(dlq, "after restart")
			if si, _ := src.Attributes(); si.Active+si.Inactive+si.Delayed != 0 {
				t.Fatalf("after restart the source holds %+v", si)
			}
		}
		defer b.Close()
		// Received from the dead-letter queue, it counts from 1 again.
		got := receiveBatch(t, dlq)
		if len(got) != 1 || got[0].DequeueCount != 1 {
			t.Fatalf("dlq receive %+v", got)
		}
		// Its retention is the original one: an hour after the send it is
		// gone, although it entered the dead-letter queue 20 s later.
		clk.Advance(time.Hour - 20*time.Second)
		if info, _ := dlq.Attributes(); info.Inactive+info.Active != 0 {
			t.Fatalf("dead-lettered message outlived its retention: %+v", info)
		}
	})
}

// Bad policies fail with an *ArgumentError and change nothing.
func TestDeadLetterPolicyValidation(t *testing.T) {
	b, _ := openTest(t, Options{})
	mustQueue(t, b, "dlq", DefaultQueueConfig())
	q := mustQueue(t, b, "q", DefaultQueueConfig())
	for _, c := range []struct {
		name string
		cfg  QueueConfig
	}{
		{"self", dlqConfig("q2", 3)},
		{"missing", dlqConfig("nope", 3)},
		{"zero", dlqConfig("dlq", 0)},
		{"too many", dlqConfig("dlq", MaxMaxReceiveCount+1)},
		{"count without target", dlqConfig("", 3)},
		{"bad name", dlqConfig("a_b", 3)},
	} {
		var ae *ArgumentError
		if _, err := b.CreateQueue("q2", c.cfg); !errors.As(err, &ae) {
			t.Fatalf("create %s: %v", c.name, err)
		}
		if _, err := b.Queue("q2"); err != ErrQueueNotExist {
			t.Fatalf("create %s made the queue", c.name)
		}
		target, n := c.cfg.DeadLetterQueue, c.cfg.MaxReceiveCount
		if c.name == "self" {
			target = "q"
		}
		if err := b.SetQueueAttributes("q", ConfigPatch{DeadLetterQueue: &target, MaxReceiveCount: &n}); !errors.As(err, &ae) {
			t.Fatalf("set %s: %v", c.name, err)
		}
		if got := q.meta().cfg; got != DefaultQueueConfig() {
			t.Fatalf("set %s changed the queue: %+v", c.name, got)
		}
	}
	// A good one; then the target alone; then off.
	target, n := "dlq", 5
	if err := b.SetQueueAttributes("q", ConfigPatch{DeadLetterQueue: &target, MaxReceiveCount: &n}); err != nil {
		t.Fatal(err)
	}
	n = 7
	if err := b.SetQueueAttributes("q", ConfigPatch{MaxReceiveCount: &n}); err != nil || q.meta().cfg.MaxReceiveCount != 7 {
		t.Fatal(err, q.meta().cfg)
	}
	off := ""
	if err := b.SetQueueAttributes("q", ConfigPatch{DeadLetterQueue: &off}); err != nil || q.meta().cfg != DefaultQueueConfig() {
		t.Fatal(err, q.meta().cfg)
	}
}

// A policy whose target was deleted is inert: the message is received as if
// there were no policy (never lost, never stuck hidden); a new queue of
// that name makes it work again.
func TestDeadLetterTargetDeleted(t *testing.T) {
	b, clk := openTest(t, Options{Stripes: 1})
	mustQueue(t, b, "dlq", DefaultQueueConfig())
	q := mustQueue(t, b, "q", dlqConfig("dlq", 1))
	if _, err := q.Send([]SendEntry{{Body: []byte("m")}}, nil); err != nil {
		t.Fatal(err)
	}
	if len(receiveBatch(t, q)) != 1 {
		t.Fatal("first receive")
	}
	if err := b.DeleteQueue("dlq"); err != nil {
		t.Fatal(err)
	}
	for round := 2; round <= 3; round++ {
		clk.Advance(10 * time.Second)
		msgs := receiveBatch(t, q)
		if len(msgs) != 1 || msgs[0].DequeueCount != round {
			t.Fatalf("round %d with the target gone: %+v", round, msgs)
		}
	}
	if q.meta().cfg.DeadLetterQueue != "dlq" {
		t.Fatal("the policy was dropped")
	}
	// An identical create is still "exists, same attributes".
	if created, err := b.CreateQueue("q", dlqConfig("dlq", 1)); created || err != nil {
		t.Fatalf("identical create with the target gone: %v %v", created, err)
	}
	dlq := mustQueue(t, b, "dlq", DefaultQueueConfig())
	clk.Advance(10 * time.Second)
	if msgs := receiveBatch(t, q); len(msgs) != 0 {
		t.Fatal("received with the target back")
	}
	if msgs, err := dlq.Peek(1, nil); err != nil || string(msgs[0].Body) != "m" {
		t.Fatal(err)
	}
}

// The queue value carries the policy only when set.
func TestQueueValueDeadLetter(t *testing.T) {
	v := queueVal{id: 9, stripes: 2, cfg: dlqConfig("the-dlq", 12), name: "q"}
	got, err := decodeQueueVal(v.encode())
	if err != nil || got.cfg != v.cfg || got.name != "q" {
		t.Fatal(got, err)
	}
	v.cfg.DeadLetterQueue, v.cfg.MaxReceiveCount = "", 0
	if n := len(v.encode()); n != queueValFixed+1 {
		t.Fatalf("a value without a policy is %d bytes", n)
	}
	bad := append(v.encode(), 1)
	if _, err := decodeQueueVal(bad); err == nil {
		t.Fatal("a truncated policy decoded")
	}
}

// TestDeadLetterReceiveAllocs: a receive on a queue with a live policy
// allocates no more than one on a queue without (the moves scratch stays
// on the stack), compared side by side.
func TestDeadLetterReceiveAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	b, _ := openTest(t, Options{})
	mustQueue(t, b, "dlq", DefaultQueueConfig())
	cfg := DefaultQueueConfig()
	cfg.DeadLetterQueue, cfg.MaxReceiveCount = "dlq", 5
	with := mustQueue(t, b, "with", cfg)
	without := mustQueue(t, b, "without", DefaultQueueConfig())
	cycle := func(q *Queue) float64 {
		body := []byte("x")
		dst := make([]Message, 0, 1)
		var errs [1]error
		return testing.AllocsPerRun(200, func() {
			if _, err := q.Send([]SendEntry{{Body: body}}, nil); err != nil {
				t.Fatal(err)
			}
			var err error
			dst, err = q.Receive(context.Background(), ReceiveOptions{Max: 1, HasWait: true}, dst[:0])
			if err != nil {
				t.Fatal(err)
			}
			if _, err := q.Delete([]ReceiptHandle{dst[0].Handle}, errs[:]); err != nil {
				t.Fatal(err)
			}
		})
	}
	a, n := cycle(with), cycle(without)
	if a > n {
		t.Fatalf("a cycle on a queue with a dead-letter policy allocates %.1f times, without %.1f", a, n)
	}
}

// TestReceiveFindsAMessageBehindManyDeadLetters: 512 messages due for the
// dead-letter queue ahead of an Active one (each received MaxReceiveCount
// times, then visible again). One receive moves them and returns the one
// behind them. It answered MessageNotExist, and long polls slept their
// whole wait, until three receives had moved 80 each (semantics audit,
// 2026-12-06).
func TestReceiveFindsAMessageBehindManyDeadLetters(t *testing.T) {
	bothModes(t, func(t *testing.T) {
		var b *Broker
		clk := NewFakeClock(t0)
		if strings.HasSuffix(t.Name(), "durable") {
			b = openDurableTest(t, t.TempDir(), clk, nil)
		} else {
			var err error
			if b, err = Open(Options{Clock: clk, Logger: testLogger(t), Stripes: 2}); err != nil {
				t.Fatal(err)
			}
		}
		defer b.Close()
		dlq := mustQueue(t, b, "dlq", DefaultQueueConfig())
		src := mustQueue(t, b, "src", dlqConfig("dlq", 1))
		const poison = 512
		makePoison(t, src, clk, poison)
		if _, err := src.SendOne(context.Background(), SendEntry{Body: []byte("normal")}); err != nil {
			t.Fatal(err)
		}
		msgs, err := src.Receive(context.Background(), ReceiveOptions{Max: 1, HasWait: true}, nil)
		if err != nil || len(msgs) != 1 || string(msgs[0].Body) != "normal" {
			info, _ := src.Attributes()
			t.Fatalf("a receive with one message Active behind %d due for the dead-letter queue: %d messages, %v (src %+v)", poison, len(msgs), err, info)
		}
		if info, _ := dlq.Attributes(); info.Active != poison {
			t.Errorf("dlq holds %d, want %d", info.Active, poison)
		}
	})
}

// slowRouter stores every move it is given, each taking lat on the
// broker's fake clock (a commit on another node).
type slowRouter struct {
	clk  *FakeClock
	lat  time.Duration
	hops atomic.Int32
}

func (r *slowRouter) Elsewhere(name string) bool { return strings.HasPrefix(name, "far-") }
func (r *slowRouter) Exists(string) bool         { return true }
func (r *slowRouter) CatchUp(string)             {}
func (r *slowRouter) Move(context.Context, string, []MovedMessage) error {
	r.hops.Add(1)
	r.clk.Advance(r.lat)
	return nil
}

// TestReceiveMovesToAnotherShardForASecondAtMost: one receive whose
// queue's dead letters go to another shard, each hop taking 100 ms, stops
// moving after a second (maxMoveTime): it made 256 hops, 5.2 s, for 4,096
// dead letters (review G, 2026-12-06).
func TestReceiveMovesToAnotherShardForASecondAtMost(t *testing.T) {
	clk := NewFakeClock(t0)
	router := &slowRouter{clk: clk}
	b, err := Open(Options{Clock: clk, Logger: testLogger(t), Stripes: 2, DeadLetterRouter: router})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	src := mustQueue(t, b, "src", dlqConfig("far-dlq", 1))
	const poison = 4096
	makePoison(t, src, clk, poison)
	router.lat = 100 * time.Millisecond
	receiveBatch(t, src)
	if h := router.hops.Load(); h > 11 || h < 2 { // a second of 100 ms hops, and the one that crossed it
		t.Fatalf("one receive made %d hops of 100 ms", h)
	}
}

// makePoison sends n messages of priority 1 to src (a queue whose
// MaxReceiveCount is 1 and visibility 10 s, dlqConfig), receives each
// once, and moves the clock on until they are visible again: each is due
// for the dead-letter queue at its next receive.
func makePoison(t *testing.T, src *Queue, clk *FakeClock, n int) {
	t.Helper()
	for i := 0; i < n/MaxBatch; i++ {
		es := make([]SendEntry, MaxBatch)
		for k := range es {
			es[k] = SendEntry{Body: []byte(fmt.Sprintf("poison %d", i*MaxBatch+k)), Priority: 1}
		}
		if _, err := src.Send(es, nil); err != nil {
			t.Fatal(err)
		}
	}
	for got := 0; got < n; {
		msgs := receiveBatch(t, src)
		if len(msgs) == 0 {
			t.Fatalf("received %d of %d", got, n)
		}
		got += len(msgs)
	}
	clk.Advance(11 * time.Second)
}
