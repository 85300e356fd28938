package engine

// archeng audit: a receive's state record "rides the next group commit"
// (docs/architecture.md, Records). A power loss before it leaves the
// message as it was before the receive: generation g, not g+1. The next
// receive after the restart bumps it to g+1 again and issues, byte for
// byte, the handle the lost receive issued: the consumer that received it
// before the crash can delete (or hide) the message now leased to another.

import (
	"context"
	"testing"

	"github.com/smqd/smqd/wal"
)

func TestLostReceiveDoesNotReissueItsHandle(t *testing.T) {
	dir, fs, clk := t.TempDir(), wal.NewMemFS(), NewFakeClock(t0)
	b := powerLossOpen(t, dir, fs, clk, wal.SyncAlways)
	q := mustQueue(t, b, "h", keptConfig())
	ctx := context.Background()
	if _, err := q.SendOne(ctx, SendEntry{Body: []byte("m")}); err != nil {
		t.Fatal(err) // fsynced (SyncAlways)
	}
	before, err := q.ReceiveOne(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	lost := fs.CrashClone(nil) // the receive's record was not synced
	crashBroker(b)
	b2 := powerLossOpen(t, dir, lost, clk, wal.SyncAlways)
	defer b2.Close()
	q2, err := b2.Queue("h")
	if err != nil {
		t.Fatal(err)
	}
	after, err := q2.ReceiveOne(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("handle before the power loss %s, after %s", before.Handle, after.Handle)
	if before.Handle == after.Handle {
		errs := make([]error, 1)
		_, err := q2.Delete([]ReceiptHandle{before.Handle}, errs)
		t.Errorf("the handle of the lost receive is issued again to the next receive; with it, the consumer from before the crash deletes the message now leased to another (delete: %v %v)", err, errs[0])
	}
}
