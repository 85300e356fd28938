package engine

import (
	"log/slog"
	"testing"
	"time"
)

// t0 is the fake clock's start in every test: a fixed, realistic instant.
var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// testLogger routes slog to t.Log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

// openTest opens an in-memory broker on a fake clock.
func openTest(t testing.TB, opts Options) (*Broker, *FakeClock) {
	t.Helper()
	clk := NewFakeClock(t0)
	opts.Clock = clk
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	b, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, clk
}

func mustQueue(t testing.TB, b *Broker, name string, cfg QueueConfig) *Queue {
	t.Helper()
	if _, err := b.CreateQueue(name, cfg); err != nil {
		t.Fatal(err)
	}
	q, err := b.Queue(name)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// checkInvariants verifies the stripe invariants of stripe.go for every stripe.
func checkInvariants(t testing.TB, q *Queue) {
	t.Helper()
	for si := range q.stripes {
		st := &q.stripes[si]
		st.mu.Lock()
		err := st.checkLocked()
		st.mu.Unlock()
		if err != nil {
			t.Fatalf("queue %s stripe %d: %v", q.name, si, err)
		}
	}
}

// durableOf returns a durable broker's backend.
func durableOf(b *Broker) *durableStore { return b.store.(*durableStore) }

// crashBroker stops a durable broker the way a process crash would: no
// final checkpoint, no flush beyond what the log already wrote.
func crashBroker(b *Broker) {
	b.closed.Store(true)
	b.pusher.stop() // workers stop where they are: nothing settled
	b.compactor.stop()
	d := durableOf(b)
	d.cp.stop()
	d.wal.Close()
	d.idx.Close()
	d.unlock()
}
