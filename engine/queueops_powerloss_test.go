package engine

// docs/operations.md, "Sync modes": "In every mode: Queue operations
// (CreateQueue, SetQueueAttributes, DeleteQueue) are fsynced before they
// are answered" (durable.go invariant 4; adminRecord). The power-loss
// harness (powerloss_test.go) runs in --sync always only, and the model
// test loses power only after a Broker.Sync, so neither saw a queue
// operation answered before its fsync in interval or none mode.

import (
	"testing"
	"time"

	"github.com/smqd/smqd/wal"
)

// TestQueueOperationsSurviveAPowerLossInEverySyncMode: with nothing else
// fsyncing (interval mode's timer an hour away, no checkpoint, no segment
// roll), a queue created, a queue's attributes changed and a queue deleted
// are each still so after a power loss (only fsynced bytes survive:
// MemFS.CrashClone(nil)) right after they were answered.
func TestQueueOperationsSurviveAPowerLossInEverySyncMode(t *testing.T) {
	for _, mode := range []wal.SyncMode{wal.SyncNone, wal.SyncInterval, wal.SyncAlways} {
		t.Run(mode.String(), func(t *testing.T) {
			dir, fs, clk := t.TempDir(), wal.NewMemFS(), NewFakeClock(t0)
			b := powerLossOpen(t, dir, fs, clk, mode)
			// The queues the operations change, made durable first.
			mustQueue(t, b, "attrs", keptConfig())
			mustQueue(t, b, "gone", keptConfig())
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}

			// The operations under test, each answered.
			if created, err := b.CreateQueue("made", keptConfig()); err != nil || !created {
				t.Fatalf("CreateQueue: created=%v err=%v", created, err)
			}
			vt := 7 * time.Minute
			if err := b.SetQueueAttributes("attrs", ConfigPatch{VisibilityTimeout: &vt}); err != nil {
				t.Fatal(err)
			}
			if err := b.DeleteQueue("gone"); err != nil {
				t.Fatal(err)
			}

			// The power fails right after the answers.
			lost := fs.CrashClone(nil)
			crashBroker(b)
			b2 := powerLossOpen(t, dir, lost, clk, mode)
			defer b2.Close()

			if _, err := b2.Queue("made"); err != nil {
				t.Errorf("a queue whose CreateQueue was answered is gone after a power loss: %v", err)
			}
			if q, err := b2.Queue("attrs"); err != nil {
				t.Errorf("queue attrs: %v", err)
			} else if info, err := q.Attributes(); err != nil {
				t.Errorf("queue attrs: %v", err)
			} else if info.Config.VisibilityTimeout != vt {
				t.Errorf("SetQueueAttributes was answered, but after a power loss VisibilityTimeout is %v, want %v", info.Config.VisibilityTimeout, vt)
			}
			if _, err := b2.Queue("gone"); err == nil {
				t.Errorf("a queue whose DeleteQueue was answered is back after a power loss")
			}
		})
	}
}
