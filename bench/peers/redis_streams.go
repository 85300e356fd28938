package peers

// The Redis Streams peer: the reliable queue Redis users build on a stream
// with a consumer group, kept beside the list peer (redis.go) so that the
// best of the two counts. One stream per queue, one consumer group
// ("smqbench") created at Prepare (XGROUP CREATE ... MKSTREAM), and one
// consumer name per bench client.
//
//	send     XADD key * b <body>; a batch is N XADDs pipelined (one round
//	         trip). No MAXLEN: processed entries are deleted.
//	receive  XREADGROUP GROUP g c COUNT max [BLOCK wait] STREAMS key >
//	         (new entries only; BLOCK only when wait > 0). Entries become
//	         pending (the group's PEL) under this consumer until acked.
//	delete   XACK key g ids... and XDEL key ids... pipelined: one round
//	         trip for the batch. XACK takes the entry out of the PEL, XDEL
//	         out of the stream (so XLEN is the backlog).
//	redeliver  at most once per claim interval (the visibility timeout, at
//	         most 1 s), a receive first runs XAUTOCLAIM key g c <vt> <cursor>
//	         COUNT max: entries pending longer than the visibility timeout
//	         (their consumer died or stalled) move to this consumer and are
//	         delivered again, like an MNS message whose visibility timeout
//	         ran out. Under the bench nothing is ever left pending that long,
//	         so the claims find nothing and cost one command per consumer per
//	         interval.
//
// Backlog is XLEN (entries not yet deleted: new and pending). Priorities
// and delays are not supported (Streams have neither), as with the list
// peer: those scenarios return bench.ErrUnsupported. Durability is the
// server's: redis-server with appendonly yes and appendfsync always (class
// "always") or everysec ("interval"), as bench/peers.sh starts it.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/smqd/smqd/bench"
)

// streamGroup is the consumer group of every bench stream.
const streamGroup = "smqbench"

// streamField is the field of an entry that holds the body.
const streamField = "b"

// RedisStreamsTarget drives Redis (>= 6.2 for XAUTOCLAIM) as a stream
// queue.
type RedisStreamsTarget struct {
	rdb *redis.Client
	// vt is the idle time after which a pending entry is claimed again;
	// claimEvery how often a consumer looks for such entries.
	vt, claimEvery time.Duration
	keys           []string
	mu             sync.Mutex
	next           int // client counter; guarded by mu
}

// NewRedisStreamsTarget returns a target for Redis at addr with a pool of
// conns connections; vt is the visibility timeout (30 s when <= 0).
func NewRedisStreamsTarget(addr string, conns int, vt time.Duration) *RedisStreamsTarget {
	if vt <= 0 {
		vt = 30 * time.Second
	}
	return &RedisStreamsTarget{
		rdb: redis.NewClient(&redis.Options{
			Addr: addr, PoolSize: conns + 4, MinIdleConns: conns,
			ReadTimeout: 40 * time.Second, WriteTimeout: 10 * time.Second,
			Protocol: 2, DisableIdentity: true,
		}),
		vt:         vt,
		claimEvery: min(vt, time.Second),
	}
}

// RedisStreams describes the Redis Streams peer: a pool of one connection
// per worker; the visibility timeout is XAUTOCLAIM's min-idle-time.
func (catalog) RedisStreams() bench.Peer {
	return bench.Peer{Name: "redis-streams", DefaultAddr: "127.0.0.1:6379", New: func(o bench.PeerOptions) (bench.Target, error) {
		return NewRedisStreamsTarget(o.Addr, o.Workers, o.VisibilityTimeout), nil
	}}
}

// Name returns "redis-streams".
func (t *RedisStreamsTarget) Name() string { return "redis-streams" }

// Prepare names the streams, deletes them when fresh, and creates each
// stream's consumer group (and the stream: MKSTREAM). An existing group is
// kept (BUSYGROUP) when not fresh.
func (t *RedisStreamsTarget) Prepare(ctx context.Context, names []string, fresh bool) error {
	t.keys = t.keys[:0]
	for _, n := range names {
		k := "smqbench:stream:" + n
		t.keys = append(t.keys, k)
		if fresh {
			if err := t.rdb.Del(ctx, k).Err(); err != nil {
				return fmt.Errorf("redis-streams: %w", err)
			}
		}
		err := t.rdb.XGroupCreateMkStream(ctx, k, streamGroup, "0").Err()
		if err != nil && !(strings.HasPrefix(err.Error(), "BUSYGROUP") && !fresh) {
			return fmt.Errorf("redis-streams: xgroup create %s: %w", k, err)
		}
	}
	return nil
}

// Backlog returns the stream's length: entries not yet deleted, whether
// new or pending.
func (t *RedisStreamsTarget) Backlog(ctx context.Context, i int) (int64, error) {
	return t.rdb.XLen(ctx, t.keys[i]).Result()
}

