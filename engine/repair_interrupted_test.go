package engine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/smqd/smqd/wal"
)

// docs/operations.md, "Repairing a damaged log": a queue whose create
// record was lost in the tail a kill -9 left is recreated by --wal-repair
// as recovered-queue-<id>, holding its messages. The log's Open writes its
// skip records before the engine recreates the queue; a start killed
// between the two left a log that showed no damage, and the next start
// dropped the queue's acknowledged messages as messages of no known queue
// (smqd, a queue of 50 messages: orphans=50, no report).
func TestARepairStoppedBeforeItSettledStillRecreatesTheQueue(t *testing.T) {
	dir := t.TempDir()
	clk := NewFakeClock(t0)
	b := openDurableTest(t, dir, clk, nil)
	mustQueue(t, b, "first", DefaultQueueConfig())
	if err := durableOf(b).checkpoint(); err != nil { // the clock stands: no other checkpoint follows
		t.Fatal(err)
	}
	q := mustQueue(t, b, "q", DefaultQueueConfig())
	const n = 20
	for i := range n {
		if _, err := q.Send([]SendEntry{{Body: []byte(fmt.Sprintf("m%02d", i))}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	crashBroker(b)
	var create *walRecord
	recs := listRecords(t, dir)
	for i := range recs {
		if recs[i].typ == recQueueCreate {
			create = &recs[i] // the last: q's, in the tail
		}
	}
	if create == nil {
		t.Fatal("no queue create record in the log")
	}
	damageAt(t, dir, create.pos+create.size/2, 1, func(b []byte) { b[0] ^= 0x40 })

	// What a --wal-repair start leaves when it is killed right after the
	// log's Open: its mark (if it makes one) and the skip records.
	if err := os.WriteFile(filepath.Join(dir, "repair-pending"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := wal.Open(filepath.Join(dir, "wal"), wal.Options{SegmentBytes: 256 << 10, Repair: true})
	if err != nil {
		t.Fatal(err)
	}
	repaired := len(l.Recovery().Repairs)
	l.Close()
	if repaired == 0 {
		t.Fatal("the log's repair skipped nothing")
	}

	b = openDurableTest(t, dir, clk, nil) // without --wal-repair: the log shows no damage now
	defer b.Close()
	rq, err := b.Queue(fmt.Sprintf("recovered-queue-%d", create.qid))
	if err != nil {
		t.Fatalf("the queue of the lost create record is not recreated: %v", err)
	}
	if info, _ := rq.Attributes(); info.Active != n {
		t.Fatalf("the recreated queue holds %d messages, want %d", info.Active, n)
	}
	if _, err := os.Stat(filepath.Join(dir, "repair-pending")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the repair mark is still there: %v", err)
	}
}
