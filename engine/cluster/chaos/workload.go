package chaos

// The workload: producers send unique bodies and consumers receive and
// delete, each operation through a different node than the last, every
// operation recorded in the history; then a drain that empties the queues
// once the faults are healed.
//
// Invariants:
//  1. Every operation is bounded by the client's timeout; every loop ends
//     when its context is done (Run) or at its deadline (Drain).
//  2. A body is used by one send only (process and sequence number), so
//     the checker can tell messages apart by body.
//  3. Run returns only after every producer and consumer goroutine ended.
//
// Dead letters (DeadLetters set): every eighth send's body starts with
// "poison-", and consumers receive such messages but never delete them, so
// that each is moved to its queue's dead-letter queue after MaxReceive
// receives. The dead-letter queues are drained at the end with the rest.
//
// Topics (Topic set): every fourth of a producer's operations publishes to
// the topic instead of sending, and each queue of Subscribers gets a copy
// (a new message in each; SIMPLIFIED, so the copy's body is the published
// one). In a cluster some subscribers are on the topic's shard, the others
// get their copies through a relay (engine/topic_relay.go). With
// PushEndpoint set, the topic's leader also pushes each publish there
// (CheckPushes).

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Workload drives clients against a cluster.
type Workload struct {
	C          *Cluster
	H          *History
	Queues     []string
	Producers  int
	Consumers  int
	Timeout    time.Duration // each request's bound
	Visibility int           // the queues' VisibilityTimeout, seconds
	SendPause  time.Duration // between a producer's sends

	DeadLetters map[string]string // a queue's dead-letter queue, if any
	MaxReceive  int               // their MaxReceiveCount

	Topic        string   // a topic some sends go to instead, if set
	Subscribers  []string // the queues subscribed to it
	PushEndpoint string   // an HTTP endpoint subscribed to it too, if set

	mu    sync.Mutex
	nodes []int // guarded by mu: the nodes the clients use (SetNodes); nil: C's members
}

// SetNodes sets the nodes the clients use from their next operation on,
// as a load balancer's list does when a node leaves or joins (nil: C's
// members, Cluster.Members).
func (w *Workload) SetNodes(ids []int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.nodes = slices.Clone(ids)
}

// node returns the node of a process's k-th operation, and how many there
// are to pick from.
func (w *Workload) node(k int) (id, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := w.nodes
	if ids == nil {
		ids = w.C.Members()
	}
	return ids[k%len(ids)], len(ids)
}

// Topics returns the topic and its subscribed queues, for the checker.
func (w *Workload) Topics() map[string][]string {
	if w.Topic == "" {
		return nil
	}
	return map[string][]string{w.Topic: w.Subscribers}
}

// poisonPrefix starts the bodies consumers never delete.
const poisonPrefix = "poison-"

// allQueues lists the queues and then their dead-letter queues.
func (w *Workload) allQueues() []string {
	out := slices.Clone(w.Queues)
	for _, q := range w.Queues {
		if d := w.DeadLetters[q]; d != "" && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// clients are a process's clients, one per node, each made when first
// used.
type clients struct {
	w *Workload
	m map[int]*Client
}

func (w *Workload) clients() *clients { return &clients{w: w, m: map[int]*Client{}} }

func (cs *clients) of(id int) *Client {
	c := cs.m[id]
	if c == nil {
		c = NewClient(cs.w.C.api(id), cs.w.C.AccessID, cs.w.C.Secret, cs.w.Timeout)
		cs.m[id] = c
	}
	return c
}

func (cs *clients) close() {
	for _, c := range cs.m {
		c.Close()
	}
}

// CreateQueues creates the queues, then the topic and its subscriptions,
// retrying each through every node until it is made or the deadline
// passes.
func (w *Workload) CreateQueues(timeout time.Duration) error {
	cls := w.clients()
	defer cls.close()
	deadline := time.Now().Add(timeout)
	retry := func(what string, f func(ctx context.Context, c *Client) error) error {
		var err error
		for k := 0; ; k++ {
			ctx, cancel := context.WithTimeout(context.Background(), w.Timeout)
			id, _ := w.node(k)
			err = f(ctx, cls.of(id))
			cancel()
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
	// The dead-letter queues first: a policy names an existing queue.
	queues := w.allQueues()
	queues = append(queues[len(w.Queues):], w.Queues...)
	for _, q := range queues {
		if err := retry("create queue "+q, func(ctx context.Context, c *Client) error {
			return c.CreateQueueWith(ctx, q, w.Visibility, w.DeadLetters[q], w.MaxReceive)
		}); err != nil {
			return err
		}
	}
	if w.Topic == "" {
		return nil
	}
	if err := retry("create topic "+w.Topic, func(ctx context.Context, c *Client) error { return c.CreateTopic(ctx, w.Topic) }); err != nil {
		return err
	}
	for _, q := range w.Subscribers {
		if err := retry("subscribe "+q, func(ctx context.Context, c *Client) error { return c.Subscribe(ctx, w.Topic, "to-"+q, q) }); err != nil {
			return err
		}
	}
	if w.PushEndpoint != "" {
		return retry("subscribe "+w.PushEndpoint, func(ctx context.Context, c *Client) error {
			return c.SubscribeHTTP(ctx, w.Topic, "to-web", w.PushEndpoint)
		})
	}
	return nil
}

// Run runs the producers and consumers until ctx is done.
func (w *Workload) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for p := 0; p < w.Producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.produce(ctx, p)
		}()
	}
	for c := 0; c < w.Consumers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.consume(ctx, w.Producers+c)
		}()
	}
	wg.Wait()
}

