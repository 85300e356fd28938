package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// docs/operations.md, "Start-up and recovery": log segments missing after
// the checkpoint (an index older than the log put back) fail the start,
// also with --wal-repair, with an error that says so. When the oldest
// segment was still live, so that the log did not start after the old
// checkpoint, the replay met a hole left by compaction and the start
// failed with "engine: replay log at 0: wal: segment removed: pos N": a
// wrong position and no word of what happened or what to do.
func TestAnIndexOlderThanTheLogWithSegmentsRemovedSaysSo(t *testing.T) {
	dir := t.TempDir()
	clk := NewFakeClock(t0)
	b := openDurableTest(t, dir, clk, nil) // 256 KiB segments
	keep := mustQueue(t, b, "keep", DefaultQueueConfig())
	sendN(t, keep, 200, 1000, 0) // the first segment stays mostly live
	b.Close()
	old := t.TempDir()
	copyDir(t, filepath.Join(dir, "index"), old)

	b = openDurableTest(t, dir, clk, nil)
	churn := mustQueue(t, b, "churn", DefaultQueueConfig())
	for range 4 {
		sendN(t, churn, 300, 1000, 0)
		drain(t, churn, 300)
	}
	compactAll(t, b)
	b.Close()
	if holes, _ := filepath.Glob(filepath.Join(dir, "wal", "*.hole")); len(holes) == 0 {
		t.Fatal("compaction removed no segment in the middle of the log")
	}
	if err := os.RemoveAll(filepath.Join(dir, "index")); err != nil {
		t.Fatal(err)
	}
	copyDir(t, old, filepath.Join(dir, "index"))

	for _, repair := range []bool{false, true} {
		b, err := Open(durableTestOptions(t, dir, clk, func(o *Options) { o.WAL.Repair = repair }))
		if err == nil {
			b.Close()
			t.Fatalf("repair %v: an index older than the log opened", repair)
		}
		t.Logf("repair %v: %v", repair, err)
		for _, want := range []string{"older than the log", "restore a backup"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("repair %v: the refusal does not say %q: %v", repair, want, err)
			}
		}
		if strings.Contains(err.Error(), "replay log at 0:") {
			t.Errorf("repair %v: the refusal names position 0: %v", repair, err)
		}
	}
}
