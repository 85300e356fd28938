package server

import (
	"testing"

	"github.com/smqd/smqd/engine"
)

// The queue cache lets go of a closed broker's queues at the next miss
// (a cluster shard's broker replaced by a rebuild): one entry kept the
// old broker's whole state in memory until its own name was asked for
// again (soak audit: 130 MB on one node).
func TestQueueCacheDropsClosedBrokers(t *testing.T) {
	open := func() *engine.Broker {
		b, err := engine.Open(engine.Options{Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"a", "b", "c"} {
			if _, err := b.CreateQueue(n, engine.DefaultQueueConfig()); err != nil {
				t.Fatal(err)
			}
		}
		return b
	}
	old, cur := open(), open()
	defer cur.Close()
	c := queueCache{m: map[string]cachedQueue{}}
	for _, n := range []string{"a", "b"} {
		if _, err := c.get(old, []byte(n)); err != nil {
			t.Fatal(err)
		}
	}
	old.Close()
	if _, err := c.get(cur, []byte("c")); err != nil { // a miss, but the last sweep was just now
		t.Fatal(err)
	}
	c.lastSweep.Store(c.lastSweep.Load() - int64(cacheSweepEvery))
	// The next miss after the interval, even one whose queue does not
	// exist (found in review: only a miss that found its queue swept).
	if _, err := c.get(cur, []byte("nope")); err == nil {
		t.Fatal("a queue that does not exist found")
	}
	for n, e := range c.m {
		if e.b == old {
			t.Errorf("entry %q still holds the closed broker", n)
		}
	}
	if len(c.m) != 1 {
		t.Errorf("%d entries, want c of the open broker", len(c.m))
	}
}
