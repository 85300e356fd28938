package peers

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/smqd/smqd/bench"
)

// TestPeerRedisStreams runs the shared short cycle and backlog against a
// real redis-server (skipped when none is installed; bench/peers.sh
// installs one with apt-get).
func TestPeerRedisStreams(t *testing.T) {
	port := startPeer(t, "redis-server", redisArgs)
	tg := NewRedisStreamsTarget(fmt.Sprintf("127.0.0.1:%d", port), 8, 30*time.Second)
	defer tg.Close()
	runPeer(t, tg)
}

// TestRedisStreamsRedelivery checks the reliable-queue half: an entry
// received and never deleted is delivered again, to another consumer, once
// it has been pending for the visibility timeout (XAUTOCLAIM), and not
// before; a batch delete removes it from the stream; priorities are
// refused as unsupported.
func TestRedisStreamsRedelivery(t *testing.T) {
	port := startPeer(t, "redis-server", redisArgs)
	const vt = 300 * time.Millisecond
	tg := NewRedisStreamsTarget(fmt.Sprintf("127.0.0.1:%d", port), 2, vt)
	defer tg.Close()
	ctx := context.Background()
	if err := tg.Prepare(ctx, []string{"redeliver"}, true); err != nil {
		t.Fatal(err)
	}
	a, _ := tg.NewClient(ctx)
	b, _ := tg.NewClient(ctx)
	body := []byte("0000000000000001-redelivered")
	if n, err := a.Send(ctx, 0, []bench.Outgoing{{Body: body}, {Body: body}}); n != 2 || err != nil {
		t.Fatalf("send: %d %v", n, err)
	}
	if _, err := a.Send(ctx, 0, []bench.Outgoing{{Body: body, Priority: 1}}); !errors.Is(err, bench.ErrUnsupported) {
		t.Fatalf("priority: %v, want ErrUnsupported", err)
	}
	var got []string
	fn := func(b []byte) { got = append(got, string(b)) }
	if n, err := a.Receive(ctx, 0, 16, 0, fn); n != 2 || err != nil {
		t.Fatalf("receive: %d %v", n, err)
	}
	start := time.Now()
	// a stalls with both entries pending; b finds nothing new, and nothing
	// to claim before the visibility timeout.
	if n, err := b.Receive(ctx, 0, 16, 0, fn); n != 0 || err != nil {
		t.Fatalf("receive before the timeout: %d %v", n, err)
	}
	for {
		n, err := b.Receive(ctx, 0, 16, 0, fn)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			if n != 2 {
				t.Fatalf("redelivered %d, want 2", n)
			}
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("nothing redelivered within 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if time.Since(start) < vt {
		t.Fatalf("redelivered after %v, before the visibility timeout", time.Since(start))
	}
	for _, g := range got {
		if g != string(body) {
			t.Fatalf("body came back as %q", g)
		}
	}
	if n, err := tg.Backlog(ctx, 0); n != 2 || err != nil {
		t.Fatalf("backlog %d %v, want 2 pending", n, err)
	}
	if n, err := b.Delete(ctx, 2); n != 2 || err != nil {
		t.Fatalf("delete: %d %v", n, err)
	}
	if n, err := tg.Backlog(ctx, 0); n != 0 || err != nil {
		t.Fatalf("backlog %d %v after the delete", n, err)
	}
	// a's late delete of the same entries finds none.
	if n, err := a.Delete(ctx, 2); n != 0 || err == nil {
		t.Fatalf("late delete: %d %v", n, err)
	}
}
