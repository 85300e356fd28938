package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/smqd/smqd/wal"
)

func testProps(i int) []Property {
	return []Property{
		{Name: []byte("order"), Value: []byte(fmt.Sprint(i)), Type: PropNumber},
		{Name: []byte("note"), Value: []byte("n<&>"), Type: PropString},
		{Name: []byte("traceparent"), Value: []byte("00-ab-cd-01"), Type: PropString, System: true},
	}
}

// checkMsgProps checks that m carries testProps(i) (odd bodies carry none).
func checkMsgProps(t *testing.T, m *Message, what string) {
	t.Helper()
	var i int
	if _, err := fmt.Sscanf(string(m.Body), "m%d", &i); err != nil {
		t.Fatalf("%s: body %q", what, m.Body)
	}
	if i%2 == 1 {
		if len(m.Properties) != 0 {
			t.Fatalf("%s: message %d has properties %+v", what, i, m.Properties)
		}
		return
	}
	want := testProps(i)
	if len(m.Properties) != len(want) {
		t.Fatalf("%s: message %d has %d properties", what, i, len(m.Properties))
	}
	for k := range want {
		p := &m.Properties[k]
		if string(p.Name) != string(want[k].Name) || string(p.Value) != string(want[k].Value) || p.Type != want[k].Type || p.System != want[k].System {
			t.Fatalf("%s: message %d property %d is %s=%s", what, i, k, p.Name, p.Value)
		}
	}
}

// Properties are stored with the message: they come back on receive and
// peek, after a crash and restart (from the checkpoint and from the log
// tail), and after compaction has relocated the bodies (in both modes).
func TestPropertiesSurviveRestartAndCompaction(t *testing.T) {
	bothModes(t, func(t *testing.T) {
		durable := t.Name() == "TestPropertiesSurviveRestartAndCompaction/durable"
		dir := t.TempDir()
		clk := NewFakeClock(t0)
		open := func() *Broker {
			if !durable {
				b, err := Open(Options{MemSegmentBytes: 64 << 10, Stripes: 2, Clock: clk, Logger: testLogger(t)})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { b.Close() })
				return b
			}
			return openDurableTest(t, dir, clk, func(o *Options) {
				o.WAL.SegmentBytes = 64 << 10
				o.WAL.Sync = wal.SyncAlways
			})
		}
		b := open()
		q := mustQueue(t, b, "p", DefaultQueueConfig())
		filler := make([]byte, 2000)
		send := func(from, to int) {
			for i := from; i < to; i++ {
				e := SendEntry{Body: []byte(fmt.Sprintf("m%d", i))}
				if i%2 == 0 {
					e.Properties = testProps(i)
				}
				// Two entries per batch: the second is filler, deleted below,
				// so segments become mostly dead and get compacted.
				if _, err := q.Send([]SendEntry{e, {Body: filler}}, nil); err != nil {
					t.Fatal(err)
				}
			}
		}
		send(0, 60)
		if durable {
			if err := durableOf(b).checkpoint(); err != nil {
				t.Fatal(err)
			}
		}
		send(60, 100)
		// Delete the fillers (receive everything, delete fillers, let the
		// real ones become visible again).
		for {
			msgs, err := q.Receive(context.Background(), ReceiveOptions{Max: MaxBatch, HasWait: true}, nil)
			if err == ErrMessageNotExist {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			for k := range msgs {
				m := &msgs[k]
				if len(m.Body) == len(filler) {
					if _, err := q.Delete([]ReceiptHandle{m.Handle}, make([]error, 1)); err != nil {
						t.Fatal(err)
					}
					continue
				}
				checkMsgProps(t, m, "first receive")
			}
		}
		clk.Advance(time.Minute)
		// Compaction (the broker's own job, kicked by the deletes, and these
		// passes) removes the first segment, which held the first bodies:
		// the messages checked below were relocated.
		for i := 0; i < 10; i++ {
			if durable {
				if err := durableOf(b).checkpoint(); err != nil {
					t.Fatal(err)
				}
			}
			if _, _, err := b.compactOnce(0); err != nil {
				t.Fatal(err)
			}
		}
		if segs := b.store.segments(nil); segs[0].start == 0 {
			t.Fatalf("the first segment is still there (%+v): nothing was relocated", segs)
		}
		check := func(q *Queue, what string) {
			t.Helper()
			msgs, err := q.Peek(MaxBatch, nil)
			if err != nil || len(msgs) != MaxBatch {
				t.Fatalf("%s: peek %d %v", what, len(msgs), err)
			}
			for k := range msgs {
				checkMsgProps(t, &msgs[k], what+" peek")
			}
			seen := 0
			var dst []Message // reused: buffers of one message must not leak into another
			for {
				dst, err = q.Receive(context.Background(), ReceiveOptions{Max: 7, HasWait: true}, dst[:0])
				if err == ErrMessageNotExist {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				for k := range dst {
					checkMsgProps(t, &dst[k], what+" receive")
				}
				seen += len(dst)
			}
			if seen != 100 {
				t.Fatalf("%s: %d messages, want 100", what, seen)
			}
		}
		if !durable {
			check(q, "after compaction")
			return
		}
		crashBroker(b)
		b2 := open()
		defer b2.Close()
		q2, err := b2.Queue("p")
		if err != nil {
			t.Fatal(err)
		}
		check(q2, "after restart")
	})
}
