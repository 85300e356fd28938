package bench

// The in-process target: the engine's public API called directly, to
// separate the cost of the engine from the cost of HTTP.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/smqd/smqd/engine"
)

// InprocTarget drives an engine.Broker in this process.
type InprocTarget struct {
	b      *engine.Broker
	own    bool // Close closes b
	vt     time.Duration
	queues []*engine.Queue
	topic  string // the publish workload's topic (PrepareTopic)
}

// OpenInproc opens a broker with opts (opts.Dir empty: in memory) and
// returns a target that closes it on Close. visibility is the queues'
// VisibilityTimeout (0: 30 s).
func OpenInproc(opts engine.Options, visibility time.Duration) (*InprocTarget, error) {
	b, err := engine.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("open engine: %w", err)
	}
	t := NewInproc(b, visibility)
	t.own = true
	return t, nil
}

// NewInproc returns a target over an open broker (not closed by Close).
func NewInproc(b *engine.Broker, visibility time.Duration) *InprocTarget {
	if visibility <= 0 {
		visibility = 30 * time.Second
	}
	return &InprocTarget{b: b, vt: visibility}
}

// Broker returns the broker driven.
func (t *InprocTarget) Broker() *engine.Broker { return t.b }

// Name returns "inproc".
func (t *InprocTarget) Name() string { return "inproc" }

// Prepare creates the queues.
func (t *InprocTarget) Prepare(ctx context.Context, names []string, fresh bool) error {
	cfg := engine.DefaultQueueConfig()
	cfg.VisibilityTimeout = t.vt
	t.queues = t.queues[:0]
	for _, n := range names {
		if fresh {
			if err := t.b.DeleteQueue(n); err != nil && !errors.Is(err, engine.ErrQueueNotExist) {
				return err
			}
		}
		if _, err := t.b.CreateQueue(n, cfg); err != nil && !(errors.Is(err, engine.ErrQueueAlreadyExist) && !fresh) {
			return fmt.Errorf("create queue %s: %w", n, err)
		}
		q, err := t.b.Queue(n)
		if err != nil {
			return err
		}
		t.queues = append(t.queues, q)
	}
	return nil
}

// Backlog returns Active+Inactive+Delayed of queue i.
func (t *InprocTarget) Backlog(ctx context.Context, i int) (int64, error) {
	a, err := t.queues[i].Attributes()
	if err != nil {
		return 0, err
	}
	return a.Active + a.Inactive + a.Delayed, nil
}

// Close closes the broker if OpenInproc opened it.
func (t *InprocTarget) Close() error {
	if t.own {
		return t.b.Close()
	}
	return nil
}

// NewClient returns a worker's client.
func (t *InprocTarget) NewClient(ctx context.Context) (Client, error) {
	return &inprocClient{
		t:       t,
		entries: make([]engine.SendEntry, 0, engine.MaxBatch),
		results: make([]engine.SendResult, 0, engine.MaxBatch),
		msgs:    make([]engine.Message, 0, engine.MaxBatch),
		errs:    make([]error, engine.MaxBatch),
	}, nil
}

// inprocClient is one worker's scratch. Owned by one goroutine.
type inprocClient struct {
	t       *InprocTarget
	entries []engine.SendEntry
	results []engine.SendResult
	msgs    []engine.Message
	pending []engine.ReceiptHandle
	queue   int
	errs    []error
}

func (c *inprocClient) Send(ctx context.Context, i int, msgs []Outgoing) (int, error) {
	c.entries = c.entries[:0]
	for k := range msgs {
		m := &msgs[k]
		c.entries = append(c.entries, engine.SendEntry{
			Body: m.Body, Priority: m.Priority,
			Delay: time.Duration(m.Delay) * time.Second, HasDelay: m.Delay > 0,
		})
	}
	var err error
	c.results, err = c.t.queues[i].Send(c.entries, c.results[:0])
	if err != nil {
		return 0, err
	}
	ok := 0
	var first error
	for _, r := range c.results {
		if r.Err == nil {
			ok++
		} else if first == nil {
			first = r.Err
		}
	}
	if first != nil {
		return ok, &PartialError{Failed: len(msgs) - ok, Code: first.Error()}
	}
	return ok, nil
}

func (c *inprocClient) Receive(ctx context.Context, i int, max int, wait time.Duration, fn func(body []byte)) (int, error) {
	if len(c.pending) > 0 && c.queue != i {
		return 0, errors.New("bench: receive from another queue with deletes pending")
	}
	c.queue = i
	var err error
	c.msgs, err = c.t.queues[i].Receive(ctx, engine.ReceiveOptions{Max: max, Wait: wait, HasWait: true}, c.msgs[:0])
	if errors.Is(err, engine.ErrMessageNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	for k := range c.msgs {
		c.pending = append(c.pending, c.msgs[k].Handle)
		if fn != nil {
			fn(c.msgs[k].Body)
		}
	}
	return len(c.msgs), nil
}

func (c *inprocClient) Pending() int { return len(c.pending) }

func (c *inprocClient) Delete(ctx context.Context, n int) (int, error) {
	if n > len(c.pending) {
		n = len(c.pending)
	}
	if n == 0 {
		return 0, nil
	}
	failed, err := c.t.queues[c.queue].Delete(c.pending[:n], c.errs[:n])
	rest := copy(c.pending, c.pending[n:])
	c.pending = c.pending[:rest]
	if err != nil {
		return 0, err
	}
	if failed > 0 {
		code := ""
		for _, e := range c.errs[:n] {
			if e != nil {
				code = e.Error()
				break
			}
		}
		return n - failed, &PartialError{Failed: failed, Code: code}
	}
	return n, nil
}

func (c *inprocClient) Close() error { return nil }