// Close closes the pool.
func (t *RedisStreamsTarget) Close() error { return t.rdb.Close() }

// NewClient returns a worker's client (sharing the pool), a consumer of
// its own name.
func (t *RedisStreamsTarget) NewClient(ctx context.Context) (bench.Client, error) {
	t.mu.Lock()
	id := t.next
	t.next++
	t.mu.Unlock()
	return &streamClient{t: t, consumer: "c" + strconv.Itoa(id), cursor: "0-0"}, nil
}

// streamClient is one worker. Owned by one goroutine.
type streamClient struct {
	t         *RedisStreamsTarget
	consumer  string
	queue     int       // queue of the pending ids
	pending   []string  // entry ids received, not yet deleted, oldest first
	lastClaim time.Time // last XAUTOCLAIM (zero: never)
	cursor    string    // XAUTOCLAIM's next start id ("0-0": from the beginning)
}

func (c *streamClient) Close() error { return nil }

func (c *streamClient) Send(ctx context.Context, i int, msgs []bench.Outgoing) (int, error) {
	for k := range msgs {
		if msgs[k].Priority != 0 || msgs[k].Delay != 0 {
			return 0, fmt.Errorf("redis-streams: priorities and delays: %w", bench.ErrUnsupported)
		}
	}
	key := c.t.keys[i]
	if len(msgs) == 1 {
		if err := c.t.rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []any{streamField, msgs[0].Body}}).Err(); err != nil {
			return 0, err
		}
		return 1, nil
	}
	cmds := make([]*redis.StringCmd, 0, len(msgs))
	_, err := c.t.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for k := range msgs {
			cmds = append(cmds, p.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []any{streamField, msgs[k].Body}}))
		}
		return nil
	})
	ok := 0
	for _, cmd := range cmds {
		if cmd.Err() == nil {
			ok++
		}
	}
	return ok, err
}

func (c *streamClient) Receive(ctx context.Context, i int, max int, wait time.Duration, fn func(body []byte)) (int, error) {
	if len(c.pending) > 0 && c.queue != i {
		return 0, errors.New("bench: receive from another queue with deletes pending")
	}
	if c.queue != i {
		c.cursor = "0-0"
	}
	c.queue = i
	key := c.t.keys[i]
	// Redelivery: entries idle in the PEL for a visibility timeout.
	if now := time.Now(); c.lastClaim.IsZero() || now.Sub(c.lastClaim) >= c.t.claimEvery {
		c.lastClaim = now
		msgs, next, err := c.t.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
			Stream: key, Group: streamGroup, Consumer: c.consumer,
			MinIdle: c.t.vt, Start: c.cursor, Count: int64(max),
		}).Result()
		if err != nil {
			return 0, fmt.Errorf("redis-streams: xautoclaim: %w", err)
		}
		c.cursor = next
		if n := c.take(msgs, fn); n > 0 {
			return n, nil
		}
	}
	block := time.Duration(-1) // no BLOCK argument: return at once
	if wait > 0 {
		block = wait
		if block < time.Millisecond {
			block = time.Millisecond // BLOCK 0 would wait for ever
		}
	}
	streams, err := c.t.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
		Group: streamGroup, Consumer: c.consumer, Streams: []string{key, ">"},
		Count: int64(max), Block: block,
	}).Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range streams {
		n += c.take(s.Messages, fn)
	}
	return n, nil
}

// take makes the entries pending and shows their bodies to fn. An entry
// without the body field (deleted while pending) is skipped.
func (c *streamClient) take(msgs []redis.XMessage, fn func([]byte)) int {
	n := 0
	for _, m := range msgs {
		v, ok := m.Values[streamField].(string)
		if !ok {
			continue
		}
		c.pending = append(c.pending, m.ID)
		if fn != nil {
			fn([]byte(v))
		}
		n++
	}
	return n
}

func (c *streamClient) Pending() int { return len(c.pending) }

func (c *streamClient) Delete(ctx context.Context, n int) (int, error) {
	n = min(n, len(c.pending))
	if n == 0 {
		return 0, nil
	}
	key := c.t.keys[c.queue]
	ids := append([]string(nil), c.pending[:n]...)
	rest := copy(c.pending, c.pending[n:])
	clear(c.pending[rest:])
	c.pending = c.pending[:rest]
	var ack, del *redis.IntCmd
	_, err := c.t.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		ack = p.XAck(ctx, key, streamGroup, ids...)
		del = p.XDel(ctx, key, ids...)
		return nil
	})
	if err != nil {
		return 0, err
	}
	// An entry another consumer claimed in the meantime is still acked
	// (XACK does not check the owner); one deleted already is not.
	ok := int(min(ack.Val(), del.Val()))
	if ok < n {
		return ok, &bench.PartialError{Failed: n - ok, Code: "XACK/XDEL found no entry"}
	}
	return ok, nil
}
