package peers

// The Redis peer: a list queue with the reliable-queue pattern, the one
// closest to MNS's receive-then-delete. A producer LPUSHes a batch (one
// command). A consumer moves up to max messages from the queue's tail to
// its own processing list (a Lua script of LMOVEs, one round trip; when
// nothing is there, one BLMOVE that waits), so a received message is
// neither visible to others nor lost if the consumer dies; delete is LREM
// of that value from the processing list (a batch pipelined in one round
// trip). Nothing here re-queues messages of a dead consumer (MNS's
// visibility timeout); the bench never needs it. Priorities and delays are
// not supported.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/smqd/smqd/bench"
)

// RedisTarget drives Redis (>= 6.2 for LMOVE/BLMOVE).
type RedisTarget struct {
	rdb   *redis.Client
	keys  []string
	mu    sync.Mutex
	procs map[int][]string // processing lists by queue; guarded by mu
	next  int              // client counter; guarded by mu
}

// NewRedisTarget returns a target for Redis at addr with a pool of conns
// connections.
func NewRedisTarget(addr string, conns int) *RedisTarget {
	return &RedisTarget{
		rdb: redis.NewClient(&redis.Options{
			Addr: addr, PoolSize: conns + 4, MinIdleConns: conns,
			ReadTimeout: 40 * time.Second, WriteTimeout: 10 * time.Second,
			Protocol: 2, DisableIdentity: true,
		}),
		procs: map[int][]string{},
	}
}

// Redis describes the Redis peer: a pool of one connection per worker.
func (catalog) Redis() bench.Peer {
	return bench.Peer{Name: "redis", DefaultAddr: "127.0.0.1:6379", New: func(o bench.PeerOptions) (bench.Target, error) {
		return NewRedisTarget(o.Addr, o.Workers), nil
	}}
}

// Name returns "redis".
func (t *RedisTarget) Name() string { return "redis" }

// Prepare names the lists and, when fresh, deletes what an earlier run
// left under those names.
func (t *RedisTarget) Prepare(ctx context.Context, names []string, fresh bool) error {
	t.keys = t.keys[:0]
	for _, n := range names {
		k := "smqbench:" + n
		t.keys = append(t.keys, k)
		if fresh {
			var del []string
			iter := t.rdb.Scan(ctx, 0, k+"*", 1000).Iterator()
			for iter.Next(ctx) {
				del = append(del, iter.Val())
			}
			if err := iter.Err(); err != nil {
				return fmt.Errorf("redis: %w", err)
			}
			if len(del) > 0 {
				if err := t.rdb.Del(ctx, del...).Err(); err != nil {
					return fmt.Errorf("redis: %w", err)
				}
			}
		}
	}
	return t.rdb.Ping(ctx).Err()
}

// Backlog returns the queue's length plus its processing lists' lengths.
func (t *RedisTarget) Backlog(ctx context.Context, i int) (int64, error) {
	n, err := t.rdb.LLen(ctx, t.keys[i]).Result()
	if err != nil {
		return 0, err
	}
	iter := t.rdb.Scan(ctx, 0, t.keys[i]+":proc:*", 1000).Iterator()
	for iter.Next(ctx) {
		m, err := t.rdb.LLen(ctx, iter.Val()).Result()
		if err != nil {
			return 0, err
		}
		n += m
	}
	return n, iter.Err()
}

// Close closes the pool.
func (t *RedisTarget) Close() error { return t.rdb.Close() }

// NewClient returns a worker's client (sharing the pool).
func (t *RedisTarget) NewClient(ctx context.Context) (bench.Client, error) {
	t.mu.Lock()
	id := t.next
	t.next++
	t.mu.Unlock()
	return &redisClient{t: t, id: strconv.Itoa(id), args: make([]any, 0, 16)}, nil
}

// moveScript moves up to ARGV[1] elements from KEYS[1]'s tail to the head
// of KEYS[2] and returns them.
var moveScript = redis.NewScript(`
local out = {}
for i = 1, tonumber(ARGV[1]) do
  local v = redis.call('LMOVE', KEYS[1], KEYS[2], 'RIGHT', 'LEFT')
  if not v then break end
  out[#out + 1] = v
end
return out`)

// redisClient is one worker. Owned by one goroutine.
type redisClient struct {
	t       *RedisTarget
	id      string
	args    []any
	queue   int
	proc    string
	pending []string
}

func (c *redisClient) Close() error { return nil }

func (c *redisClient) Send(ctx context.Context, i int, msgs []bench.Outgoing) (int, error) {
	c.args = c.args[:0]
	for k := range msgs {
		if msgs[k].Priority != 0 || msgs[k].Delay != 0 {
			return 0, fmt.Errorf("redis: priorities and delays: %w", bench.ErrUnsupported)
		}
		c.args = append(c.args, msgs[k].Body)
	}
	if err := c.t.rdb.LPush(ctx, c.t.keys[i], c.args...).Err(); err != nil {
		return 0, err
	}
	return len(msgs), nil
}

func (c *redisClient) Receive(ctx context.Context, i int, max int, wait time.Duration, fn func(body []byte)) (int, error) {
	if c.proc == "" || c.queue != i {
		if len(c.pending) > 0 {
			return 0, errors.New("bench: receive from another queue with deletes pending")
		}
		c.queue = i
		c.proc = c.t.keys[i] + ":proc:" + c.id
	}
	src := c.t.keys[i]
	vals, err := moveScript.Run(ctx, c.t.rdb, []string{src, c.proc}, max).StringSlice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, err
	}
	if len(vals) == 0 {
		v, err := c.t.rdb.BLMove(ctx, src, c.proc, "RIGHT", "LEFT", wait).Result()
		if errors.Is(err, redis.Nil) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		vals = append(vals[:0], v)
	}
	for _, v := range vals {
		c.pending = append(c.pending, v)
		if fn != nil {
			fn([]byte(v))
		}
	}
	return len(vals), nil
}

func (c *redisClient) Pending() int { return len(c.pending) }

func (c *redisClient) Delete(ctx context.Context, n int) (int, error) {
	if n > len(c.pending) {
		n = len(c.pending)
	}
	if n == 0 {
		return 0, nil
	}
	var cmds []*redis.IntCmd
	_, err := c.t.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, v := range c.pending[:n] {
			cmds = append(cmds, p.LRem(ctx, c.proc, 1, v))
		}
		return nil
	})
	rest := copy(c.pending, c.pending[n:])
	clear(c.pending[rest:])
	c.pending = c.pending[:rest]
	if err != nil {
		return 0, err
	}
	ok := 0
	for _, cmd := range cmds {
		if cmd.Val() == 1 {
			ok++
		}
	}
	if ok < n {
		return ok, &bench.PartialError{Failed: n - ok, Code: "LREM removed nothing"}
	}
	return ok, nil
}
