package engine

// Relayed subscriptions: a queue endpoint whose queue another broker holds
// (a queue on another shard of a cluster: Options.DeadLetterRouter says
// which names are held elsewhere and carries messages there).
//
// A publish cannot store into another broker's queue in its own atomic
// group (publish.go invariant 1), so such a subscription gets a push queue,
// as an HTTP endpoint does: the publish stores the delivery there, in the
// group, and is acknowledged once that is durable. The pusher's workers
// for it (relayWorkers) then receive batches from the push queue and hand
// each batch to the router, which stores it in the target queue durably
// (Queue.AcceptMoved, as a new message: now, the queue's DelaySeconds and
// retention, the default priority; the publish's properties). Only then
// are the deliveries deleted from the push queue.
//
// Invariants:
//  1. At least once, as a push (push.go invariant 1): a delivery leaves
//     its push queue only after the target acknowledged it durable, or a
//     day after its publish (pushMaxAge), as an HTTP push with the longest
//     strategy does. Hops are retried 1 s after a failure, doubling to
//     16 s (relayRetryDelay), whatever the subscription's NotifyStrategy:
//     that strategy is about an endpoint's owner's server, a hop only
//     about the cluster, whose faults (an election, a partition) outlast
//     BACKOFF_RETRY's three retries. A lost answer, a crash or a change of
//     leader between the store and the delete delivers it twice.
//  2. A delivery whose target queue no longer exists is dropped, as a
//     publish skips a deleted queue on one broker: only on the router's
//     word that it does not exist where it is held (an error matching
//     ErrQueueNotExist), never on a replica's view.
//  3. What the target holds is what a local delivery would have stored:
//     the same body (the NotifyContentFormat rendering) and properties.
//  4. An Unsubscribe or DeleteTopic does not discard the deliveries of
//     publishes acknowledged before it while their hops go through: it
//     closes the subscription to later publishes (a publish that picked it
//     before may still deliver: the two ran at once) and waits, holding no
//     lock, until its push queue is empty or PushOptions.RelayDrain has
//     passed, and only then deletes it, discarding what is left (a target
//     with no leader that long; logged and counted, as for HTTP). Before,
//     a burst of 500 publishes then Unsubscribe left queues on the other
//     shards 165 and 267 of 500 (topics audit, 2026-12-07). An unsubscribe
//     that fails opens the subscription again; the publishes acknowledged
//     while it waited did not go to it (a narrow window: the failure is a
//     lost lead, a storage failure or a shutdown within the wait, and the
//     client, told it may not have run, retries; review T).

import (
	"context"
	"errors"
	"time"
)

// relayWorkers is the number of workers of a relayed subscription: each
// carries a batch per hop.
const relayWorkers = 4

// DefaultRelayDrain is PushOptions.RelayDrain's default: well within the
// 10 s a cluster member gives a request it forwards to the leader.
const DefaultRelayDrain = 5 * time.Second

// relayDrainPoll is how often drainRelays looks at a push queue.
const relayDrainPoll = 5 * time.Millisecond

// drainRelays closes the relayed subscriptions among subs to publishes
// and waits for their push queues to empty (invariant 4). It returns what
// opens them again.
func (b *Broker) drainRelays(subs []*subscription) (reopen func()) {
	var closed []*subscription
	ts := &b.topics
	ts.mu.Lock()
	for _, s := range subs {
		if s.relay {
			ts.closing[s.id]++
			closed = append(closed, s)
		}
	}
	ts.mu.Unlock()
	reopen = func() {
		ts.mu.Lock()
		for _, s := range closed {
			if ts.closing[s.id]--; ts.closing[s.id] <= 0 {
				delete(ts.closing, s.id)
			}
		}
		ts.mu.Unlock()
	}
	if len(closed) == 0 || b.pusher.opts.RelayDrain <= 0 {
		return reopen
	}
	end := time.Now().Add(b.pusher.opts.RelayDrain)
	for _, s := range closed {
		q := b.internalQueue(pushQueueName(s.id))
		for q != nil && time.Now().Before(end) && b.usable() == nil {
			a, i, d, _ := q.counts()
			if a+i+d == 0 {
				break
			}
			time.Sleep(relayDrainPoll)
		}
	}
	return reopen
}

