package engine

import (
	"testing"
	"time"
)

// The background compactor leaves a draining segment to drain, and still
// relocates what would not leave by itself (compaction.go, "Draining
// segments are left to drain", invariant 3). These tests drive only the
// background job, on the fake clock: no explicit pass.

// tick advances the clock in compactInterval steps, so the compactor (and,
// durable, the checkpointer) runs as it would on the system clock.
func tick(clk *FakeClock, d time.Duration) {
	for ; d > 0; d -= compactInterval {
		clk.Advance(compactInterval)
	}
}

// A backlog drained in order at a steady pace passes through every
// segment; none of it is rewritten, and the drained segments go. (In
// durable mode the drain's own records share the last backlog segment with
// the final message, which then sits there without falling for over
// compactSettle and may be relocated: a segment's worth at most.)
func TestCompactionLeavesADrainingBacklogAlone(t *testing.T) {
	bothModes(t, func(t *testing.T) {
		b, clk, q := compactionBroker(t)
		// 8 KB per 100 ms: a segment's half in about 0.4 s.
		st := drainInOrder(t, b, clk, q, 600, 8, compactInterval, 8) // about 10 segments of 64 KiB
		if st.Waiting != 0 {
			t.Fatalf("%d segments still waiting after the drain", st.Waiting)
		}
	})
}

// One message pinning each segment (never deleted): every segment is
// relocated by the background job once watched for compactSettle, with no
// further traffic to kick it, and the disk bound holds.
func TestCompactionRelocatesPinnedSegmentsWhenIdle(t *testing.T) {
	bothModes(t, func(t *testing.T) {
		b, clk, q := compactionBroker(t)
		for seg := 0; seg < 20; seg++ {
			sendN(t, q, 1, 1000, MaxDelay)
			sendN(t, q, 60, 1000, 0)
			drain(t, q, 60)
		}
		tick(clk, compactSettle/2)
		if st := b.Stats().Storage.Compaction; st.Relocated != 0 {
			t.Fatalf("relocated %d bodies before watching the segments for %v", st.Relocated, compactSettle)
		}
		tick(clk, compactSettle+time.Second)
		st := b.Stats().Storage.Compaction
		t.Logf("compaction: %+v", st)
		if st.Relocated < 18 {
			t.Fatalf("relocated %d pinned bodies, want one per sealed segment", st.Relocated)
		}
		held, live, seg := storeUsage(b)
		if held > 2*live+2*seg {
			t.Fatalf("held %d > 2 x live %d + 2 x segment %d", held, live, seg)
		}
		checkInvariants(t, q)
	})
}

// A backlog drained in order slowly (a half segment in about 16 s, as one
// slow consumer drains 64 MiB segments at 2 MB/s) is not rewritten either:
// each segment empties well within compactSettleMax.
func TestCompactionLeavesASlowDrainAlone(t *testing.T) {
	bothModes(t, func(t *testing.T) {
		b, clk, q := compactionBroker(t)
		drainInOrder(t, b, clk, q, 300, 2, time.Second, 3) // about 5 segments of 64 KiB, 2 KB a second
	})
}

// drainInOrder sends n messages of 1000 bytes, receives and deletes them
// in order, per at a time every interval, on the fake clock, and lets the
// background job settle. It fails if compaction rewrote a segment's worth
// or more of them, or removed fewer than removed segments, and returns
// what compaction did.
func drainInOrder(t *testing.T, b *Broker, clk *FakeClock, q *Queue, n, per int, every time.Duration, removed int64) CompactionStats {
	t.Helper()
	sendN(t, q, n, 1000, 0)
	for left := n; left > 0; left -= per {
		drain(t, q, min(per, left))
		tick(clk, every)
	}
	tick(clk, 2*time.Second)
	st := b.Stats().Storage.Compaction
	t.Logf("compaction: %+v", st)
	if _, _, seg := storeUsage(b); st.RelocatedBytes >= seg {
		t.Fatalf("compaction rewrote %d bodies (%d bytes) of an in-order drain", st.Relocated, st.RelocatedBytes)
	}
	if st.SegmentsRemoved < removed {
		t.Fatalf("only %d drained segments removed", st.SegmentsRemoved)
	}
	return st
}

// A segment whose live bytes fall, but too slowly to empty within
// compactSettleMax, is relocated after one observation, not kept waiting
// for the limit. (One stripe, so that the receives take the messages in
// log order and the trickle comes out of the watched segment, whose live
// half would take minutes to go at that pace.)
func TestCompactionRelocatesASlowTrickle(t *testing.T) {
	bothModes(t, func(t *testing.T) {
		b, clk, q := compactionBrokerStripes(t, 1)
		sendN(t, q, 1500, 100, 0) // about 4 segments of small messages
		first := b.store.segments(nil)[0]
		for i := 0; first.live*2 >= int64(first.end-first.start); i++ { // just below half live
			if i == 1500 || first.active {
				t.Fatalf("first segment %+v never became a candidate", first)
			}
			drain(t, q, 1)
			first = b.store.segments(nil)[0]
		}
		emptied := func() bool {
			for _, s := range b.store.segments(nil) {
				if s.start == first.start {
					return s.live == 0
				}
			}
			return true // removed
		}
		for i := 0; i < 120; i++ {
			drain(t, q, 1) // one message a second: minutes to empty it
			tick(clk, time.Second)
			if emptied() {
				t.Logf("first segment relocated after %d s: %+v", i+1, b.Stats().Storage.Compaction)
				if i+1 > 12 {
					t.Fatalf("a slow trickle waited %d s for relocation", i+1)
				}
				checkInvariants(t, q)
				return
			}
		}
		t.Fatalf("a segment trickling at one message a second was never relocated: %+v", b.Stats().Storage.Compaction)
	})
}

// A pass relocates at most its budget (plus the body that crosses it),
// even inside one segment with more live bytes than that, and the next
// pass goes on where it stopped: the rate limit holds for any segment size.
func TestCompactionHonoursItsBudget(t *testing.T) {
	bothModes(t, func(t *testing.T) {
		b, _, q := compactionBroker(t)
		const budget = 8 << 10
		// Every other message deleted (and every seventh): each segment about half live.
		deleteSome(t, q, 8, func(i int) bool { return i%2 == 0 || i%7 == 0 })
		var candidates int64
		for _, s := range b.store.segments(nil) {
			if !s.active && s.live > 0 && s.live*2 < int64(s.end-s.start) {
				candidates += s.live
			}
		}
		if candidates < 3*budget {
			t.Fatalf("only %d live bytes in mostly-dead segments: the test needs more than a few budgets", candidates)
		}
		passes := 0
		for ; passes < 100; passes++ {
			before := b.Stats().Storage.Compaction.RelocatedBytes
			_, moved, err := b.compactOnce(budget)
			if err != nil {
				t.Fatal(err)
			}
			got := b.Stats().Storage.Compaction.RelocatedBytes - before
			if got > budget+2<<10 {
				t.Fatalf("pass %d relocated %d bytes, budget %d", passes, got, budget)
			}
			if moved == 0 {
				break
			}
		}
		st := b.Stats().Storage.Compaction
		t.Logf("%d passes, %+v, candidates held %d live bytes", passes, st, candidates)
		if st.RelocatedBytes < candidates {
			t.Fatalf("relocated %d bytes of the %d live in mostly-dead segments", st.RelocatedBytes, candidates)
		}
		if st.RelocatedBytes > candidates+candidates/2 {
			t.Fatalf("relocated %d bytes for %d live: bodies moved more than once", st.RelocatedBytes, candidates)
		}
		checkBound(t, b, q, "budget")
	})
}