// pause waits d, or less when ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (w *Workload) produce(ctx context.Context, p int) {
	cls := w.clients()
	defer cls.close()
	for seq := 0; ctx.Err() == nil; seq++ {
		node, _ := w.node(p + seq)
		q := w.Queues[rand.IntN(len(w.Queues))]
		body := fmt.Sprintf("p%d-%d", p, seq)
		if w.DeadLetters[q] != "" && seq%8 == 7 {
			body = poisonPrefix + body
		}
		kind := OpSend
		if w.Topic != "" && seq%4 == 1 {
			kind, q, body = OpPublish, w.Topic, fmt.Sprintf("t%d-%d", p, seq)
		}
		op := w.H.Invoke(Op{Process: p, Kind: kind, Node: node, Queue: q, Body: body})
		rctx, cancel := context.WithTimeout(context.Background(), w.Timeout)
		var id string
		var err error
		if kind == OpPublish {
			id, err = cls.of(node).Publish(rctx, q, op.Body)
		} else {
			id, err = cls.of(node).Send(rctx, q, op.Body)
		}
		cancel()
		w.H.Done(op, err, func(o *Op) { o.MessageID = id })
		if err != nil {
			pause(ctx, 20*time.Millisecond)
		} else if w.SendPause > 0 {
			pause(ctx, w.SendPause)
		}
	}
}

// consume receives and deletes until ctx is done. Deletes go through the
// next nodes, not the one that received.
func (w *Workload) consume(ctx context.Context, p int) {
	cls := w.clients()
	defer cls.close()
	for k := 0; ctx.Err() == nil; k++ {
		node, _ := w.node(p + k)
		q := w.Queues[k%len(w.Queues)]
		op := w.H.Invoke(Op{Process: p, Kind: OpReceive, Node: node, Queue: q})
		rctx, cancel := context.WithTimeout(context.Background(), w.Timeout)
		ms, err := cls.of(node).Receive(rctx, q, 8, 1)
		cancel()
		w.H.Done(op, err, func(o *Op) { o.Received = ms })
		if err != nil {
			pause(ctx, 20*time.Millisecond)
			continue
		}
		for i, m := range ms {
			if strings.HasPrefix(m.Body, poisonPrefix) {
				continue // never deleted: moved to the dead-letter queue
			}
			dn, _ := w.node(p + k + i + 1)
			d := w.H.Invoke(Op{Process: p, Kind: OpDelete, Node: dn, Queue: q, Body: m.Body, MessageID: m.MessageID, Handle: m.Handle})
			rctx, cancel := context.WithTimeout(context.Background(), w.Timeout)
			err := cls.of(dn).Delete(rctx, q, m.Handle)
			cancel()
			w.H.Done(d, err, nil)
		}
	}
}

// drainersPerQueue is how many clients drain each queue at once: one
// client, deleting one message at a time, left some 61,000 of
// TestChaosSyncInterval's messages after 3 minutes (docs/chaos.md, stops
// 68 and 69); with two per queue it drained them (stop 70).
const drainersPerQueue = 2

// Drain receives and deletes until every queue has stayed empty through
// every node for quiet (longer than the visibility timeout plus any clock
// skew, so that a message received but not deleted is visible again), or
// until timeout passes (an error: the history cannot say what is left).
// Each queue has drainersPerQueue clients, each its own process in the
// history, and none stops before every queue is quiet: a queue drained
// first can still get a dead letter or a relayed delivery.
func (w *Workload) Drain(quiet, timeout time.Duration) error {
	queues := w.allQueues()
	start := time.Now()
	deadline := start.Add(timeout)
	lastSeen := make([]atomic.Int64, len(queues))
	for i := range lastSeen {
		lastSeen[i].Store(start.UnixNano())
	}
	allQuiet := func() bool {
		for i := range lastSeen {
			if time.Since(time.Unix(0, lastSeen[i].Load())) <= quiet {
				return false
			}
		}
		return true
	}
	var done atomic.Bool
	var drained atomic.Int64
	var wg sync.WaitGroup
	for j := range drainersPerQueue * len(queues) {
		qi := j % len(queues)
		wg.Go(func() {
			cls := w.clients()
			defer cls.close()
			q := queues[qi]
			for k := j; !done.Load() && time.Now().Before(deadline); k++ {
				node, _ := w.node(k)
				op := w.H.Invoke(Op{Process: -1 - j, Kind: OpReceive, Node: node, Queue: q})
				rctx, cancel := context.WithTimeout(context.Background(), w.Timeout)
				ms, err := cls.of(node).Receive(rctx, q, 16, 0)
				cancel()
				w.H.Done(op, err, func(o *Op) { o.Received = ms })
				if err != nil || len(ms) > 0 {
					lastSeen[qi].Store(time.Now().UnixNano())
				} else if allQuiet() {
					done.Store(true)
					return
				}
				for _, m := range ms {
					d := w.H.Invoke(Op{Process: -1 - j, Kind: OpDelete, Node: node, Queue: q, Body: m.Body, MessageID: m.MessageID, Handle: m.Handle})
					rctx, cancel := context.WithTimeout(context.Background(), w.Timeout)
					err := cls.of(node).Delete(rctx, q, m.Handle)
					cancel()
					w.H.Done(d, err, nil)
					if err == nil {
						drained.Add(1)
					}
				}
				if len(ms) == 0 {
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	if !done.Load() {
		return fmt.Errorf("drain: queues not quiet after %v (%d messages deleted by then)", timeout, drained.Load())
	}
	return nil
}
