package engine

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestDrainedQueueGivesItsSlabBack: once a stripe has no message left,
// its next send starts a slab of one chunk again. A drained backlog kept
// every chunk it had grown (64 B a message) until the queue was deleted,
// so a long-lived queue held the memory of its largest backlog for good
// (leak audit, 2026-12-06: 100,000 messages sent, received and deleted
// over HTTP left 8 MB of live heap).
func TestDrainedQueueGivesItsSlabBack(t *testing.T) {
	b, _ := openTest(t, Options{Stripes: 1})
	q := mustQueue(t, b, "q", DefaultQueueConfig())
	chunks := func() int { n, _ := slabHeld(t, b, "q"); return n }
	sendOnes(t, q, 10000)
	es := []SendEntry{{Body: []byte("x")}}
	var out []SendResult
	grown := chunks()
	var ms []Message
	for {
		var err error
		ms, err = q.Receive(context.Background(), ReceiveOptions{Max: 16, HasWait: true}, ms[:0])
		if len(ms) == 0 {
			if err != nil && !errors.Is(err, ErrMessageNotExist) {
				t.Fatal(err)
			}
			break
		}
		hs := make([]ReceiptHandle, len(ms))
		for i := range ms {
			hs[i] = ms[i].Handle
		}
		if _, err = q.Delete(hs, make([]error, len(hs))); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := q.Send(es[:1], out[:0]); err != nil || out[0].Err != nil {
		t.Fatal(err, out)
	}
	if got := chunks(); got != 1 {
		t.Fatalf("after a backlog of 10,000 (%d chunks) was drained and one message sent: %d chunks, want 1", grown, got)
	}
	// The new message is there, and the old handles are not.
	ms, err := q.Receive(context.Background(), ReceiveOptions{Max: 16, HasWait: true}, ms[:0])
	if err != nil || len(ms) != 1 {
		t.Fatalf("receive after the shrink: %d messages, %v", len(ms), err)
	}
	checkInvariants(t, q)
}

// TestIdleQueueGivesItsSlabBack: a queue drained and then left alone, with
// no send after, gives its chunks back: emptied by deletes, by a purge or by
// expiries, and drained by deletes to a few hundred messages it keeps.
// Chunks went back only at a send, so a queue drained once and idle since
// held the memory of its backlog, 64 B a message, until its next send.
func TestIdleQueueGivesItsSlabBack(t *testing.T) {
	for _, how := range []string{"deletes", "purge", "expiries", "deletes to 300", "dead-letter moves"} {
		t.Run(how, func(t *testing.T) {
			b, clk := openTest(t, Options{Stripes: 1})
			cfg := DefaultQueueConfig()
			if how == "expiries" {
				cfg.Retention = MinRetention
			}
			if how == "dead-letter moves" {
				mustQueue(t, b, "dlq", DefaultQueueConfig())
				cfg.DeadLetterQueue, cfg.MaxReceiveCount = "dlq", 1
				cfg.VisibilityTimeout = time.Second
			}
			q := mustQueue(t, b, "q", cfg)
			chunks := func() (held, inUse int) { return slabHeld(t, b, "q") }
			sendOnes(t, q, 10000)
			peak, _ := chunks()
			switch how {
			case "purge":
				if n, err := q.Purge(); err != nil || n != 10000 {
					t.Fatalf("purge: %d, %v", n, err)
				}
			case "expiries":
				clk.Advance(cfg.Retention + time.Second)
				waitUntil(t, "the messages expire", func() bool { _, n := chunks(); return n == 0 })
			case "dead-letter moves":
				// Each received once (no delete), then moved by the
				// receives after their visibility timeout.
				for {
					ms, err := q.Receive(context.Background(), ReceiveOptions{Max: 16, HasWait: true}, nil)
					if len(ms) == 0 {
						if err != nil && !errors.Is(err, ErrMessageNotExist) {
							t.Fatal(err)
						}
						break
					}
				}
				clk.Advance(2 * time.Second)
				for k, n := 0, 1; n > 0 && k < 10000; k++ {
					_, n = chunks()
					if _, err := q.Receive(context.Background(), ReceiveOptions{Max: 16, HasWait: true}, nil); err != nil && !errors.Is(err, ErrMessageNotExist) {
						t.Fatal(err)
					}
				}
			default:
				var ms []Message
				for _, n := chunks(); n > 0 && (how == "deletes" || n > 300); _, n = chunks() {
					var err error
					ms, err = q.Receive(context.Background(), ReceiveOptions{Max: 16, HasWait: true}, ms[:0])
					if err != nil {
						t.Fatal(err)
					}
					hs := make([]ReceiptHandle, len(ms))
					for i := range ms {
						hs[i] = ms[i].Handle
					}
					if _, err = q.Delete(hs, make([]error, len(hs))); err != nil {
						t.Fatal(err)
					}
				}
			}
			held, inUse := chunks()
			t.Logf("peak %d chunks; %d messages left in %d chunks, with no send since", peak, inUse, held)
			if want := inUse/chunkSize + 2 + trimMinChunks; inUse == 0 && held != 1 || held > want {
				t.Fatalf("%d messages left in %d chunks of 16 KiB (the peak %d)", inUse, held, peak)
			}
			checkInvariants(t, q)
		})
	}
}

// sendOnes sends n messages of one byte to q, 16 at a time.
func sendOnes(t *testing.T, q *Queue, n int) {
	t.Helper()
	es := make([]SendEntry, 16)
	for i := range es {
		es[i].Body = []byte("x")
	}
	var out []SendResult
	for ; n > 0; n -= len(es) {
		var err error
		if out, err = q.Send(es[:min(n, len(es))], out[:0]); err != nil {
			t.Fatal(err)
		}
	}
}
