package engine

// An acknowledged ChangeVisibility or delete is durable (sync always): a
// power loss at any moment after it returns keeps it. TestPowerLoss checks
// that over its whole history, but did not catch either returning before
// its record is synced (its power losses never fell between such a return
// and the writer's next fsync: 500 with -tags long for the change, the
// -short run for the delete). Here the writer's fsync is held, before it
// runs, until the operation has returned (or 50 ms have passed: only how
// soon a break is seen depends on that, never whether the right code
// passes), and the log is captured there: what the fsyncs before it had
// made durable. An image captured after the operation returned must hold
// it.

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smqd/smqd/wal"
)

// syncGateFS calls before ahead of each file Sync.
type syncGateFS struct {
	wal.FS
	before func()
}

func (f syncGateFS) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return syncGateFile{file, f.before}, nil
}

type syncGateFile struct {
	wal.File
	before func()
}

func (g syncGateFile) Sync() error {
	g.before()
	return g.File.Sync()
}

func TestAcknowledgedChangesSurvivePowerLoss(t *testing.T) {
	t.Run("visibility change", func(t *testing.T) {
		var next time.Time
		ackedThenPowerLoss(t, func(q *Queue, m Message) (err error) {
			_, next, err = q.ChangeVisibility(m.Handle, time.Hour)
			return err
		}, func(found bool, state string, visible int64) {
			if !found {
				t.Fatal("the message is gone after the power loss")
			}
			if state != "Inactive" || visible != next.UnixMilli() {
				t.Errorf("after the power loss the message is %s with NextVisibleTime %d; its acknowledged visibility change made it %d", state, visible, next.UnixMilli())
			}
		})
	})
	t.Run("delete", func(t *testing.T) {
		ackedThenPowerLoss(t, func(q *Queue, m Message) error {
			errs := make([]error, 1)
			if _, err := q.Delete([]ReceiptHandle{m.Handle}, errs); err != nil {
				return err
			}
			return errs[0]
		}, func(found bool, state string, _ int64) {
			if found {
				t.Errorf("the message is back, %s, after the power loss; its delete was acknowledged", state)
			}
		})
	})
}

// ackedThenPowerLoss sends and receives one message "m" durably, runs op
// on it with every fsync gated (see the top of the file), loses power as
// of the first fsync that started after op returned, and gives check what
// the broker recovered of "m".
func ackedThenPowerLoss(t *testing.T, op func(q *Queue, m Message) error, check func(found bool, state string, visible int64)) {
	dir, mem, clk := t.TempDir(), wal.NewMemFS(), NewFakeClock(t0)
	var armed, returned atomic.Bool
	var mu sync.Mutex
	var image *wal.MemFS // the log as of the first fsync that started after the change returned
	gate := syncGateFS{FS: mem, before: func() {
		if !armed.Load() {
			return
		}
		for i := 0; i < 50 && !returned.Load(); i++ {
			time.Sleep(time.Millisecond)
		}
		if returned.Load() {
			mu.Lock()
			if image == nil {
				image = mem.CrashClone(nil)
			}
			mu.Unlock()
		}
	}}
	open := func(fsys wal.FS) *Broker {
		o := Options{Dir: dir, Clock: clk, Stripes: 1}
		o.WAL.FS = fsys
		o.WAL.Sync = SyncAlways
		o.CheckpointInterval, o.CheckpointRecords, o.CheckpointBytes = 24*time.Hour, 1<<40, 1<<40
		o.Push.Disabled = true
		b, err := Open(o)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := open(gate)
	q := mustQueue(t, b, "v", keptConfig())
	ctx := context.Background()
	if _, err := q.SendOne(ctx, SendEntry{Body: []byte("m")}); err != nil {
		t.Fatal(err)
	}
	m, err := q.ReceiveOne(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(); err != nil { // the receive is durable
		t.Fatal(err)
	}
	armed.Store(true)
	err = op(q, m)
	returned.Store(true)
	if err != nil {
		t.Fatal(err)
	}
	// One more fsync after the return, so that an image is captured with
	// the right code too (and holds the change).
	if _, err := q.SendOne(ctx, SendEntry{Body: []byte("after")}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	lost := image
	mu.Unlock()
	if lost == nil {
		t.Fatal("no fsync started after the change returned")
	}
	crashBroker(b)
	b2 := open(lost)
	defer b2.Close()
	q2, err := b2.Queue("v")
	if err != nil {
		t.Fatal(err)
	}
	found, state, visible := false, "", int64(0)
	err = dumpQueueMsgs(q2, func(_ MessageID, msg *Message, st string, _ uint32, vis int64) {
		if string(msg.Body) == "m" {
			found, state, visible = true, st, vis
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	check(found, state, visible)
}
