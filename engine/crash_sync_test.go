package engine

// Kill -9 crash tests with sync "interval" and "none" (crash_test.go has
// the child and the checks): docs/operations.md "Sync modes" answers sends,
// deletes and visibility changes in these modes once their records are
// written to the OS, so a kill -9 of the process (not of the machine) loses
// none of them, as with "always". The interval is an hour, so its timer
// never fsyncs; what is fsynced comes from Broker.Sync, segment rolls and
// checkpoints only, and none of that matters to a kill -9. Every other
// cycle writes the log through crashSlowFS, so that records wait in the
// log's ring for milliseconds: an acknowledgement that did not wait for
// the write is then caught by the kill (a writer that keeps up in
// microseconds leaves almost no window).

import (
	"testing"
	"time"
)

// crashSyncCycles is each mode's cycles: a few with -short (make test),
// more without, many more with -tags long.
func crashSyncCycles() int {
	switch {
	case modelLong:
		return 100
	case testing.Short():
		return 8
	}
	return 12
}

// crashWriteDelay is how long crashSlowFS sleeps before each write.
const crashWriteDelay = 3 * time.Millisecond

func TestCrashKill9SyncInterval(t *testing.T) {
	runCrashKill9(t, "interval", crashSyncCycles(), crashWriteDelay)
}

func TestCrashKill9SyncNone(t *testing.T) {
	runCrashKill9(t, "none", crashSyncCycles(), crashWriteDelay)
}