// deadLetterElsewhere moves an exhausted notification m to its
// subscription's dead-letter queue held by another broker: its rendering,
// with the topic's DLQ properties, as a new message there (a delivery:
// sent now), then deletes it from its push queue. Nil once it is there;
// an error matching ErrQueueNotExist if the queue is gone; otherwise it
// stays hidden in its push queue for its lease, and its next attempt
// comes back here.
func (ps *pushSub) deadLetterElsewhere(m *Message, env *pushEnvelope, sub *subscription, dlq string) error {
	b := ps.p.b
	mm := [1]MovedMessage{{Body: env.body, Props: b.topicDeadLetterProps(m, sub.topic, sub.name, env.id), Priority: DefaultPriority}}
	ctx, cancel := context.WithTimeout(context.Background(), moveTimeout)
	err := b.opts.DeadLetterRouter.Move(ctx, dlq, mm[:])
	cancel()
	if err == nil {
		ps.settleDelete(m)
	}
	return err
}

// relayRetryDelay is the wait before the next hop of a delivery after
// its attempts-th failed (invariant 1).
func relayRetryDelay(attempts int) time.Duration {
	return time.Second << min(max(attempts-1, 0), 4)
}

// relayed reports whether the queue named name is held by another broker.
func (b *Broker) relayed(name string) bool {
	r := b.opts.DeadLetterRouter
	return r != nil && r.Elsewhere(name)
}

// relayBatchBytes bounds the bodies of one hop: a batch of large
// deliveries (a notification's envelope may be several times its message)
// goes in several, each well within a shard's in-memory log ring.
const relayBatchBytes = 1 << 20

// relay carries ms, received from a relayed subscription's push queue, to
// its queue in hops of at most relayBatchBytes (one hop unless the bodies
// are large), and appends the handles to delete to done.
func (ps *pushSub) relay(ctx context.Context, ms []Message, done []ReceiptHandle) []ReceiptHandle {
	p, b := ps.p, ps.p.b
	if !b.beginMove() {
		// Options.MovesHeld: they stay in the push queue, taken again
		// after heldHide, not after their whole lease (the worker takes
		// no more meanwhile: push.go).
		for i := range ms {
			ps.q.changeVisibility(ms[i].Handle, heldHide, false)
		}
		return done
	}
	defer b.endMove()
	sub := ps.sub.Load()
	var batch [MaxBatch]MovedMessage
	var envs [MaxBatch]pushEnvelope
	var at [MaxBatch]int
	n, size := 0, 0
	for i := range ms {
		env, err := decodePushEnvelope(ms[i].Body)
		if err != nil {
			b.log.Error("discarding a push queue message that is no notification", "topic", sub.topic, "subscription", sub.name, "err", err)
			ps.settleDelete(&ms[i])
			p.discarded.Add(1)
			continue
		}
		if n > 0 && size+len(env.body) > relayBatchBytes {
			done = ps.hop(ctx, sub, ms, batch[:n], envs[:n], at[:n], done)
			n, size = 0, 0
		}
		var props []byte
		if len(ms[i].Properties) > 0 {
			props = appendProps(nil, ms[i].Properties)
		}
		// EnqueueMs 0: a new message of the target (AcceptMoved).
		batch[n] = MovedMessage{Body: env.body, Props: props, Priority: DefaultPriority}
		envs[n], at[n] = env, i
		n++
		size += len(env.body)
	}
	if n == 0 {
		return done
	}
	return ps.hop(ctx, sub, ms, batch[:n], envs[:n], at[:n], done)
}

// hop moves batch (the deliveries of ms[at[k]]) to the subscription's
// queue in one call, and settles them by its outcome.
func (ps *pushSub) hop(ctx context.Context, sub *subscription, ms []Message, batch []MovedMessage, envs []pushEnvelope, at []int, done []ReceiptHandle) []ReceiptHandle {
	p, b := ps.p, ps.p.b
	n := len(batch)
	hctx, cancel := context.WithTimeout(ctx, moveTimeout)
	err := b.opts.DeadLetterRouter.Move(hctx, sub.queue, batch)
	cancel()
	if err == nil {
		// Not counted as pushes delivered: the cluster counts its hops
		// (smqd_cluster_topic_relay_hops_total).
		for k := range n {
			done = append(done, ms[at[k]].Handle)
		}
		return done
	}
	if errors.Is(err, ErrQueueNotExist) {
		// Invariant 2: the target's leader says so (a replica's view
		// could trail it, or be closed for a rebuild).
		b.log.Debug("relayed deliveries dropped: their queue is gone", "topic", sub.topic, "subscription", sub.name, "queue", sub.queue, "messages", n)
		for k := range n {
			ps.settleDelete(&ms[at[k]])
		}
		p.discarded.Add(int64(n))
		return done
	}
	b.log.Debug("relayed deliveries not stored; retried after their strategy's delay", "topic", sub.topic, "subscription", sub.name,
		"queue", sub.queue, "messages", n, "err", err)
	for k := range n {
		ps.attemptFailed(ctx, &ms[at[k]], &envs[k], sub)
	}
	return done
}
