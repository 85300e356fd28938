package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// docs/operations.md, "Sync modes": MessageIds are never reused, because
// each start bumps a boot counter kept in the index. With the index
// directory gone (deleted, or lost with its disk) and the log whole, the
// broker rebuilds every queue and message from the log, but the boot
// counter restarted at 1: new sends took the MessageIds (and index keys) of
// live messages, and after the next checkpoint the older messages were
// silently gone (recovery audit, 2026-12-07: smqd, 1506 messages → 1503).
func TestLostIndexNeverReusesMessageIDs(t *testing.T) {
	dir := t.TempDir()
	clk := NewFakeClock(t0)
	b := openDurableTest(t, dir, clk, nil)
	q := mustQueue(t, b, "q", DefaultQueueConfig())
	seen := map[MessageID]string{}
	send := func(q *Queue, body string) {
		t.Helper()
		res, err := q.Send([]SendEntry{{Body: []byte(body)}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if was, ok := seen[res[0].ID]; ok {
			t.Errorf("MessageId %s of %q reused for %q", res[0].ID, was, body)
		}
		seen[res[0].ID] = body
	}
	for i := range 3 {
		send(q, fmt.Sprintf("before-%d", i))
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "index")); err != nil {
		t.Fatal(err)
	}

	b = openDurableTest(t, dir, clk, nil)
	q, err := b.Queue("q")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		send(q, fmt.Sprintf("after-%d", i))
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	b = openDurableTest(t, dir, clk, nil)
	defer b.Close()
	q, err = b.Queue("q")
	if err != nil {
		t.Fatal(err)
	}
	got, err := q.Peek(MaxBatch, nil)
	if err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for _, m := range got {
		bodies = append(bodies, string(m.Body))
	}
	if len(got) != 6 {
		t.Fatalf("after the index was rebuilt from the log and a restart: %d messages %q, want the 6 sent", len(got), bodies)
	}
}

// docs/operations.md, "Start-up and recovery": log segments missing before
// the checkpoint fail the start, and --wal-repair starts anyway, dropping
// and reporting the messages whose bodies are gone. With the first segment
// file deleted after a clean stop the broker started without a word,
// counted every message as live, and each receive that met one of the
// messages whose body was in it failed (smqd: 500 InternalError, "engine:
// log segment removed") while they stayed in the queue for ever
// (recovery audit, 2026-12-07).
func TestMissingFirstSegmentFailsTheStart(t *testing.T) {
	dir := t.TempDir()
	clk := NewFakeClock(t0)
	b := openDurableTest(t, dir, clk, nil)
	q := mustQueue(t, b, "q", DefaultQueueConfig())
	const n = 1500 // 1 KiB each: six 256 KiB segments
	body := strings.Repeat("x", 1000)
	for i := range n {
		if _, err := q.Send([]SendEntry{{Body: []byte(fmt.Sprintf("%04d%s", i, body))}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
	if len(segs) < 3 {
		t.Fatalf("segments: %v", segs)
	}
	if err := os.Remove(segs[0]); err != nil { // sorted: the oldest
		t.Fatal(err)
	}

	if b, err := Open(durableTestOptions(t, dir, clk, nil)); err == nil {
		q, _ := b.Queue("q")
		info, _ := q.Attributes()
		b.Close()
		t.Fatalf("the first segment deleted: the start succeeded with %d messages, want it to fail", info.Active)
	} else {
		t.Logf("the refusal: %v", err)
		if !strings.Contains(err.Error(), "--wal-repair") {
			t.Errorf("the refusal does not name --wal-repair: %v", err)
		}
	}

	b = openDurableTest(t, dir, clk, func(o *Options) { o.WAL.Repair = true })
	defer b.Close()
	rec := b.Recovery()
	q, err := b.Queue("q")
	if err != nil {
		t.Fatal(err)
	}
	info, _ := q.Attributes()
	if rec.Lost == 0 || int(info.Active)+rec.Lost != n {
		t.Fatalf("--wal-repair: %d messages kept, %d reported lost, want %d in all and some lost", info.Active, rec.Lost, n)
	}
	// Every message kept is received, without an error.
	read := 0
	for range n {
		got, err := q.Receive(context.Background(), ReceiveOptions{Max: MaxBatch, HasWait: true}, nil)
		if err == ErrMessageNotExist {
			break
		}
		if err != nil {
			t.Fatalf("receive after %d: %v", read, err)
		}
		hs := make([]ReceiptHandle, len(got))
		for i, m := range got {
			hs[i] = m.Handle
		}
		if _, err := q.Delete(hs, make([]error, len(hs))); err != nil {
			t.Fatal(err)
		}
		read += len(got)
	}
	if read != int(info.Active) {
		t.Fatalf("received %d of the %d kept", read, info.Active)
	}
}

// docs/operations.md, "Start-up and recovery" and "Failure modes": a bad
// record followed by valid ones fails the start with an error naming the
// segment, the offset and --wal-repair. The log's Open checks only the
// newest segment; a bad record in an older segment that a kill -9 left in
// the replayed tail was met by the replay, and the start failed with
// "engine: replay log at 0: wal: corrupt record at pos ... checksum
// mismatch": a wrong position and no word of --wal-repair (recoveraudit,
// 2026-12-07, smqd --wal-segment-bytes 131072, kill -9 after 1500 sends).
func TestCorruptRecordInReplayedOlderSegmentNamesRepair(t *testing.T) {
	dir := t.TempDir()
	clk := NewFakeClock(t0)
	b := openDurableTest(t, dir, clk, nil)
	q := mustQueue(t, b, "q", DefaultQueueConfig())
	const n = 1000 // 1 KiB each: four 256 KiB segments, none checkpointed
	body := strings.Repeat("x", 1000)
	for i := range n {
		if _, err := q.Send([]SendEntry{{Body: []byte(fmt.Sprintf("m%04d%s", i, body))}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	crashBroker(b)
	segs, _ := filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
	if len(segs) < 3 {
		t.Fatalf("segments: %v", segs)
	}
	seg := segs[1] // neither the first nor the newest
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	at := strings.Index(string(data), "x"+body[:200]) // inside some message's body
	if at < 0 {
		t.Fatal("no body in the segment")
	}
	data[at+100] ^= 0x40
	if err := os.WriteFile(seg, data, 0o600); err != nil {
		t.Fatal(err)
	}

	if b, err := Open(durableTestOptions(t, dir, clk, nil)); err == nil {
		b.Close()
		t.Fatal("a bad record in the replayed tail: the start succeeded")
	} else {
		t.Logf("the refusal: %v", err)
		for _, want := range []string{filepath.Base(strings.TrimSuffix(seg, ".wal")), "offset", "--wal-repair"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the refusal does not name %q: %v", want, err)
			}
		}
		if strings.Contains(err.Error(), "replay log at 0:") {
			t.Errorf("the refusal names position 0: %v", err)
		}
	}
	b = openDurableTest(t, dir, clk, func(o *Options) { o.WAL.Repair = true })
	defer b.Close()
	q, err = b.Queue("q")
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := q.Attributes(); info.Active != n-1 {
		t.Fatalf("--wal-repair: %d messages, want %d", info.Active, n-1)
	}
}

// The same with an older copy of the index put back (a file-level copy of
// the data directory's index/, the log whole): the boot counter came back
// at the copy's, the next start's sends took the MessageIds of the sends
// of a later start still in the log, and a restart after them lost those
// (recovery audit, 2026-12-07: smqd, 15 messages → 10).
func TestOlderIndexNeverReusesMessageIDs(t *testing.T) {
	dir := t.TempDir()
	clk := NewFakeClock(t0)
	send := func(b *Broker, n int, tag string) {
		t.Helper()
		q, err := b.Queue("q")
		if err != nil {
			q = mustQueue(t, b, "q", DefaultQueueConfig())
		}
		for i := range n {
			if _, err := q.Send([]SendEntry{{Body: []byte(fmt.Sprintf("%s-%d", tag, i))}}, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
	send(openDurableTest(t, dir, clk, nil), 5, "first")
	old := filepath.Join(t.TempDir(), "index")
	if err := os.CopyFS(old, os.DirFS(filepath.Join(dir, "index"))); err != nil {
		t.Fatal(err)
	}
	send(openDurableTest(t, dir, clk, nil), 5, "second")
	if err := os.RemoveAll(filepath.Join(dir, "index")); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(dir, "index"), os.DirFS(old)); err != nil {
		t.Fatal(err)
	}
	send(openDurableTest(t, dir, clk, nil), 5, "third")

	b := openDurableTest(t, dir, clk, nil)
	defer b.Close()
	q, err := b.Queue("q")
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := q.Attributes(); info.Active != 15 {
		t.Fatalf("after an older index was put back, 5 sends and a restart: %d messages, want the 15 sent", info.Active)
	}
}
