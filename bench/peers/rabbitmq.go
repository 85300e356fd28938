package peers

// The RabbitMQ peer: quorum queues (x-queue-type quorum, durable; the
// queue is a Raft group over the cluster's nodes, all of them by default,
// so 1 replica on a single node and 3 on a 3-node cluster) driven through
// github.com/rabbitmq/amqp091-go, one AMQP connection per bench client.
//
//	send     on a channel in confirm mode, N basic.publish to the default
//	         exchange with the queue's name as routing key (persistent),
//	         then a wait for all N publisher confirms. A quorum queue
//	         confirms a message once a majority of its members has written
//	         it to its Raft log and fsynced that log (RabbitMQ's WAL fsyncs
//	         before it reports the write, and the leader counts a member only
//	         then), so a confirm is the "always" class.
//	receive  basic.consume with manual acks on a channel of its own per
//	         queue, with basic.qos prefetch = the receive batch: the broker
//	         pushes at most that many unacked messages to the client. A
//	         receive takes what has been pushed, up to max, waiting up to
//	         wait for the first.
//	delete   basic.ack of the n oldest pending deliveries (one frame,
//	         multiple=true: the channel has no other consumer, so every
//	         earlier tag is among them). AMQP has no reply to an ack: the
//	         delete returns when the frame is written, without the round
//	         trip (and the fsynced settle) that an MNS delete and the NATS
//	         peer's flush wait for, which favours RabbitMQ.
//	redeliver  RabbitMQ has no visibility timeout: an unacked message goes
//	         back to the queue when its channel or connection closes (or
//	         after consumer_timeout, 30 min by default). The bench's
//	         visibility timeout is ignored.
//
// Backlog is the queue's ready messages (a passive queue.declare) plus the
// messages the bench's clients received and have not acked yet; messages
// pushed to a client and not yet taken by a receive (at most the prefetch
// per consumer and queue) are counted by neither. Priorities and delays
// are not supported (a quorum queue has no priorities in RabbitMQ 3.10 and
// delays need a plugin): those scenarios return bench.ErrUnsupported.
//
// The address is host:port or an amqp:// URL, or several separated by
// commas (the nodes of a cluster): clients are spread over them round
// robin, and Prepare uses the first; the target is then named "rabbitmqN"
// in results. A host:port gets guest's credentials, which RabbitMQ accepts
// from loopback only.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/smqd/smqd/bench"
)

// RabbitMQTarget drives RabbitMQ quorum queues.
type RabbitMQTarget struct {
	urls   []string
	queues []string
	// unacked[i] counts messages of queue i that clients received and have
	// not acked yet.
	unacked []atomic.Int64
	admin   *amqp.Connection
	mu      sync.Mutex
	next    int // client counter; guarded by mu
}

// rabbitURLs turns a comma-separated list of host:port or amqp(s):// URLs
// into URLs.
func rabbitURLs(addr string) ([]string, error) {
	var urls []string
	for _, a := range strings.Split(addr, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if !strings.HasPrefix(a, "amqp://") && !strings.HasPrefix(a, "amqps://") {
			a = "amqp://guest:guest@" + a + "/"
		}
		if _, err := amqp.ParseURI(a); err != nil {
			return nil, fmt.Errorf("rabbitmq: address %q: %w", a, err)
		}
		urls = append(urls, a)
	}
	if len(urls) == 0 {
		return nil, errors.New("rabbitmq: no address")
	}
	return urls, nil
}

// NewRabbitMQTarget returns a target for the node(s) at addr (see the
// file's comment). It connects in Prepare.
func NewRabbitMQTarget(addr string) (*RabbitMQTarget, error) {
	urls, err := rabbitURLs(addr)
	if err != nil {
		return nil, err
	}
	return &RabbitMQTarget{urls: urls}, nil
}

// RabbitMQ describes the RabbitMQ quorum-queue peer.
func (catalog) RabbitMQ() bench.Peer {
	return bench.Peer{Name: "rabbitmq", DefaultAddr: "127.0.0.1:5672", New: func(o bench.PeerOptions) (bench.Target, error) {
		return NewRabbitMQTarget(o.Addr)
	}}
}

// Name returns "rabbitmq" for one node, and "rabbitmqN" for N nodes (a
// cluster: "rabbitmq3"), so that reports keep the two apart.
func (t *RabbitMQTarget) Name() string {
	if len(t.urls) > 1 {
		return "rabbitmq" + strconv.Itoa(len(t.urls))
	}
	return "rabbitmq"
}

