package bench

import (
	"context"
	"encoding/xml"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// sdkTarget returns an SDK-like target for the server behind fast.
func sdkTarget(t *testing.T, fast *MNSTarget) *SDKTarget {
	tg := NewSDKTarget(MNSOptions{Addr: fast.opts.Addr, AccessKeyID: testKeyID, AccessKeySecret: testSecret})
	t.Cleanup(func() { tg.Close() })
	return tg
}

// TestSDKClientWire checks the SDK-like client's single and batch forms
// against smqd's handlers, a partial batch delete, an empty receive, and
// that bodies survive the trip.
func TestSDKClientWire(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	target := sdkTarget(t, startServer(t, openBroker(t, false)))
	if target.Name() != "smqd" {
		t.Fatalf("name %q", target.Name())
	}
	if err := target.Prepare(ctx, []string{"sdkwire"}, true); err != nil {
		t.Fatal(err)
	}
	c, err := target.NewClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := newBody(100, 1)
	putStamp(body, 42)
	if n, err := c.Send(ctx, 0, []Outgoing{{Body: body, Priority: 3}}); n != 1 || err != nil {
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
	sc := c.(*sdkClient)
	h := []byte(sc.pending[3])
	h[len(h)-1] ^= 1
	sc.pending[3] = string(h)
	n, err := c.Delete(ctx, 16)
	if n != 15 || err == nil || !strings.Contains(err.Error(), "1 entries failed") {
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
	// Errors carry the MNS code from the decoded error body.
	if _, err := c.Send(ctx, 0, []Outgoing{{Body: body, Priority: 99}}); err == nil || !strings.Contains(err.Error(), "InvalidArgument") {
		t.Fatalf("bad priority: %v", err)
	}
}

// TestSDKRequestShape checks that request bodies are what an SDK marshals:
// no declaration, no namespace, DelaySeconds and Priority always present.
func TestSDKRequestShape(t *testing.T) {
	b, err := xml.Marshal(sdkBatchSendRequest{Messages: []sdkSendRequest{{MessageBody: "a<b", Priority: 8}}})
	if err != nil {
		t.Fatal(err)
	}
	want := "<Messages><Message><MessageBody>a&lt;b</MessageBody><DelaySeconds>0</DelaySeconds><Priority>8</Priority></Message></Messages>"
	if string(b) != want {
		t.Fatalf("got %s\nwant %s", b, want)
	}
}

// TestSmokeSDKCPU runs a short cycle with the SDK-like client against an
// in-process server and this process as the "server": the CPU figures must
// be present and sane (no timing assertions).
//
// Not parallel: the SDK-like client is CPU hungry, and the open-loop test
// (parallel) measures a schedule.
func TestSmokeSDKCPU(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("server CPU is read from /proc")
	}
	target := sdkTarget(t, startServer(t, openBroker(t, true)))
	cfg := smokeConfig(Cycle)
	cfg.PriorityMix = nil
	cfg.ServerPID, cfg.Client = os.Getpid(), "sdk"
	res, err := Run(context.Background(), target, cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, res)
	checkCPU(t, res, true)
	if res.Client != "sdk" {
		t.Fatalf("client %q", res.Client)
	}
}

// checkCPU checks that a run's CPU figures are present and possible.
func checkCPU(t *testing.T, res *Result, server bool) {
	t.Helper()
	if res.CPUWallS <= 0 || res.CPUs < 1 {
		t.Fatalf("no CPU window: %+v", res)
	}
	ceiling := res.CPUWallS*float64(res.CPUs) + 0.02 // a tick of slack
	if res.ClientCPUS <= 0 || res.ClientCPUUsPerMsg <= 0 || res.ClientCPUS > ceiling {
		t.Errorf("client CPU %v s (%v µs/msg) over %v s on %d CPUs", res.ClientCPUS, res.ClientCPUUsPerMsg, res.CPUWallS, res.CPUs)
	}
	if !server {
		return
	}
	if res.ServerPID <= 0 || res.ServerCPUS <= 0 || res.ServerCPUUsPerMsg <= 0 || res.ServerCPUS > ceiling || res.ServerCores > float64(res.CPUs)+0.1 {
		t.Errorf("server CPU %v s (%v cores, %v µs/msg, pid %d) over %v s on %d CPUs", res.ServerCPUS, res.ServerCores, res.ServerCPUUsPerMsg, res.ServerPID, res.CPUWallS, res.CPUs)
	}
}
