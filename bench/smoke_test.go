package bench

import (
	"context"
	"runtime"
	"testing"
	"time"
)

// TestSmoke runs every workload for about a second against the engine in
// process (in memory and durable) and against an smqd server over a
// loopback listener.
func TestSmoke(t *testing.T) {
	targets := []struct {
		name string
		make func(t *testing.T) Target
	}{
		{"inproc-memory", func(t *testing.T) Target { return NewInproc(openBroker(t, false), 0) }},
		{"inproc-durable", func(t *testing.T) Target { return NewInproc(openBroker(t, true), 0) }},
		{"server", func(t *testing.T) Target { return startServer(t, openBroker(t, true)) }},
	}
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			for _, w := range []Workload{Cycle, Produce, Consume, Backlog} {
				t.Run(string(w), func(t *testing.T) {
					target := tg.make(t)
					cfg := smokeConfig(w)
					switch w {
					case Produce:
						cfg.Consumers = 0
					case Consume:
						cfg.Producers, cfg.Messages = 2, 3000
						cfg.Warmup = 0
					case Backlog:
						cfg.Messages = 3000
					}
					res, err := Run(context.Background(), target, cfg)
					if err != nil {
						t.Fatal(err)
					}
					checkResult(t, res)
					if w == Cycle && runtime.GOOS == "linux" {
						checkCPU(t, res, false) // no server process named
					}
				})
			}
		})
	}
}

// TestOpenLoop checks that an open-loop run follows its schedule: it never
// sends ahead of it. (A shared machine may make it fall behind, so the
// lower side is only that it sent at all: no wall-clock assertion.)
func TestOpenLoop(t *testing.T) {
	t.Parallel()
	target := startServer(t, openBroker(t, false))
	cfg := smokeConfig(Cycle)
	cfg.SendBatch, cfg.RecvBatch, cfg.DeleteBatch = 1, 1, 1
	cfg.Rate = 400
	cfg.Duration = time.Second
	res, err := Run(context.Background(), target, cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, res)
	if res.Sent == 0 || res.SentPerS > 440 {
		t.Fatalf("open loop at 400/s sent %d, %.0f/s", res.Sent, res.SentPerS)
	}
}

// TestOpenLoopRecordsLateMessages checks that in open loop the end-to-end
// latency of every message scheduled in the window is recorded, however
// late it is received: here every message is delayed 1 s, longer than
// the window, so none of those scheduled in it is received before its end.
func TestOpenLoopRecordsLateMessages(t *testing.T) {
	t.Parallel()
	target := NewInproc(openBroker(t, false), 0)
	cfg := smokeConfig(Cycle)
	cfg.SendBatch, cfg.RecvBatch, cfg.DeleteBatch = 1, 1, 1
	cfg.Rate, cfg.DelayMix = 200, []Weight{{1, 1}}
	res, err := Run(context.Background(), target, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent == 0 || int64(res.E2E.Count) < res.Sent-int64(cfg.Producers) || res.E2EUnseen != 0 {
		t.Fatalf("sent %d in the window; end-to-end latencies recorded %d, unseen %d", res.Sent, res.E2E.Count, res.E2EUnseen)
	}
	if res.E2E.P50Us < 1e6 {
		t.Fatalf("end-to-end p50 %.0f µs for messages delayed 1 s", res.E2E.P50Us)
	}
}

// TestMessagesCap checks that --messages bounds a produce run.
func TestMessagesCap(t *testing.T) {
	t.Parallel()
	target := NewInproc(openBroker(t, false), 0)
	cfg := smokeConfig(Produce)
	cfg.Consumers, cfg.Warmup, cfg.Messages = 0, 0, 101
	res, err := Run(context.Background(), target, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 101 {
		t.Fatalf("sent %d, want 101", res.Sent)
	}
	var stored int64
	for i := 0; i < cfg.Queues; i++ {
		n, err := target.Backlog(context.Background(), i)
		if err != nil {
			t.Fatal(err)
		}
		stored += n
	}
	if stored != 101 {
		t.Fatalf("%d stored, want 101", stored)
	}
}

// TestMNSClientWire checks the wire client's single and batch forms, a
// partial batch delete, and that bodies and stamps survive the trip.
func TestMNSClientWire(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	target := startServer(t, openBroker(t, false))
	if err := target.Prepare(ctx, []string{"wire"}, true); err != nil {
		t.Fatal(err)
	}
	c, err := target.NewClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := newBody(100, 1)
	putStamp(body, 42)
	if n, err := c.Send(ctx, 0, []Outgoing{{Body: body, Priority: 3, Delay: 0}}); n != 1 || err != nil {
		t.Fatalf("send: %d %v", n, err)
	}
	batch := make([]Outgoing, 16)
	for i := range batch {
		batch[i] = Outgoing{Body: body}
	}
	if n, err := c.Send(ctx, 0, batch); n != 16 || err != nil {
		t.Fatalf("batch send: %d %v", n, err)
	}
	var got [][]byte
	fn := func(b []byte) { got = append(got, append([]byte(nil), b...)) }
	if n, err := c.Receive(ctx, 0, 1, 0, fn); n != 1 || err != nil {
		t.Fatalf("receive: %d %v", n, err)
	}
	if n, err := c.Receive(ctx, 0, 16, time.Second, fn); n != 16 || err != nil {
		t.Fatalf("batch receive: %d %v", n, err)
	}
	for _, b := range got {
		if ts, ok := stampOf(b); !ok || ts != 42 || string(b) != string(body) {
			t.Fatalf("body came back as %q", b)
		}
	}
	if n, err := c.Delete(ctx, 1); n != 1 || err != nil {
		t.Fatalf("delete: %d %v", n, err)
	}
	// Break one pending handle: the batch delete reports one failure.
	mc := c.(*mnsClient)
	mc.handles[mc.ends[3]-1] ^= 1
	n, err := c.Delete(ctx, 16)
	if n != 15 || err == nil {
		t.Fatalf("partial batch delete: %d %v", n, err)
	}
	if c.Pending() != 0 {
		t.Fatalf("%d pending", c.Pending())
	}
	if n, err := c.Receive(ctx, 0, 16, 0, fn); n != 0 || err != nil {
		t.Fatalf("empty receive: %d %v", n, err)
	}
	if n, err := target.Backlog(ctx, 0); err != nil || n != 1 { // the broken handle's message is in flight
		t.Fatalf("backlog %d %v", n, err)
	}
}

// TestMNSBadCredentials: a wrong secret is an error, not an empty queue.
func TestMNSBadCredentials(t *testing.T) {
	t.Parallel()
	good := startServer(t, openBroker(t, false))
	bad := NewMNSTarget(MNSOptions{Addr: good.opts.Addr, AccessKeyID: testKeyID, AccessKeySecret: "wrong"})
	defer bad.Close()
	err := bad.Prepare(context.Background(), []string{"q"}, true)
	if err == nil {
		t.Fatal("prepare with a wrong secret succeeded")
	}
}
