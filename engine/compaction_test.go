package engine

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/smqd/smqd/wal"
)

// storeUsage returns the bytes the log holds (memory, or segment files on
// disk), the live bytes, and the segment size.
func storeUsage(b *Broker) (held, live, segBytes int64) {
	for _, s := range b.store.segments(nil) {
		live += s.live
	}
	if m, ok := b.store.(*memStore); ok {
		return m.bytes(), live, int64(m.segBytes)
	}
	d := durableOf(b)
	for _, s := range d.wal.Segments() {
		held += s.FileBytes
	}
	return held, live, d.wal.Options().SegmentBytes
}

// compactAll runs passes (and, in durable mode, checkpoints, which let
// segments go) until nothing changes.
func compactAll(t *testing.T, b *Broker) {
	t.Helper()
	for i := 0; i < 10; i++ {
		if d, ok := b.store.(*durableStore); ok {
			if err := d.checkpoint(); err != nil {
				t.Fatal(err)
			}
		}
		removed, moved, err := b.compactOnce(0)
		if err != nil {
			t.Fatal(err)
		}
		if removed == 0 && moved == 0 {
			return
		}
	}
}

// checkBound asserts the compaction target: held <= 2 x live + 2 segments,
// and that every remaining message still reads back intact.
func checkBound(t *testing.T, b *Broker, q *Queue, name string) {
	t.Helper()
	compactAll(t, b)
	held, live, seg := storeUsage(b)
	t.Logf("%s: held %d bytes, live %d bytes, segment %d", name, held, live, seg)
	if held > 2*live+2*seg {
		t.Fatalf("%s: held %d > 2 x live %d + 2 x segment %d", name, held, live, seg)
	}
	msgs, err := q.Peek(MaxBatch, nil)
	if err != nil && err != ErrMessageNotExist {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if len(m.Body) == 0 || m.Body[0] != 'm' {
			t.Fatalf("%s: body corrupted after compaction: %q", name, m.Body[:min(10, len(m.Body))])
		}
	}
	checkInvariants(t, q)
}

// compactionBroker opens an in-memory broker, or a durable one when the
// test name says so, with 64 KiB segments.
func compactionBroker(t *testing.T) (*Broker, *FakeClock, *Queue) {
	return compactionBrokerStripes(t, 0)
}

// compactionBrokerStripes is compactionBroker with that many stripes per
// queue (0: 2 in memory, the default durable).
func compactionBrokerStripes(t *testing.T, stripes int) (*Broker, *FakeClock, *Queue) {
	var b *Broker
	var clk *FakeClock
	if strings.HasSuffix(t.Name(), "durable") {
		clk = NewFakeClock(t0)
		b = openDurableTest(t, t.TempDir(), clk, func(o *Options) {
			o.WAL.SegmentBytes = 64 << 10
			o.WAL.Sync = wal.SyncNone
			if stripes > 0 {
				o.Stripes = stripes
			}
		})
		t.Cleanup(func() { b.Close() })
	} else {
		if stripes == 0 {
			stripes = 2
		}
		b, clk = openTest(t, Options{MemSegmentBytes: 64 << 10, Stripes: stripes})
	}
	cfg := DefaultQueueConfig()
	cfg.VisibilityTimeout = 10 * time.Second
	return b, clk, mustQueue(t, b, "c", cfg)
}

// bothModes runs an adversary against an in-memory and a durable broker.
func bothModes(t *testing.T, f func(t *testing.T)) {
	t.Run("memory", f)
	t.Run("durable", f)
}

func sendN(t *testing.T, q *Queue, n, size int, delay time.Duration) {
	t.Helper()
	body := make([]byte, size)
	for i := range body {
		body[i] = 'm'
	}
	for i := 0; i < n; i++ {
		if _, err := q.Send([]SendEntry{{Body: body, Delay: delay, HasDelay: true}}, nil); err != nil {
			t.Fatal(err)
		}
	}
}

func drain(t *testing.T, q *Queue, n int) {
	t.Helper()
	errs := make([]error, MaxBatch)
	for n > 0 {
		msgs, err := q.Receive(context.Background(), ReceiveOptions{Max: min(n, MaxBatch), HasWait: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		hs := make([]ReceiptHandle, len(msgs))
		for i := range msgs {
			hs[i] = msgs[i].Handle
		}
		if f, err := q.Delete(hs, errs); f != 0 || err != nil {
			t.Fatal(f, err)
		}
		n -= len(msgs)
	}
}

func TestCompactionSteadyChurnSmallLiveSet(t *testing.T) {
	bothModes(t, func(t *testing.T) {
		b, _, q := compactionBroker(t)
		sendN(t, q, 20, 1000, 0) // the live set
		for round := 0; round < 200; round++ {
			sendN(t, q, 10, 1000, 0)
			drain(t, q, 10)
		}
		checkBound(t, b, q, "churn")
	})
}

func TestCompactionOneLongDelayedMessagePerSegment(t *testing.T) {
	bothModes(t, func(t *testing.T) {
		b, _, q := compactionBroker(t)
		for seg := 0; seg < 100; seg++ {
			sendN(t, q, 1, 1000, MaxDelay) // pins this segment unless relocated
			sendN(t, q, 60, 1000, 0)
			drain(t, q, 60)
		}
		checkBound(t, b, q, "delayed")
	})
}

func TestCompactionVisibilityExpiresOverAndOver(t *testing.T) {
	bothModes(t, func(t *testing.T) {
		b, clk, q := compactionBroker(t)
		sendN(t, q, 30, 1000, 0)
		for round := 0; round < 100; round++ {
			if _, err := q.Receive(context.Background(), ReceiveOptions{Max: MaxBatch, HasWait: true}, nil); err != nil && err != ErrMessageNotExist {
				t.Fatal(err)
			}
			clk.Advance(11 * time.Second)
			sendN(t, q, 60, 1000, 0)
			drain(t, q, 60)
		}
		checkBound(t, b, q, "visibility")
	})
}

func TestCompactionHalfRandomDeletes(t *testing.T) {
	bothModes(t, func(t *testing.T) {
		b, _, q := compactionBroker(t)
		rnd := rand.New(rand.NewPCG(7, 7))
		deleteSome(t, q, 50, func(int) bool { return rnd.IntN(2) == 0 })
		checkBound(t, b, q, "random")
	})
}

// deleteSome sends 64 messages of 1000 bytes per round, receives them in
// 4 batches and deletes those of each batch whose index pick chooses.
func deleteSome(t *testing.T, q *Queue, rounds int, pick func(i int) bool) {
	t.Helper()
	errs := make([]error, MaxBatch)
	for round := 0; round < rounds; round++ {
		sendN(t, q, 64, 1000, 0)
		for k := 0; k < 4; k++ {
			msgs, err := q.Receive(context.Background(), ReceiveOptions{Max: MaxBatch, HasWait: true}, nil)
			if err != nil {
				t.Fatal(err)
			}
			var hs []ReceiptHandle
			for i := range msgs {
				if pick(i) {
					hs = append(hs, msgs[i].Handle)
				}
			}
			if len(hs) > 0 {
				if f, err := q.Delete(hs, errs); f != 0 || err != nil {
					t.Fatal(f, err)
				}
			}
		}
	}
}
