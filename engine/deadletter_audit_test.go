package engine

// Dead-letter audit (2026-12-07) probes: MaxReceiveCount boundaries and
// changes while messages are in flight, a cycle, a target with smaller
// limits, across a restart.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// drainClone receives q until it is empty, deleting nothing, with each
// body copied.
func drainClone(t *testing.T, q *Queue) []Message {
	t.Helper()
	var out []Message
	for {
		ms := receiveBatch(t, q)
		if len(ms) == 0 {
			return out
		}
		for _, m := range ms {
			m.Body = bytes.Clone(m.Body)
			out = append(out, m)
		}
	}
}

// MaxReceiveCount 1000 (the maximum): received 1000 times, moved on the
// 1001st receive, not before.
func TestDeadLetterMaxReceiveCountMaximum(t *testing.T) {
	b, clk := openTest(t, Options{Stripes: 2})
	dlq := mustQueue(t, b, "dlq", DefaultQueueConfig())
	cfg := dlqConfig("dlq", MaxMaxReceiveCount)
	cfg.VisibilityTimeout = time.Second
	src := mustQueue(t, b, "src", cfg)
	if _, err := src.Send([]SendEntry{{Body: []byte("p")}}, nil); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= MaxMaxReceiveCount; i++ {
		ms := receiveBatch(t, src)
		if len(ms) != 1 || ms[0].DequeueCount != i {
			t.Fatalf("receive %d: %d messages %+v", i, len(ms), ms)
		}
		clk.Advance(time.Second)
	}
	if ms := receiveBatch(t, src); len(ms) != 0 {
		t.Fatalf("received a %d th time", ms[0].DequeueCount)
	}
	if ms := drainClone(t, dlq); len(ms) != 1 || ms[0].DequeueCount != 1 {
		t.Fatalf("dlq: %+v", ms)
	}
}

// Changes of the policy while a message is in flight: lowered below its
// count, it moves on the next receive; turned off, it is received (its
// count goes on); turned on again, the old count applies.
func TestDeadLetterPolicyChangesInFlight(t *testing.T) {
	b, clk := openTest(t, Options{Stripes: 2})
	dlq := mustQueue(t, b, "dlq", DefaultQueueConfig())
	cfg := dlqConfig("dlq", 5)
	cfg.VisibilityTimeout = time.Second
	src := mustQueue(t, b, "src", cfg)
	if _, err := src.Send([]SendEntry{{Body: []byte("a")}, {Body: []byte("b")}}, nil); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		if ms := receiveBatch(t, src); len(ms) != 2 || ms[0].DequeueCount != i {
			t.Fatalf("receive %d: %+v", i, ms)
		}
		clk.Advance(time.Second)
	}
	off := ""
	if err := b.SetQueueAttributes("src", ConfigPatch{DeadLetterQueue: &off}); err != nil {
		t.Fatal(err)
	}
	if ms := receiveBatch(t, src); len(ms) != 2 || ms[0].DequeueCount != 4 {
		t.Fatalf("policy off: %+v", ms)
	}
	clk.Advance(time.Second)
	on, two := "dlq", 2
	if err := b.SetQueueAttributes("src", ConfigPatch{DeadLetterQueue: &on, MaxReceiveCount: &two}); err != nil {
		t.Fatal(err)
	}
	if ms := receiveBatch(t, src); len(ms) != 0 {
		t.Fatalf("policy 2 after 4 receives: received %+v", ms)
	}
	if ms := drainClone(t, dlq); len(ms) != 2 {
		t.Fatalf("dlq: %d", len(ms))
	}
}

