package chaos

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// TestChaosSyncInterval runs kill -9 cycles against a 3-node cluster in
// --sync interval under load, and checks the history as TestChaos does:
// no acknowledged send lost, no acknowledged delete undone. The cycles
// take the kills in turn (KillFaults): of a shard's leader, of a
// follower, and of every node at one instant (Cluster.KillAll), all
// restarted after the hold. docs/operations.md ("What survives what")
// promises that none of them loses anything acknowledged in any sync mode:
// a member acknowledges an entry or a vote only once its log's files hold
// it (engine/cluster/append.go, invariant 4), and the operating system
// keeps what a killed process wrote.
//
// --sync-interval is 1 ms, not the default 1 s: the log's writer goroutine
// both writes and fsyncs (wal/writer.go, flush), so with fsyncs back to
// back under load it spends most of its time in one, and appends wait in
// the log's ring meanwhile, as on a busy disk. That is the window 87be036
// closed: before it, a member acknowledged an entry still in the ring, and
// a kill -9 of every node then lost acknowledged sends (engine/cluster
// TestClusterKill9WithSyncInterval shows it in-process with slowed writes).
//
// With that wait reverted, runs of ten kills of every node alone
// (SMQD_CHAOS_ONLY="every node" SMQD_CHAOS_CYCLES=10) on a 2-core VM
// failed 1 of 5 with this load (a follower stuck 5,555 entries behind),
// and 3 of 3 with producers that do not pause at all (1 and 5
// acknowledged sends lost, an acknowledged delete undone, a follower
// stuck). The -short run, with one kill of every node, failed none of 5:
// a real disk's writes rarely trail the acknowledgements, so it is a
// smoke test, and the longer runs are the check (docs/chaos.md). The
// producers pause 1 ms all the same: without a pause a follower was
// nearly always an entry behind at the convergence checks, and one run
// with the wait in place took more than 90 s to converge.
//
// Not with -short (make test): one cycle of each kill there never failed
// with the wait reverted, and under the heavier load a convergence check
// once took more than its 90 s with the wait in place; the in-process
// test is make test's check of the property. 6 cycles without -short, 30
// with -tags long (make test-long); SMQD_CHAOS_CYCLES and SMQD_CHAOS_ONLY
// as for TestChaos (SMQD_CHAOS_ONLY="every node" repeats the kill of
// every node).
func TestChaosSyncInterval(t *testing.T) {
	if testing.Short() && os.Getenv("SMQD_CHAOS_CYCLES") == "" {
		t.Skip("kill cycles in --sync interval: not with -short (see the comment)")
	}
	runKillChaos(t, "interval", killCycles(t), "--sync-interval", "1ms")
}

// TestChaosSyncNone: the kill cycles of TestChaosSyncInterval with --sync
// none (the log's writer writes each batch at once and never fsyncs but
// at a segment roll), 10 cycles; -tags long only.
func TestChaosSyncNone(t *testing.T) {
	if !chaosLong {
		t.Skip("--sync none: -tags long only")
	}
	n := 10
	if os.Getenv("SMQD_CHAOS_CYCLES") != "" {
		n = killCycles(t)
	}
	runKillChaos(t, "none", n)
}

// killCycles is the number of kill cycles of TestChaosSyncInterval:
// SMQD_CHAOS_CYCLES, else 30 with -tags long, 6 otherwise.
func killCycles(t *testing.T) int {
	if s := os.Getenv("SMQD_CHAOS_CYCLES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("SMQD_CHAOS_CYCLES=%q", s)
		}
		return n
	}
	if chaosLong {
		return 30
	}
	return 6
}

// runKillChaos runs n cycles of KillFaults against a 3-node cluster whose
// nodes run with --sync sync, under a send-heavy load, then drains the
// queues and checks the history (finish).
func runKillChaos(t *testing.T, sync string, n int, args ...string) {
	const shards = 3
	c := newClusterSync(t, sync, 3, shards, args...)
	if err := c.StartAll(); err != nil {
		t.Fatal(err)
	}
	queues := queuesOnShards(shards)
	w := newWorkload(c, queues)
	// Twice TestChaos's producers, with a tenth of its pause: the kills
	// land among appends in flight, on every shard (why not no pause: see
	// TestChaosSyncInterval).
	w.Producers, w.SendPause = 6, time.Millisecond
	stop := runLoad(t, w, 30*time.Second)
	runCycles(t, c, KillFaults(), shards, n, 2*time.Second)
	stop()
	r := finish(t, c, w)
	t.Logf("--sync %s, %d kill cycles: %d acknowledged sends, %d lost; %d acknowledged deletes, %d messages back after one; %d duplicate deliveries",
		sync, n, r.SendsOk, len(r.Lost), r.DeletesOk, len(r.Resurrected), r.Duplicates)
}
