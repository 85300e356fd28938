package engine

// Crash coverage of dead-letter moves (deadletter.go invariant 1): the log
// is captured at every fsync while messages move, and a broker is opened on
// each capture (what a power loss right after that fsync leaves). In every
// one, each message must be in exactly one of the two queues: never lost,
// never in both. TestDeadLetterCrashCatchesSplitMove breaks the move on
// purpose (two records, each durable on its own) and must see it fail.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smqd/smqd/index"
	"github.com/smqd/smqd/wal"
)

// syncHookFS calls after once each file Sync has returned.
type syncHookFS struct {
	wal.FS
	after func()
}

func (f syncHookFS) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return syncHookFile{file, f.after}, nil
}

type syncHookFile struct {
	wal.File
	after func()
}

func (h syncHookFile) Sync() error {
	err := h.File.Sync()
	if err == nil {
		h.after()
	}
	return err
}

// runMoveCrashes moves n messages to a dead-letter queue, capturing the log
// at every fsync, and checks every capture (with split, the deliberate
// break, only until one shows a problem). It returns the problems found and
// the number of captures checked.
func runMoveCrashes(t *testing.T, n int, split bool) ([]string, int) {
	root := t.TempDir()
	mem := wal.NewMemFS()
	clk := NewFakeClock(t0)
	var mu sync.Mutex
	capturing := false
	var images []*wal.MemFS
	var lastIdx *idxSnap
	open := func(fsys wal.FS) (*Broker, error) {
		o := Options{Dir: root, Clock: clk, Stripes: 2, testSplitMove: split}
		o.WAL.FS = fsys
		o.WAL.Sync = SyncAlways
		// No checkpoints while moving: the log alone must be right.
		o.CheckpointRecords, o.MaxReplayRecords = 1<<40, 1<<40
		o.CheckpointInterval = 24 * time.Hour
		o.testCommit = func(idx *index.Store, b *index.Batch) error {
			if err := idx.Commit(b); err != nil {
				return err
			}
			s, err := snapIndex(idx)
			if err == nil {
				mu.Lock()
				lastIdx = s
				mu.Unlock()
			}
			return err
		}
		return Open(o)
	}
	hook := syncHookFS{FS: mem, after: func() {
		mu.Lock()
		defer mu.Unlock()
		if capturing {
			images = append(images, mem.CrashClone(nil))
		}
	}}
	b, err := open(hook)
	if err != nil {
		t.Fatal(err)
	}
	dlq := mustQueue(t, b, "dlq", DefaultQueueConfig())
	src := mustQueue(t, b, "src", dlqConfig("dlq", 1))
	var entries []SendEntry
	for i := 0; i < n; i++ {
		entries = append(entries, SendEntry{Body: []byte(fmt.Sprintf("m%d", i)), Properties: testProps(i)})
	}
	ids := map[string]string{} // body -> id
	for i := 0; i < n; i += MaxBatch {
		res, err := src.Send(entries[i:min(n, i+MaxBatch)], nil)
		if err != nil {
			t.Fatal(err)
		}
		for k := range res {
			ids[string(entries[i+k].Body)] = res[k].ID.String()
		}
	}
	// One message received per millisecond, so that their hides end one
	// per millisecond too: the moves below then come one per receive, each
	// with an fsync of its own (a receive waits once for all it moves).
	for got := 0; got < n; {
		msgs, err := src.Receive(context.Background(), ReceiveOptions{Max: 1, HasWait: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got += len(msgs)
		clk.Advance(time.Millisecond)
	}
	clk.Advance(10*time.Second - time.Duration(n+1)*time.Millisecond) // a millisecond before the first hide ends
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	capturing = true
	images = append(images, mem.CrashClone(nil)) // before any move
	mu.Unlock()
	// Receives a millisecond apart, each moving the one message whose hide
	// just ended: many moves, many fsyncs.
	for i := 0; i < 4*n; i++ {
		clk.Advance(time.Millisecond)
		_, err := src.Receive(context.Background(), ReceiveOptions{Max: 1 + i%2, HasWait: true}, nil)
		if err != nil && err != ErrMessageNotExist {
			t.Fatal(err)
		}
	}
	if moved := src.deadLettered.Load(); moved != int64(n) {
		t.Fatalf("%d of %d messages moved", moved, n)
	}
	if info, _ := dlq.Attributes(); info.Active != int64(n) {
		t.Fatalf("dead-letter queue holds %+v", info)
	}
	mu.Lock()
	capturing = false
	caps, idx := images, lastIdx
	mu.Unlock()
	crashBroker(b)

	var problems []string
	for k, img := range caps {
		if split && len(problems) > 0 {
			return problems, k
		}
		dir := filepath.Join(root, "index")
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := idx.restore(dir); err != nil {
			t.Fatal(err)
		}
		b, err := open(img)
		if err != nil {
			t.Fatalf("capture %d: open: %v", k, err)
		}
		where := map[string][]string{} // body -> queues it is in
		for _, name := range []string{"src", "dlq"} {
			q, err := b.Queue(name)
			if err != nil {
				t.Fatalf("capture %d: %v", k, err)
			}
			err = dumpQueueMsgs(q, func(id MessageID, m *Message, state string, dq uint32, visible int64) {
				body := string(m.Body)
				where[body] = append(where[body], name)
				origin := id.String()
				if v, ok := sysProp(m, SysDLQOriginMessageID); ok {
					origin = v
				}
				if name == "dlq" && origin == id.String() {
					problems = append(problems, fmt.Sprintf("capture %d: %s in dlq without DLQ properties", k, body))
				}
				if ids[body] != origin {
					problems = append(problems, fmt.Sprintf("capture %d: %s has origin %s, sent as %s", k, body, origin, ids[body]))
				}
				var i int
				fmt.Sscanf(body, "m%d", &i)
				want := testProps(i)
				if len(m.Properties) < len(want) {
					problems = append(problems, fmt.Sprintf("capture %d: %s has %d properties", k, body, len(m.Properties)))
					return
				}
				for j := range want {
					if p := m.Properties[j]; string(p.Name) != string(want[j].Name) || string(p.Value) != string(want[j].Value) {
						problems = append(problems, fmt.Sprintf("capture %d: %s property %d is %s=%s", k, body, j, p.Name, p.Value))
					}
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, q)
		}
		for body := range ids {
			switch qs := where[body]; len(qs) {
			case 0:
				problems = append(problems, fmt.Sprintf("capture %d of %d: %s lost", k, len(caps), body))
			case 1:
			default:
				problems = append(problems, fmt.Sprintf("capture %d of %d: %s in %s", k, len(caps), body, strings.Join(qs, " and ")))
			}
		}
		crashBroker(b)
	}
	return problems, len(caps)
}

// moveCrashMessages is how many messages the crash tests move (a capture
// per move, and a broker opened on each).
func moveCrashMessages() int {
	if testing.Short() {
		return 5
	}
	return 24
}

func TestDeadLetterCrashAtEveryFsync(t *testing.T) {
	problems, caps := runMoveCrashes(t, moveCrashMessages(), false)
	if len(problems) > 0 {
		t.Fatalf("%d problems, first: %s", len(problems), strings.Join(problems[:min(10, len(problems))], "\n"))
	}
	if caps < moveCrashMessages() {
		t.Fatalf("only %d captures: the moves were not spread over fsyncs", caps)
	}
	t.Logf("%d captures, each message in exactly one queue in every one", caps)
}

// The break on purpose: a move logged as two records, each made durable on
// its own, must be caught (a capture between them holds the message in
// both queues).
func TestDeadLetterCrashCatchesSplitMove(t *testing.T) {
	problems, caps := runMoveCrashes(t, moveCrashMessages(), true)
	if len(problems) == 0 {
		t.Fatalf("%d captures of split moves and no problem found: the crash test cannot see a non-atomic move", caps)
	}
	t.Logf("caught, as it must be (%d problems in %d captures), first: %s", len(problems), caps, problems[0])
}