// A cycle a -> b -> a: a message goes round, keeping its first id as
// DLQOriginMessageId and naming the last queue it left as DLQSourceArn.
func TestDeadLetterCycle(t *testing.T) {
	b, clk := openTest(t, Options{Stripes: 2})
	mustQueue(t, b, "a", DefaultQueueConfig())
	cfgB := dlqConfig("a", 1)
	cfgB.VisibilityTimeout = time.Second
	qb := mustQueue(t, b, "b", cfgB)
	on, one, vis := "b", 1, time.Second
	if err := b.SetQueueAttributes("a", ConfigPatch{DeadLetterQueue: &on, MaxReceiveCount: &one, VisibilityTimeout: &vis}); err != nil {
		t.Fatal(err)
	}
	qa, _ := b.Queue("a")
	res, err := qa.Send([]SendEntry{{Body: []byte("x"), Priority: 2}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 3; round++ {
		for _, q := range []*Queue{qa, qb} {
			ms := receiveBatch(t, q)
			if len(ms) != 1 {
				t.Fatalf("round %d %s: %d", round, q.Name(), len(ms))
			}
			if round > 0 || q == qb {
				if o, _ := sysProp(&ms[0], SysDLQOriginMessageID); o != res[0].ID.String() {
					t.Fatalf("round %d %s: origin %s want %s", round, q.Name(), o, res[0].ID)
				}
				if ms[0].Priority != 2 {
					t.Fatalf("priority %d", ms[0].Priority)
				}
			}
			clk.Advance(time.Second)
			if ms := receiveBatch(t, q); len(ms) != 0 { // moves it
				t.Fatalf("received twice")
			}
		}
	}
}

// A target with a smaller MaximumMessageSize, a delay and a shorter
// retention takes the moved message as it is, and keeps it across a
// restart (replay must not refuse it).
func TestDeadLetterSmallerTargetAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	clk := NewFakeClock(t0)
	b := openDurableTest(t, dir, clk, nil)
	tc := DefaultQueueConfig()
	tc.MaxMessageBytes = 1024
	tc.Delay = 5 * time.Second
	tc.Retention = time.Minute
	mustQueue(t, b, "dlq", tc)
	cfg := dlqConfig("dlq", 1)
	cfg.VisibilityTimeout = time.Second
	src := mustQueue(t, b, "src", cfg)
	big := []byte(strings.Repeat("z", 4000))
	if _, err := src.Send([]SendEntry{{Body: big, Properties: testProps(0)}}, nil); err != nil {
		t.Fatal(err)
	}
	receiveBatch(t, src)
	clk.Advance(time.Second)
	if ms := receiveBatch(t, src); len(ms) != 0 {
		t.Fatal("not moved")
	}
	dq, _ := b.Queue("dlq")
	if info, _ := dq.Attributes(); info.Active != 1 {
		t.Fatalf("dlq before restart: %+v", info)
	}
	b.Close()
	b = openDurableTest(t, dir, clk, nil)
	defer b.Close()
	dq, _ = b.Queue("dlq")
	ms := drainClone(t, dq)
	if len(ms) != 1 || !bytes.Equal(ms[0].Body, big) {
		t.Fatalf("dlq after restart: %d messages", len(ms))
	}
}

// The target deleted while the source points at it: inert; made again:
// moves again.
func TestDeadLetterTargetDeletedAndRemade(t *testing.T) {
	b, clk := openTest(t, Options{Stripes: 2})
	mustQueue(t, b, "dlq", DefaultQueueConfig())
	cfg := dlqConfig("dlq", 1)
	cfg.VisibilityTimeout = time.Second
	src := mustQueue(t, b, "src", cfg)
	src.Send([]SendEntry{{Body: []byte("a")}}, nil)
	receiveBatch(t, src)
	clk.Advance(time.Second)
	if err := b.DeleteQueue("dlq"); err != nil {
		t.Fatal(err)
	}
	ms := receiveBatch(t, src)
	if len(ms) != 1 || ms[0].DequeueCount != 2 {
		t.Fatalf("inert policy: %+v", ms)
	}
	// A set of another attribute with the target gone is accepted.
	vis := 2 * time.Second
	if err := b.SetQueueAttributes("src", ConfigPatch{VisibilityTimeout: &vis}); err != nil {
		t.Fatalf("set with target gone: %v", err)
	}
	// An idempotent CreateQueue with the same policy.
	if _, err := b.CreateQueue("src", func() QueueConfig { c := cfg; c.VisibilityTimeout = vis; return c }()); err != nil {
		t.Fatalf("idempotent create with the target gone: %v", err)
	}
	clk.Advance(2 * time.Second)
	d2 := mustQueue(t, b, "dlq", DefaultQueueConfig())
	if ms := receiveBatch(t, src); len(ms) != 0 {
		t.Fatalf("target remade: received %+v", ms)
	}
	if ms := drainClone(t, d2); len(ms) != 1 {
		t.Fatalf("remade dlq: %d", len(ms))
	}
}

// downRouter is the router of a cluster whose dead-letter queue's shard
// has no leader: every hop fails (in a cluster each such hop takes
// moveTimeout, 5 s: cluster/deadletter.go moveDeadLetter routes again
// until its context ends).
type downRouter struct {
	mu   sync.Mutex
	hops int
}

func (r *downRouter) Elsewhere(name string) bool { return strings.HasPrefix(name, "far-") }
func (r *downRouter) Exists(string) bool         { return true }
func (r *downRouter) CatchUp(string)             {}
func (r *downRouter) Move(ctx context.Context, target string, ms []MovedMessage) error {
	r.mu.Lock()
	r.hops++
	r.mu.Unlock()
	return errors.New("test: no leader for the target's shard")
}

// A receive on a queue whose dead-letter queue is on a shard without a
// leader: the docs say the receive waits for the hop, at most 5 s
// (docs/operations.md "Dead-letter queues"), and that a receive returns the
// Active message behind messages due for the move. One receive with
// waitseconds 0 makes five hops (25 s in a cluster), and answers
// MessageNotExist though a message it could return is Active.
func TestDeadLetterElsewhereNoLeaderOneReceive(t *testing.T) {
	r := &downRouter{}
	src := poisonedSource(t, r, 160)
	if _, err := src.Send([]SendEntry{{Body: []byte("good")}}, nil); err != nil {
		t.Fatal(err)
	}
	ms, err := src.Receive(context.Background(), ReceiveOptions{Max: 1, HasWait: true}, nil)
	r.mu.Lock()
	hops := r.hops
	r.mu.Unlock()
	t.Logf("one receive (waitseconds 0): %d messages, err %v, %d hops to the leaderless shard (%v in a cluster)", len(ms), err, hops, time.Duration(hops)*moveTimeout)
	if hops > 1 {
		t.Errorf("one receive made %d hops to a shard without a leader: %v of waiting in a cluster, not at most %v", hops, time.Duration(hops)*moveTimeout, moveTimeout)
	}
	if len(ms) != 1 || string(ms[0].Body) != "good" {
		t.Errorf("the Active message behind the hidden dead letters was not returned: %d messages, %v", len(ms), err)
	}
}

// poisonedSource opens a broker whose dead-letter router is r and returns
// its queue "src", whose dead-letter queue "far-dlq" is elsewhere
// (MaxReceiveCount 1), holding n messages each received once and visible
// again: all due for a move at the next receive.
func poisonedSource(t *testing.T, r DeadLetterRouter, n int) *Queue {
	t.Helper()
	b, clk := openTest(t, Options{Stripes: 1, DeadLetterRouter: r})
	cfg := dlqConfig("far-dlq", 1)
	cfg.VisibilityTimeout = time.Second
	src := mustQueue(t, b, "src", cfg)
	var es []SendEntry
	for i := range n {
		es = append(es, SendEntry{Body: fmt.Appendf(nil, "poison-%d", i)})
		if len(es) == MaxBatch || i == n-1 {
			if _, err := src.Send(es, nil); err != nil {
				t.Fatal(err)
			}
			es = es[:0]
		}
	}
	for len(receiveBatch(t, src)) > 0 {
	}
	clk.Advance(time.Second)
	return src
}