func (t *RabbitMQTarget) dial(url string) (*amqp.Connection, error) {
	c, err := amqp.DialConfig(url, amqp.Config{
		Heartbeat: 10 * time.Second,
		Dial:      amqp.DefaultDial(10 * time.Second),
		Properties: amqp.Table{
			"connection_name": "smqbench",
		},
	})
	if err != nil {
		return nil, fmt.Errorf("rabbitmq: %w", err)
	}
	return c, nil
}

// Prepare declares one quorum queue per name (deleting it first when
// fresh). A quorum queue declared again right after its delete may be
// refused (INTERNAL_ERROR, which closes the channel) while its old Raft
// members are still being torn down: the declare is tried again for up to
// 20 s on a new channel.
func (t *RabbitMQTarget) Prepare(ctx context.Context, names []string, fresh bool) error {
	if t.admin == nil || t.admin.IsClosed() {
		c, err := t.dial(t.urls[0])
		if err != nil {
			return err
		}
		t.admin = c
	}
	t.queues = t.queues[:0]
	for _, n := range names {
		q := "smqbench-" + n
		t.queues = append(t.queues, q)
		if err := t.declare(ctx, q, fresh); err != nil {
			return err
		}
	}
	t.unacked = make([]atomic.Int64, len(names))
	return nil
}

