package engine

import (
	"sync/atomic"
	"testing"
)

// countingRouter is downRouter counting its read barriers (CatchUp: in a
// cluster a read barrier on the dead-letter queue's shard, up to 2 s while
// that shard has no leader).
type countingRouter struct {
	downRouter
	catchUps atomic.Int32
}

func (r *countingRouter) CatchUp(string) { r.catchUps.Add(1) }

// An idempotent CreateQueue of an existing queue whose policy names a
// dead-letter queue on another shard: since 316b3a4 the server gives every
// CreateQueue without policy elements the queue's own policy, so each
// SDK's CreateQueue at start pays the CatchUp (a read barrier on another
// shard, 2 s when it has no leader) for a queue it does not create.
func TestIdempotentCreateAsksNoOtherShard(t *testing.T) {
	r := &countingRouter{}
	b, _ := openTest(t, Options{Stripes: 1, DeadLetterRouter: r})
	cfg := dlqConfig("far-dlq", 3)
	mustQueue(t, b, "src", cfg)
	before := r.catchUps.Load()
	for range 5 {
		if created, err := b.CreateQueue("src", cfg); err != nil || created {
			t.Fatalf("idempotent create: %v %v", created, err)
		}
	}
	if n := r.catchUps.Load() - before; n != 0 {
		t.Errorf("5 creates of an existing queue made %d read barriers on the dead-letter queue's shard", n)
	}
}
