package engine

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// twoBrokers is a router between a source broker and a target broker that
// holds the queues named "far-*", as a cluster's shards are. It can refuse
// a hop, or store the batch and then say it failed (a lost answer).
type twoBrokers struct {
	target *Broker

	mu       sync.Mutex
	refuse   int // hops still to refuse before storing anything
	loseNext int // hops still to store and then report failed
	hops     int
	maxBytes int // the largest hop's bodies
}

func (r *twoBrokers) Elsewhere(name string) bool { return strings.HasPrefix(name, "far-") }

func (r *twoBrokers) Exists(name string) bool {
	_, err := r.target.Queue(name)
	return err == nil
}

func (r *twoBrokers) CatchUp(string) {}

func (r *twoBrokers) Move(ctx context.Context, target string, ms []MovedMessage) error {
	size := 0
	for i := range ms {
		size += len(ms[i].Body)
	}
	r.mu.Lock()
	r.hops++
	r.maxBytes = max(r.maxBytes, size)
	refuse, lose := r.refuse > 0, r.refuse == 0 && r.loseNext > 0
	if refuse {
		r.refuse--
	} else if lose {
		r.loseNext--
	}
	r.mu.Unlock()
	if refuse {
		return errors.New("test: the hop failed")
	}
	q, err := r.target.Queue(target)
	if err != nil {
		return err
	}
	if err := q.AcceptMoved(ms); err != nil {
		return err
	}
	if lose {
		return errors.New("test: the answer was lost")
	}
	return nil
}