// declare (re)creates quorum queue q on a channel of its own.
func (t *RabbitMQTarget) declare(ctx context.Context, q string, fresh bool) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		ch, err := t.admin.Channel()
		if err != nil {
			return fmt.Errorf("rabbitmq: %w", err)
		}
		if fresh {
			if _, err := ch.QueueDelete(q, false, false, false); err != nil {
				return fmt.Errorf("rabbitmq: delete %s: %w", q, err)
			}
			fresh = false
		}
		_, err = ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
		ch.Close()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil || t.admin.IsClosed() {
			return fmt.Errorf("rabbitmq: declare %s: %w", q, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Backlog returns queue i's ready messages plus those received and not
// acked by the bench's clients.
func (t *RabbitMQTarget) Backlog(ctx context.Context, i int) (int64, error) {
	ch, err := t.admin.Channel()
	if err != nil {
		return 0, fmt.Errorf("rabbitmq: %w", err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(t.queues[i], true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
	if err != nil {
		return 0, fmt.Errorf("rabbitmq: %w", err)
	}
	return int64(q.Messages) + t.unacked[i].Load(), nil
}

// Close closes the admin connection.
func (t *RabbitMQTarget) Close() error {
	if t.admin != nil {
		return t.admin.Close()
	}
	return nil
}

// NewClient connects one worker to the next node, round robin.
func (t *RabbitMQTarget) NewClient(ctx context.Context) (bench.Client, error) {
	t.mu.Lock()
	url := t.urls[t.next%len(t.urls)]
	t.next++
	t.mu.Unlock()
	conn, err := t.dial(url)
	if err != nil {
		return nil, err
	}
	return &rabbitClient{t: t, conn: conn, consumers: map[int]*rabbitConsumer{}}, nil
}

// rabbitClient is one worker's connection. Owned by one goroutine.
type rabbitClient struct {
	t         *RabbitMQTarget
	conn      *amqp.Connection
	pub       *amqp.Channel // confirm mode; opened at the first send
	confirms  []*amqp.DeferredConfirmation
	consumers map[int]*rabbitConsumer
	queue     int             // queue of the pending deliveries
	pending   []amqp.Delivery // received, not acked, oldest first
}

// rabbitConsumer is a client's consumer of one queue, on a channel of its
// own (so that an ack with multiple=true covers its deliveries only).
type rabbitConsumer struct {
	ch         *amqp.Channel
	deliveries <-chan amqp.Delivery
}

// Close closes the connection; RabbitMQ requeues what the client received
// and did not ack.
func (c *rabbitClient) Close() error {
	if len(c.pending) > 0 {
		c.t.unacked[c.queue].Add(-int64(len(c.pending)))
		c.pending = nil
	}
	return c.conn.Close()
}

func (c *rabbitClient) Send(ctx context.Context, i int, msgs []bench.Outgoing) (int, error) {
	for k := range msgs {
		if msgs[k].Priority != 0 || msgs[k].Delay != 0 {
			return 0, fmt.Errorf("rabbitmq: priorities and delays: %w", bench.ErrUnsupported)
		}
	}
	if c.pub == nil || c.pub.IsClosed() {
		ch, err := c.conn.Channel()
		if err != nil {
			return 0, fmt.Errorf("rabbitmq: %w", err)
		}
		if err := ch.Confirm(false); err != nil {
			ch.Close()
			return 0, fmt.Errorf("rabbitmq: confirm mode: %w", err)
		}
		c.pub = ch
	}
	q := c.t.queues[i]
	c.confirms = c.confirms[:0]
	for k := range msgs {
		dc, err := c.pub.PublishWithDeferredConfirmWithContext(ctx, "", q, false, false, amqp.Publishing{
			DeliveryMode: amqp.Persistent, Body: msgs[k].Body,
		})
		if err != nil {
			return 0, fmt.Errorf("rabbitmq: publish: %w", err)
		}
		c.confirms = append(c.confirms, dc)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ok := 0
	for _, dc := range c.confirms {
		acked, err := dc.WaitContext(wctx)
		if err != nil {
			return ok, fmt.Errorf("rabbitmq: waiting for confirms: %w", err)
		}
		if acked {
			ok++
		}
	}
	if ok < len(msgs) {
		return ok, &bench.PartialError{Failed: len(msgs) - ok, Code: "basic.nack"}
	}
	return ok, nil
}

// consumer returns the client's consumer of queue i, starting it with a
// prefetch of max.
func (c *rabbitClient) consumer(i, max int) (*rabbitConsumer, error) {
	if rc, ok := c.consumers[i]; ok {
		return rc, nil
	}
	ch, err := c.conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("rabbitmq: %w", err)
	}
	if err := ch.Qos(max, 0, false); err != nil {
		ch.Close()
		return nil, fmt.Errorf("rabbitmq: qos: %w", err)
	}
	d, err := ch.Consume(c.t.queues[i], "", false, false, false, false, nil)
	if err != nil {
		ch.Close()
		return nil, fmt.Errorf("rabbitmq: consume: %w", err)
	}
	rc := &rabbitConsumer{ch: ch, deliveries: d}
	c.consumers[i] = rc
	return rc, nil
}

func (c *rabbitClient) Receive(ctx context.Context, i int, max int, wait time.Duration, fn func(body []byte)) (int, error) {
	if len(c.pending) > 0 && c.queue != i {
		return 0, errors.New("bench: receive from another queue with deletes pending")
	}
	c.queue = i
	rc, err := c.consumer(i, max)
	if err != nil {
		return 0, err
	}
	n := 0
	take := func(d amqp.Delivery) {
		c.pending = append(c.pending, d)
		if fn != nil {
			fn(d.Body)
		}
		n++
	}
	closed := func() (int, error) {
		delete(c.consumers, i)
		return n, errors.New("rabbitmq: consumer channel closed")
	}
	// The first: at once, or within wait.
	select {
	case d, ok := <-rc.deliveries:
		if !ok {
			return closed()
		}
		take(d)
	default:
		if wait <= 0 {
			return 0, nil
		}
		timer := time.NewTimer(wait)
		select {
		case d, ok := <-rc.deliveries:
			timer.Stop()
			if !ok {
				return closed()
			}
			take(d)
		case <-timer.C:
			return 0, nil
		case <-ctx.Done():
			timer.Stop()
			return 0, nil
		}
	}
	// The rest of what has been pushed, without waiting.
	for n < max {
		select {
		case d, ok := <-rc.deliveries:
			if !ok {
				c.t.unacked[i].Add(int64(n))
				return closed()
			}
			take(d)
			continue
		default:
		}
		break
	}
	c.t.unacked[i].Add(int64(n))
	return n, nil
}

func (c *rabbitClient) Pending() int { return len(c.pending) }

func (c *rabbitClient) Delete(ctx context.Context, n int) (int, error) {
	n = min(n, len(c.pending))
	if n == 0 {
		return 0, nil
	}
	last := c.pending[n-1]
	rest := copy(c.pending, c.pending[n:])
	clear(c.pending[rest:])
	c.pending = c.pending[:rest]
	c.t.unacked[c.queue].Add(-int64(n))
	rc := c.consumers[c.queue]
	if rc == nil {
		return 0, &bench.PartialError{Failed: n, Code: "channel closed before the ack"}
	}
	if err := rc.ch.Ack(last.DeliveryTag, true); err != nil {
		return 0, fmt.Errorf("rabbitmq: ack: %w", err)
	}
	return n, nil
}
