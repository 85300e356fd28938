package bench

import (
	"context"
	"strings"
	"testing"

	"github.com/smqd/smqd/engine"
)

// Figures of runs that went wrong must say so (the benchmark-honesty
// audit, 2026-12-06); each of these passed unnoticed before.

// A request that fails counts once, as an error, and in no latency: a
// run whose every send was refused showed 50 % errors and a p50.
func TestFailedRequestsCountOnce(t *testing.T) {
	t.Parallel()
	target := startServer(t, openBroker(t, false))
	cfg := smokeConfig(Produce)
	cfg.Consumers = 0
	cfg.BodyBytes = 70000 // over the queues' 64 KiB: every send is refused
	res, err := Run(context.Background(), target, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors == 0 || res.Requests != 0 || res.ErrorPct != 100 || res.Send.Count != 0 {
		t.Fatalf("every send refused: %d errors, %d requests, %.2f %%, %d send latencies", res.Errors, res.Requests, res.ErrorPct, res.Send.Count)
	}
}

// A backlog drain that finds fewer messages than were preloaded fails:
// it reported the rate of what was left and exited 0.
func TestBacklogDrainCountsWhatItPreloaded(t *testing.T) {
	t.Parallel()
	b := openBroker(t, false)
	target := startServer(t, b)
	cfg := smokeConfig(Backlog)
	cfg.Messages, cfg.Queues = 1000, 1
	cfg.AfterPreload = func() { // 16 messages lost by the "broker"
		q, err := b.Queue(cfg.QueuePrefix + "-0")
		if err != nil {
			t.Error(err)
			return
		}
		ms, err := q.Receive(context.Background(), engine.ReceiveOptions{Max: 16}, nil)
		if err != nil {
			t.Error(err)
			return
		}
		hs := make([]engine.ReceiptHandle, len(ms))
		for i, m := range ms {
			hs[i] = m.Handle
		}
		if _, err := q.Delete(hs, make([]error, len(hs))); err != nil {
			t.Error(err)
		}
	}
	cfg.QueuePrefix = "lossy"
	_, err := Run(context.Background(), target, cfg)
	if err == nil || !strings.Contains(err.Error(), "16 lost") {
		t.Fatalf("a drain missing 16 messages: %v", err)
	}
}

// lossyTarget acknowledges every 16th send of a batch of one without
// storing it: a broker that loses acknowledged messages.
type lossyTarget struct{ Target }

func (t lossyTarget) NewClient(ctx context.Context) (Client, error) {
	c, err := t.Target.NewClient(ctx)
	return &lossyClient{Client: c}, err
}

type lossyClient struct {
	Client
	n int
}

func (c *lossyClient) Send(ctx context.Context, i int, msgs []Outgoing) (int, error) {
	if c.n++; c.n%16 == 0 {
		return len(msgs), nil
	}
	return c.Client.Send(ctx, i, msgs)
}

// A cycle whose broker loses acknowledged messages is flagged; counted at
// rest, so that a run on a loaded machine is not (the window's samples,
// taken while workers run, disagreed beyond their tolerance on a
// publish smoke run of a broker that lost nothing).
func TestCycleLosingMessagesIsFlagged(t *testing.T) {
	t.Parallel()
	for _, lossy := range []bool{false, true} {
		var target Target = NewInproc(openBroker(t, false), 0)
		if lossy {
			target = lossyTarget{target}
		}
		cfg := smokeConfig(Cycle)
		cfg.SendBatch, cfg.Producers = 1, 4
		res, err := Run(context.Background(), target, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if res.CountsDisagree != lossy || lossy && res.RestDiff >= 0 || !lossy && res.RestDiff != 0 {
			t.Fatalf("lossy %v: counts disagree %v, at rest %d (tolerance %d)", lossy, res.CountsDisagree, res.RestDiff, res.RestTolerance)
		}
	}
}

// smqbench report leaves failed runs out of the medians and says so.
func TestReportLeavesFailedRunsOut(t *testing.T) {
	rs := []Result{
		{Label: "b1", Target: "smqd", Workload: "cycle", DeletedPerS: 300},
		{Label: "b1", Target: "redis", Workload: "cycle", DeletedPerS: 200},
		{Label: "b1", Target: "redis", Workload: "cycle", DeletedPerS: 20, Error: "dial tcp: connection refused"},
		{Label: "b2", Target: "redis", Workload: "cycle", DeletedPerS: 20, Error: "dial tcp: connection refused"},
	}
	var b strings.Builder
	if err := WriteReport(&b, rs, "smqd"); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"1.50x (redis)", "1 (+1 failed, left out)", "redis: 1 run(s), all failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}