// A policy naming a queue of another broker moves a message received
// MaxReceiveCount times there, as a local move does (body, properties,
// priority, EnqueueTime and expiry kept, DequeueCount 0, the DLQ
// properties), and deletes the source only once the copy is stored: a
// refused hop leaves the message in the source, to be moved when its hide
// ends; a lost answer leaves a second copy, never none.
func TestDeadLetterElsewhere(t *testing.T) {
	bothModes(t, func(t *testing.T) {
		durable := strings.HasSuffix(t.Name(), "durable")
		clk := NewFakeClock(t0)
		far, err := Open(Options{Clock: clk, Logger: testLogger(t), Stripes: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer far.Close()
		router := &twoBrokers{target: far}
		dir := t.TempDir()
		open := func() *Broker {
			if durable {
				return openDurableTest(t, dir, clk, func(o *Options) { o.DeadLetterRouter = router })
			}
			b, err := Open(Options{Clock: clk, Logger: testLogger(t), Stripes: 2, DeadLetterRouter: router})
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		b := open()
		defer func() { b.Close() }()

		// The policy's target must exist where the router looks.
		if _, err := b.CreateQueue("src", dlqConfig("far-dlq", 2)); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "does not exist") {
			t.Fatalf("a policy naming a missing queue elsewhere: %v", err)
		}
		dlq := mustQueue(t, far, "far-dlq", DefaultQueueConfig())
		src := mustQueue(t, b, "src", dlqConfig("far-dlq", 2))

		res, err := src.Send([]SendEntry{
			{Body: []byte("poison-1"), Priority: 3, Properties: testProps(0)},
			{Body: []byte("poison-2")},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		enq := clk.Now().UnixMilli()
		for round := 1; round <= 2; round++ {
			if msgs := receiveBatch(t, src); len(msgs) != 2 || msgs[0].DequeueCount != round {
				t.Fatalf("round %d: %d messages", round, len(msgs))
			}
			clk.Advance(10 * time.Second)
		}

		// The hop fails: the receive does not, and nothing leaves src.
		router.refuse = 1
		if msgs := receiveBatch(t, src); len(msgs) != 0 {
			t.Fatalf("received %q a third time", msgs[0].Body)
		}
		if si, _ := src.Attributes(); si.Inactive != 2 {
			t.Fatalf("after a refused hop the source holds %+v, want both messages hidden", si)
		}
		if di, _ := dlq.Attributes(); di.Active != 0 {
			t.Fatalf("after a refused hop the dead-letter queue holds %+v", di)
		}
		// Before the hide ends nothing is moved again.
		if msgs := receiveBatch(t, src); len(msgs) != 0 || router.hops != 1 {
			t.Fatalf("during the hide: %d received, %d hops", len(msgs), router.hops)
		}

		// The hide ends; the next receive moves them, and the answer is
		// lost: both copies stay.
		clk.Advance(10 * time.Second)
		router.loseNext = 1
		if msgs := receiveBatch(t, src); len(msgs) != 0 {
			t.Fatalf("received %q after the hide", msgs[0].Body)
		}
		if si, _ := src.Attributes(); si.Inactive != 2 {
			t.Fatalf("after a lost answer the source holds %+v", si)
		}
		// And once more, answered: the sources go.
		clk.Advance(10 * time.Second)
		if msgs := receiveBatch(t, src); len(msgs) != 0 {
			t.Fatalf("received %q after the second hide", msgs[0].Body)
		}
		if si, _ := src.Attributes(); si.Active+si.Inactive+si.Delayed != 0 {
			t.Fatalf("after the move the source holds %+v", si)
		}
		if src.deadLettered.Load() != 2 {
			t.Fatalf("dead-lettered %d", src.deadLettered.Load())
		}
		checkInvariants(t, src)
		checkInvariants(t, dlq)

		msgs, err := dlq.Peek(MaxBatch, nil)
		if err != nil || len(msgs) != 4 {
			t.Fatalf("dead-letter queue: %d messages (%v), want 4 (two moves of two)", len(msgs), err)
		}
		copies := map[string]int{}
		for i := range msgs {
			m := &msgs[i]
			origin, _ := sysProp(m, SysDLQOriginMessageID)
			copies[origin]++
			want := res[1].ID.String()
			if string(m.Body) == "poison-1" {
				want = res[0].ID.String()
				if m.Priority != 3 || len(m.Properties) != 6 || string(m.Properties[0].Name) != "order" {
					t.Fatalf("poison-1 moved as %+v", m)
				}
			}
			if origin != want || m.DequeueCount != 0 || m.EnqueueTime.UnixMilli() != enq {
				t.Fatalf("%s moved as %+v (origin %s, want %s)", m.Body, m, origin, want)
			}
			for name, want := range map[string]string{SysDLQMessageType: "QUEUE", SysDLQSourceArn: b.DeadLetterSourceArn("src")} {
				if v, ok := sysProp(m, name); !ok || v != want {
					t.Fatalf("%s: %s = %q, want %q", m.Body, name, v, want)
				}
			}
		}
		if copies[res[0].ID.String()] != 2 || copies[res[1].ID.String()] != 2 {
			t.Fatalf("copies per origin %v", copies)
		}
		if durable {
			crashBroker(b)
			b = open()
			src, _ = b.Queue("src")
			if si, _ := src.Attributes(); si.Active+si.Inactive+si.Delayed != 0 {
				t.Fatalf("after restart the source holds %+v", si)
			}
		}
		// The moved messages keep the retention they had: an hour after
		// the send they are gone from the dead-letter queue.
		clk.Advance(time.Hour - 40*time.Second)
		if di, _ := dlq.Attributes(); di.Active+di.Inactive != 0 {
			t.Fatalf("moved messages outlived their retention: %+v", di)
		}
	})
}

// A policy whose target elsewhere is gone is inert: the messages are
// received as if there were none, with no hop.
func TestDeadLetterElsewhereTargetGone(t *testing.T) {
	clk := NewFakeClock(t0)
	far, err := Open(Options{Clock: clk, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer far.Close()
	router := &twoBrokers{target: far}
	b, err := Open(Options{Clock: clk, Logger: testLogger(t), DeadLetterRouter: router})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	mustQueue(t, far, "far-dlq", DefaultQueueConfig())
	src := mustQueue(t, b, "src", dlqConfig("far-dlq", 1))
	if _, err := src.Send([]SendEntry{{Body: []byte("x")}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := far.DeleteQueue("far-dlq"); err != nil {
		t.Fatal(err)
	}
	for round := 1; round <= 3; round++ {
		msgs := receiveBatch(t, src)
		if len(msgs) != 1 || msgs[0].DequeueCount != round {
			t.Fatalf("round %d: %+v", round, msgs)
		}
		clk.Advance(10 * time.Second)
	}
	if router.hops != 0 {
		t.Fatalf("%d hops to a queue that is gone", router.hops)
	}
}

// AcceptMoved checks the whole batch first: a bad entry stores nothing.
func TestAcceptMovedRefusesBadEntries(t *testing.T) {
	clk := NewFakeClock(t0)
	b, err := Open(Options{Clock: clk, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	q := mustQueue(t, b, "dlq", DefaultQueueConfig())
	now := clk.Now().UnixMilli()
	good := MovedMessage{Body: []byte("ok"), EnqueueMs: now - 1000, ExpireMs: now + 60_000, Priority: 8}
	for _, c := range []struct {
		what string
		bad  func(m *MovedMessage)
	}{
		{"an empty body", func(m *MovedMessage) { m.Body = nil }},
		{"a body over the limit", func(m *MovedMessage) { m.Body = make([]byte, MaxMessageBytes+1) }},
		{"priority 0", func(m *MovedMessage) { m.Priority = 0 }},
		{"priority 17", func(m *MovedMessage) { m.Priority = MaxPriority + 1 }},
		{"expired", func(m *MovedMessage) { m.ExpireMs = now }},
		{"no enqueue time", func(m *MovedMessage) { m.EnqueueMs = 0 }},
		{"an enqueue time two hours ahead", func(m *MovedMessage) { m.EnqueueMs = now + 2*3600_000; m.ExpireMs = m.EnqueueMs + 1 }},
		{"an expiry past what a slot holds", func(m *MovedMessage) { m.ExpireMs = m.EnqueueMs + 1<<33 }},
		{"a torn properties block", func(m *MovedMessage) { m.Props = []byte{0, 1, 5} }},
	} {
		bad := good
		c.bad(&bad)
		err := q.AcceptMoved([]MovedMessage{good, bad})
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v, want an argument error", c.what, err)
		}
		if qi, _ := q.Attributes(); qi.Active != 0 {
			t.Fatalf("%s: stored %+v", c.what, qi)
		}
	}
	if err := q.AcceptMoved(nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("an empty batch: %v", err)
	}
	if err := q.AcceptMoved([]MovedMessage{good}); err != nil {
		t.Fatal(err)
	}
	msgs := receiveBatch(t, q)
	if len(msgs) != 1 || string(msgs[0].Body) != "ok" || msgs[0].Priority != 8 || msgs[0].EnqueueTime.UnixMilli() != now-1000 {
		t.Fatalf("accepted %+v", msgs)
	}
	checkInvariants(t, q)
}
