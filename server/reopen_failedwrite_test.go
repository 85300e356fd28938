package server

import (
	"io"
	"log/slog"
	"syscall"
	"testing"
	"time"
)

// A write (not an fsync) that fails leaves nothing unsynced behind it, so
// the log's Resync had nothing to rewrite and returned nil without touching
// the disk: the server closed the failed broker and tried to reopen it
// while the disk still refused everything, and until a reopen succeeded
// there was no broker at all: reads were answered 503 for the whole outage
// (backing off to a minute), where docs/operations.md says that while the
// disk refuses the resync "the broker stays as it is" and reads keep
// working (faults2 audit: a FUSE file system failing writes under a real
// smqd). Resync must find out whether the disk takes writes again.
func TestFailedWriteKeepsTheBrokerWhileTheDiskRefuses(t *testing.T) {
	env, ffs := reopeningEnv(t)
	c := env.client()
	c.mustCreate("r")
	c.mustSend("r", "before", "")
	ffs.FailWrites(syscall.EIO)
	ffs.FailSyncs(syscall.EIO)
	wantError(t, c.post("/queues/r/messages", sendBody("during", "")), 500, "InternalError")
	// Wait (bounded) until the server has tried the disk again at least
	// twice after the failure (a resync, or a reopen).
	first := ffs.Injected()
	for bound := time.Now().Add(30 * time.Second); ffs.Injected() < first+2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(bound) {
			t.Fatal("the server did not try the disk again within 30 s")
		}
	}
	if env.srv.Broker() == nil {
		t.Error("the failed broker was closed while the disk still refused writes: no broker serves reads")
	}
	if r := c.get("/queues/r"); r.status != 200 {
		t.Errorf("GetQueueAttributes while the disk refuses writes: %s, want 200 (reads keep working)", r)
	}
	ffs.Disarm()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := c.post("/queues/r/messages", sendBody("after", ""))
		if r.status == 201 {
			break
		}
		if r.status != 500 && r.status != 503 {
			t.Fatalf("a send after the disk came back: %s", r)
		}
		if time.Now().After(deadline) {
			t.Fatal("changes not taken again 30 s after the disk came back")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if r := c.get("/queues/r/messages?peekonly=true&numOfMessages=16"); r.status != 200 {
		t.Fatalf("peek after the reopen: %s", r)
	}
}

// While the log refuses every change, each refused request logged its
// cause: about 9,000 Error lines a second under load (faults2 audit). At
// most one a second gets through, with the count of those held back.
func TestFailedRequestsLogAtMostOnceASecond(t *testing.T) {
	var logs lockedBuffer
	env, ffs := reopeningEnvWith(t, func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(&logs, tWriter{t}), nil))
	})
	c := env.client()
	c.mustCreate("r")
	ffs.FailWrites(syscall.EIO)
	ffs.FailSyncs(syscall.EIO)
	start := time.Now()
	const n = 50
	for range n {
		if r := c.post("/queues/r/messages", sendBody("during", "")); r.status < 500 {
			t.Fatalf("a send while the disk refuses: %s", r)
		}
	}
	elapsed := time.Since(start)
	lines := len(logs.lines(`"request failed"`))
	if allowed := int(elapsed/time.Second) + 1; lines < 1 || lines > allowed {
		t.Errorf("%d request-failed lines for %d refused sends in %v, want 1..%d", lines, n, elapsed, allowed)
	}
	ffs.Disarm()
}
