package bench

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/server"
)

const (
	testKeyID  = "SMQDBENCHTESTKEY"
	testSecret = "bench-test-secret"
)

// openBroker opens an engine: durable in a temp dir, or in memory.
func openBroker(t testing.TB, durable bool) *engine.Broker {
	t.Helper()
	opts := engine.Options{}
	if durable {
		opts.Dir = t.TempDir()
	}
	b, err := engine.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// startServer serves the MNS API for b on a loopback port and returns an
// MNS target for it.
func startServer(t testing.TB, b *engine.Broker) *MNSTarget {
	t.Helper()
	srv, err := server.New(b, server.Options{Credentials: map[string]string{testKeyID: testSecret}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Serve(ln); close(done) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
	})
	tg := NewMNSTarget(MNSOptions{Addr: ln.Addr().String(), AccessKeyID: testKeyID, AccessKeySecret: testSecret, MaxConns: 16})
	t.Cleanup(func() { tg.Close() })
	return tg
}

// smokeConfig is a small, short run.
func smokeConfig(w Workload) Config {
	return Config{
		Workload: w, Producers: 2, Consumers: 2, BodyBytes: 256,
		SendBatch: 4, RecvBatch: 4, DeleteBatch: 2, Queues: 2,
		Warmup: 100 * time.Millisecond, Duration: 700 * time.Millisecond,
		Wait: time.Second, Messages: 0, MaxTime: 20 * time.Second,
		PriorityMix: []Weight{{1, 1}, {8, 3}},
	}
}

// checkResult checks what every successful run must show.
func checkResult(t *testing.T, res *Result) {
	t.Helper()
	if res.Errors != 0 {
		t.Errorf("%d errors: %s", res.Errors, res.ErrorSample)
	}
	if res.CountsDisagree {
		t.Errorf("at rest, the backlog's growth and sent minus deleted differ by %d, beyond %d", res.RestDiff, res.RestTolerance)
	}
	switch Workload(res.Workload) {
	case Cycle:
		if res.Sent == 0 || res.Deleted == 0 || res.E2E.Count == 0 || res.Send.Count == 0 {
			t.Errorf("cycle measured nothing: %+v", res)
		}
		if res.BacklogGrowth != res.BacklogEnd-res.BacklogStart || res.BacklogTolerance <= 0 {
			t.Errorf("backlog figures: %+v", res)
		}
	case Produce:
		if res.Sent == 0 || res.Deleted != 0 {
			t.Errorf("produce: sent %d deleted %d", res.Sent, res.Deleted)
		}
	case Consume:
		if res.Deleted == 0 || res.Sent != 0 {
			t.Errorf("consume: sent %d deleted %d", res.Sent, res.Deleted)
		}
	case Publish:
		if res.Sent == 0 || res.Send.Count == 0 {
			t.Errorf("publish measured nothing: %+v", res)
		}
		if res.Consumers > 0 && (res.Deleted == 0 || res.E2E.Count == 0 || res.BacklogTolerance <= 0) {
			t.Errorf("publish with consumers: deleted %d, e2e %d, tolerance %d", res.Deleted, res.E2E.Count, res.BacklogTolerance)
		}
		if res.Consumers == 0 && res.Deleted != 0 {
			t.Errorf("publish without consumers deleted %d", res.Deleted)
		}
	case Backlog:
		if res.Drained != res.Preloaded || res.PreloadPerS <= 0 || res.DrainPerS <= 0 || res.BacklogEnd != 0 {
			t.Errorf("backlog: preloaded %d drained %d rates %v %v left %d", res.Preloaded, res.Drained, res.PreloadPerS, res.DrainPerS, res.BacklogEnd)
		}
	}
}
