package engine

import (
	"fmt"
	"strings"
	"testing"
)

// TestRepairNamesSendsLostFromTheTail (repair_gaps.go): after kill -9, a
// run of send records past the checkpoint is zeroed (as a segment cut
// short, or bit rot over a stretch) or one send's record is damaged. With
// --wal-repair the broker starts, and every acknowledged message that is
// gone is named in the report's lost messages, and nothing else is: the
// sends past the checkpoint were in no index, and their records, headers
// included, are gone, so they used to be reported as "lost_messages 0",
// the damaged range alone counted as one lost record.
func TestRepairNamesSendsLostFromTheTail(t *testing.T) {
	for _, c := range []struct {
		name       string
		from, upto int // records zeroed: [from, upto) of the sends, or one flipped
		zero       bool
	}{
		{"zeroed-run", 700, 760, true},
		{"one-flipped", 900, 901, false},
		{"zeroed-across-segments", 380, 520, true},
		{"queue-deleted-later", 700, 760, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			clk := NewFakeClock(t0)
			b := openDurableTest(t, dir, clk, func(o *Options) {
				o.WAL.SegmentBytes = 64 << 10
				o.CheckpointRecords = 1 << 30 // the whole log stays the tail
			})
			q := mustQueue(t, b, "r", DefaultQueueConfig())
			ids := map[string]string{} // body → message id
			for i := 0; i < 1200; i++ {
				body := fmt.Sprintf("g-%04d-%s", i, strings.Repeat("z", 90))
				res, err := q.Send([]SendEntry{{Body: []byte(body)}}, nil)
				if err != nil {
					t.Fatal(err)
				}
				ids[body] = res[0].ID.String()
			}
			if c.name == "queue-deleted-later" {
				// Its messages go with it: none is lost to the damage.
				mustQueue(t, b, "other", DefaultQueueConfig())
				if err := b.DeleteQueue("r"); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}
			crashBroker(b)
			var sends []walRecord
			for _, r := range listRecords(t, dir) {
				if isSendRec(r.typ) {
					sends = append(sends, r)
				}
			}
			if len(walSegments(t, dir)) < 3 {
				t.Fatalf("%d segments; the test wants several", len(walSegments(t, dir)))
			}
			for k := c.from; k < c.upto; k++ {
				r := sends[k]
				if c.zero {
					damageAt(t, dir, r.pos, int(r.size), func(b []byte) { clear(b) })
				} else {
					damageAt(t, dir, r.pos+r.size-1-((r.size-12)%4), 1, func(b []byte) { b[0] ^= 0x40 })
				}
			}
			got, err := openRepaired(t, dir, clk, true)
			if err != nil {
				t.Fatal(err)
			}
			report := readReport(t, dir)
			if report == nil {
				t.Fatal("no repair report")
			}
			if c.name == "queue-deleted-later" {
				if len(got) != 0 || len(report.LostMessages) != 0 {
					t.Fatalf("a deleted queue: %d messages there, %d reported lost", len(got), len(report.LostMessages))
				}
				return
			}
			named := map[string]bool{}
			for _, l := range report.LostMessages {
				named[l.MessageID] = true
			}
			missing := 0
			for body, id := range ids {
				switch {
				case !got[body] && !named[id]:
					t.Errorf("message %s (%s) is gone and the report's lost messages do not name it", id, body[:6])
				case got[body] && named[id]:
					t.Errorf("message %s (%s) is there and reported lost", id, body[:6])
				}
				if !got[body] {
					missing++
				}
			}
			if missing == 0 || missing != len(report.LostMessages) {
				t.Fatalf("%d messages gone, %d reported lost: %+v", missing, len(report.LostMessages), report.LostMessages)
			}
			t.Logf("%d gone, all named; damaged ranges %d, lost records %d", missing, len(report.Ranges), len(report.LostRecords))
		})
	}
}
