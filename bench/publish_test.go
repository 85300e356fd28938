package bench

import (
	"context"
	"errors"
	"os"
	"runtime"
	"testing"
	"time"
)

// TestSmokePublish runs the publish workload for about a second, with one
// and with four queue subscriptions, against an smqd server over a
// loopback listener and against the engine in process, with consumers and
// without (producers only). Nothing timed is asserted.
func TestSmokePublish(t *testing.T) {
	targets := []struct {
		name string
		make func(t *testing.T) Target
	}{
		{"server", func(t *testing.T) Target { return startServer(t, openBroker(t, true)) }},
		{"inproc", func(t *testing.T) Target { return NewInproc(openBroker(t, false), 0) }},
	}
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			for _, subs := range []int{1, 4} {
				for _, consumers := range []int{4, 0} {
					target := tg.make(t)
					cfg := smokeConfig(Publish)
					cfg.SendBatch = 1 // receive 4, delete 2 at a time, as the other smoke runs
					cfg.PriorityMix = nil
					cfg.Queues, cfg.Consumers = subs, consumers
					if runtime.GOOS == "linux" {
						cfg.ServerPID = os.Getpid() // the server runs in this process
					}
					res, err := Run(context.Background(), target, cfg)
					if err != nil {
						t.Fatalf("%d subs, %d consumers: %v", subs, consumers, err)
					}
					checkResult(t, res)
					if res.Subscriptions != subs || res.Workload != "publish" {
						t.Fatalf("result %+v", res)
					}
					// Every delivery deleted in the window was published
					// (possibly in the warm-up), and nothing is lost: the
					// queues hold what was delivered and not deleted.
					var left int64
					for i := 0; i < subs; i++ {
						n, err := target.Backlog(context.Background(), i)
						if err != nil {
							t.Fatal(err)
						}
						left += n
					}
					if consumers == 0 && left < res.Sent*int64(subs) {
						t.Fatalf("%d subs: %d published in the window, %d queue messages in all", subs, res.Sent, left)
					}
					if runtime.GOOS == "linux" && (res.ServerCPUUsPerPublish <= 0 || res.ServerCPUUsPerMsg <= 0) {
						t.Fatalf("CPU per publish %v, per message %v", res.ServerCPUUsPerPublish, res.ServerCPUUsPerMsg)
					}
					// Producers only, a message is a publish.
					if d := res.ServerCPUUsPerPublish - res.ServerCPUUsPerMsg; consumers == 0 && (d > 0.02 || d < -0.02) {
						t.Fatalf("producers only: %v µs/publish, %v µs/msg", res.ServerCPUUsPerPublish, res.ServerCPUUsPerMsg)
					}
				}
			}
		})
	}
}

// TestPublishWire publishes one message through the MNS client to a topic
// with three queue subscriptions and receives it, body intact, from each.
func TestPublishWire(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	target := startServer(t, openBroker(t, false))
	names := []string{"pw-0", "pw-1", "pw-2"}
	if err := target.Prepare(ctx, names, true); err != nil {
		t.Fatal(err)
	}
	for range 2 { // fresh twice: the second run deletes and recreates the topic
		if err := target.PrepareTopic(ctx, "pw-topic", true); err != nil {
			t.Fatal(err)
		}
	}
	c, err := target.NewClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := newBody(300, 7)
	putStamp(body, 42)
	if err := c.(Publisher).Publish(ctx, &Outgoing{Body: body}); err != nil {
		t.Fatal(err)
	}
	for i := range names {
		var got []byte
		n, err := c.Receive(ctx, i, 16, time.Second, func(b []byte) { got = append([]byte(nil), b...) })
		if n != 1 || err != nil {
			t.Fatalf("queue %d: %d %v", i, n, err)
		}
		if string(got) != string(body) {
			t.Fatalf("queue %d: body %q", i, got)
		}
		if n, err := c.Delete(ctx, 1); n != 1 || err != nil {
			t.Fatalf("delete: %d %v", n, err)
		}
	}
	// A topic that is gone is an error, not a silent success.
	target.admMu.Lock()
	st, _, err := target.adm.do("DELETE", "/topics/pw-topic", nil, 0)
	target.admMu.Unlock()
	if st != 204 || err != nil {
		t.Fatalf("delete topic: %d %v", st, err)
	}
	if err := c.(Publisher).Publish(ctx, &Outgoing{Body: body}); err == nil {
		t.Fatal("publish to a deleted topic succeeded")
	}
}

// TestPublishNeedsTopics: a target without topics refuses the workload, and
// the publish configuration is checked.
func TestPublishNeedsTopics(t *testing.T) {
	t.Parallel()
	target := NewSpread([]Target{NewInproc(openBroker(t, false), 0)})
	cfg := smokeConfig(Publish)
	cfg.SendBatch, cfg.PriorityMix = 1, nil
	if _, err := Run(context.Background(), target, cfg); !errors.Is(err, ErrNoTopics) {
		t.Fatalf("publish on a target without topics: %v", err)
	}
	for _, bad := range []func(*Config){
		func(c *Config) { c.SendBatch = 4 },
		func(c *Config) { c.PriorityMix = []Weight{{1, 1}} },
		func(c *Config) { c.Queues = 101 },
	} {
		c := smokeConfig(Publish)
		c.SendBatch, c.PriorityMix = 1, nil
		bad(&c)
		if err := c.withDefaults().Validate(); err == nil {
			t.Errorf("config %+v accepted", c)
		}
	}
}
