package peers

// The NATS JetStream peer: one stream per queue (work-queue retention,
// file storage, subject = stream name) and one durable pull consumer per
// stream shared by all bench consumers (explicit ack, ack wait = the
// visibility timeout). A batch send is max asynchronous publishes followed
// by a wait for all their acks (one batch, one round trip's worth of
// waiting); a single send is a synchronous publish. A receive is a
// no-wait fetch of up to max messages and, when that finds none, a fetch
// of one that waits (a plain Fetch(max) would wait for all max). Delete
// acks each message and then flushes the connection (a PING/PONG round
// trip, so the acks reached the server, like one BatchDeleteMessage).
// Priorities and delays are not supported.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/smqd/smqd/bench"
)

// NATSTarget drives a NATS server with JetStream.
type NATSTarget struct {
	url     string
	ackWait time.Duration
	streams []string
	nc      *nats.Conn
	js      jetstream.JetStream
}

// NewNATSTarget returns a target for the server at url.
func NewNATSTarget(url string, ackWait time.Duration) *NATSTarget {
	if ackWait <= 0 {
		ackWait = 30 * time.Second
	}
	return &NATSTarget{url: url, ackWait: ackWait}
}

// NATS describes the NATS JetStream peer; the visibility timeout is the
// consumer's ack wait.
func (catalog) NATS() bench.Peer {
	return bench.Peer{Name: "nats", DefaultAddr: "nats://127.0.0.1:4222", New: func(o bench.PeerOptions) (bench.Target, error) {
		return NewNATSTarget(o.Addr, o.VisibilityTimeout), nil
	}}
}

// Name returns "nats".
func (t *NATSTarget) Name() string { return "nats" }

const natsConsumer = "smqbench"

func (t *NATSTarget) connect() (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(t.url, nats.Name("smqbench"), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		return nil, nil, fmt.Errorf("nats: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("nats: %w", err)
	}
	return nc, js, nil
}

// Prepare creates one stream and its consumer per queue (deleting the
// stream first when fresh).
func (t *NATSTarget) Prepare(ctx context.Context, names []string, fresh bool) error {
	if t.nc == nil {
		nc, js, err := t.connect()
		if err != nil {
			return err
		}
		t.nc, t.js = nc, js
	}
	t.streams = t.streams[:0]
	for _, n := range names {
		s := "SMQBENCH_" + n
		t.streams = append(t.streams, s)
		if fresh {
			if err := t.js.DeleteStream(ctx, s); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
				return fmt.Errorf("nats delete stream: %w", err)
			}
		}
		st, err := t.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
			Name: s, Subjects: []string{s}, Retention: jetstream.WorkQueuePolicy,
			Storage: jetstream.FileStorage, Replicas: 1,
		})
		if err != nil {
			return fmt.Errorf("nats create stream: %w", err)
		}
		if _, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
			Durable: natsConsumer, AckPolicy: jetstream.AckExplicitPolicy,
			AckWait: t.ackWait, MaxAckPending: -1, MaxWaiting: 4096,
		}); err != nil {
			return fmt.Errorf("nats create consumer: %w", err)
		}
	}
	return nil
}

// Backlog returns the stream's message count (acked messages leave a
// work-queue stream; unacked ones stay).
func (t *NATSTarget) Backlog(ctx context.Context, i int) (int64, error) {
	st, err := t.js.Stream(ctx, t.streams[i])
	if err != nil {
		return 0, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, err
	}
	return int64(info.State.Msgs), nil
}

// Close closes the admin connection.
func (t *NATSTarget) Close() error {
	if t.nc != nil {
		t.nc.Close()
	}
	return nil
}

// NewClient connects one worker.
func (t *NATSTarget) NewClient(ctx context.Context) (bench.Client, error) {
	nc, js, err := t.connect()
	if err != nil {
		return nil, err
	}
	return &natsClient{t: t, nc: nc, js: js, cons: map[int]jetstream.Consumer{}}, nil
}

// natsClient is one worker's connection. Owned by one goroutine.
type natsClient struct {
	t       *NATSTarget
	nc      *nats.Conn
	js      jetstream.JetStream
	cons    map[int]jetstream.Consumer
	futures []jetstream.PubAckFuture
	pending []jetstream.Msg
	queue   int
}

func (c *natsClient) Close() error {
	c.nc.Close()
	return nil
}

func (c *natsClient) Send(ctx context.Context, i int, msgs []bench.Outgoing) (int, error) {
	subj := c.t.streams[i]
	for k := range msgs {
		if msgs[k].Priority != 0 || msgs[k].Delay != 0 {
			return 0, fmt.Errorf("nats: priorities and delays: %w", bench.ErrUnsupported)
		}
	}
	if len(msgs) == 1 {
		if _, err := c.js.Publish(ctx, subj, msgs[0].Body); err != nil {
			return 0, err
		}
		return 1, nil
	}
	c.futures = c.futures[:0]
	for k := range msgs {
		f, err := c.js.PublishAsync(subj, msgs[k].Body)
		if err != nil {
			return 0, err
		}
		c.futures = append(c.futures, f)
	}
	ok := 0
	var first error
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for _, f := range c.futures {
		select {
		case <-f.Ok():
			ok++
		case err := <-f.Err():
			if first == nil {
				first = err
			}
		case <-timeout.C:
			return ok, errors.New("nats: publish acks timed out")
		}
	}
	return ok, first
}

func (c *natsClient) consumer(ctx context.Context, i int) (jetstream.Consumer, error) {
	if cons, ok := c.cons[i]; ok {
		return cons, nil
	}
	cons, err := c.js.Consumer(ctx, c.t.streams[i], natsConsumer)
	if err != nil {
		return nil, err
	}
	c.cons[i] = cons
	return cons, nil
}

func (c *natsClient) Receive(ctx context.Context, i int, max int, wait time.Duration, fn func(body []byte)) (int, error) {
	if len(c.pending) > 0 && c.queue != i {
		return 0, errors.New("bench: receive from another queue with deletes pending")
	}
	c.queue = i
	cons, err := c.consumer(ctx, i)
	if err != nil {
		return 0, err
	}
	batch, err := cons.FetchNoWait(max)
	if err != nil {
		return 0, err
	}
	n, err := c.collect(batch, fn)
	if n > 0 || err != nil || wait <= 0 {
		return n, err
	}
	batch, err = cons.Fetch(1, jetstream.FetchMaxWait(wait))
	if err != nil {
		return 0, err
	}
	return c.collect(batch, fn)
}

func (c *natsClient) collect(b jetstream.MessageBatch, fn func([]byte)) (int, error) {
	n := 0
	for m := range b.Messages() {
		c.pending = append(c.pending, m)
		if fn != nil {
			fn(m.Data())
		}
		n++
	}
	if err := b.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
		return n, err
	}
	return n, nil
}

func (c *natsClient) Pending() int { return len(c.pending) }

func (c *natsClient) Delete(ctx context.Context, n int) (int, error) {
	if n > len(c.pending) {
		n = len(c.pending)
	}
	ok := 0
	var first error
	for _, m := range c.pending[:n] {
		if err := m.Ack(); err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		ok++
	}
	rest := copy(c.pending, c.pending[n:])
	clear(c.pending[rest:])
	c.pending = c.pending[:rest]
	if err := c.nc.FlushTimeout(10 * time.Second); err != nil && first == nil {
		first = err
	}
	if first != nil {
		return ok, fmt.Errorf("nats ack: %w", first)
	}
	return ok, nil
}
