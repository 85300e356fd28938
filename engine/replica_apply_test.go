package engine

import (
	"testing"
	"time"
)

// TestReplicaApplyWaitsForTheWriteNotAnFsync: a follower applying entries
// it has just persisted waits for the log's write of them, not for an
// fsync. In --sync interval or none nothing else fsyncs them, and an apply
// that did would make every committed entry cost a follower one.
func TestReplicaApplyWaitsForTheWriteNotAnFsync(t *testing.T) {
	h, q := newHandShard(t)
	// The follower again, in --sync none (its queue was created already).
	if err := h.follower.Close(); err != nil {
		t.Fatal(err)
	}
	o := Options{Dir: h.fdir, Replica: &handReplica{kick: make(chan struct{}, 1)}, FreeSpaceReserve: -1, Stripes: 1,
		Clock: h.clk, Logger: testLogger(t)}
	o.WAL.Sync = SyncNone
	o.CheckpointInterval, o.CheckpointRecords, o.CheckpointBytes = time.Hour, 1<<40, 1<<40
	var err error
	if h.follower, err = Open(o); err != nil {
		t.Fatal(err)
	}
	before := h.follower.Stats().Storage.WAL.Fsyncs
	for range 50 { // each persisted on the follower and applied at once (pump)
		h.do(func() error { _, err := q.Send([]SendEntry{{Body: []byte("m")}}, nil); return err })
	}
	if n := h.follower.Stats().Storage.WAL.Fsyncs - before; n > 0 {
		t.Fatalf("the follower fsynced %d times applying 50 entries in --sync none", n)
	}
	if got := h.followerCount(); got != 50 {
		t.Fatalf("the follower holds %d messages, want 50", got)
	}
}
