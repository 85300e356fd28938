package engine

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// A message that could outgrow the log's largest record, or a batch its
// write buffer, is refused with an *ArgumentError before anything is
// reserved, and the broker goes on. With WAL.SegmentBytes or BufferBytes
// at their documented minimum (64 KiB), one maximum-size message made the
// append fail as a storage failure: the broker refused every change until
// it was reopened, and smqd answered 500s (embedding audit 2, 2026-12-06).
func TestSendBeyondTheLogsLimitsIsRefused(t *testing.T) {
	for _, c := range []struct {
		what            string
		segment, buffer int
		entries         []SendEntry
	}{
		{"a 64 KiB body, 64 KiB segments", 64 << 10, 0, []SendEntry{{Body: make([]byte, MaxMessageBytes)}}},
		{"a 64 KiB body, a 64 KiB buffer", 1 << 20, 64 << 10, []SendEntry{{Body: make([]byte, MaxMessageBytes)}}},
		// (A batch larger than the buffer, each of whose records fits,
		// is taken since wal invariant 12: TestSendBatchLargerThanTheBuffer.)
	} {
		t.Run(c.what, func(t *testing.T) {
			b := openDurableTest(t, t.TempDir(), NewFakeClock(t0), func(o *Options) {
				o.WAL.SegmentBytes = int64(c.segment)
				if c.buffer > 0 {
					o.WAL.BufferBytes = c.buffer
				}
			})
			q := mustQueue(t, b, "q", DefaultQueueConfig())
			_, err := q.Send(c.entries, nil)
			var ae *ArgumentError
			if !errors.As(err, &ae) || !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("send: %v, want an *ArgumentError", err)
			}
			t.Log(err)
			if err := b.Health(); err != nil {
				t.Fatalf("the broker after the refused send: %v", err)
			}
			if _, err := q.Send([]SendEntry{{Body: []byte("small")}}, nil); err != nil {
				t.Fatalf("a small send after it: %v", err)
			}
			if info, err := q.Attributes(); err != nil || info.Active != 1 {
				t.Fatalf("%d messages active (%v), want the small one alone", info.Active, err)
			}
		})
	}
}

// TestSendBatchLargerThanTheBuffer: 16 messages of 30 KiB of properties
// through a 64 KiB buffer (refused before wal invariant 12) are taken.
func TestSendBatchLargerThanTheBuffer(t *testing.T) {
	v := make([]byte, 30<<10) // printable and incompressible
	for i, x := 0, uint32(1); i < len(v); i++ {
		x = x*1664525 + 1013904223
		v[i] = 'a' + byte(x>>24)%26
	}
	b := openDurableTest(t, t.TempDir(), NewFakeClock(t0), func(o *Options) {
		o.WAL.SegmentBytes, o.WAL.BufferBytes = 1<<20, 64<<10
	})
	q := mustQueue(t, b, "q", DefaultQueueConfig())
	es := make([]SendEntry, MaxBatch)
	for i := range es {
		es[i] = SendEntry{Body: []byte("b"), Properties: []Property{{Name: []byte("p"), Value: v, Type: PropString}}}
	}
	if _, err := q.Send(es, nil); err != nil {
		t.Fatalf("send: %v", err)
	}
	if info, err := q.Attributes(); err != nil || info.Active != MaxBatch {
		t.Fatalf("%d messages active (%v), want %d", info.Active, err, MaxBatch)
	}
}

// maxMoveHead covers what a dead-letter move adds to a message's body and
// properties, for the longest queue and topic names (ARNPrefix aside).
func TestMaxMoveHead(t *testing.T) {
	long := strings.Repeat("n", MaxQueueNameLen)
	for _, arn := range []string{":/queues/" + long, ":/topics/" + long + "/subscriptions/" + long} {
		block := appendProps(nil, []Property{
			{Name: []byte(SysDLQMessageType), Value: []byte("SUBSCRIPTION"), Type: PropString, System: true},
			{Name: []byte(SysDLQSourceArn), Value: []byte(arn), Type: PropString, System: true},
			{Name: []byte(SysDLQOriginMessageID), Value: bytes.Repeat([]byte("0"), 64), Type: PropString, System: true},
		})
		if n := 2*snapLen + 16 + 4 + len(block); n > maxMoveHead {
			t.Errorf("a move with the DLQSourceArn %q needs %d bytes beyond the message, maxMoveHead is %d", arn[:20], n, maxMoveHead)
		}
	}
}

// A publish whose copy for a subscription could outgrow one log record as
// a dead letter is refused as a send is: an XML rendering of a body of
// '&' is five times the body, and at 128 KiB segments (smqd's minimum) a
// 26 KiB publish was stored whose dead-letter move then failed the broker
// at every receive, after every reopen too (review H, 2026-12-06).
func TestPublishBeyondTheLogsLimitsIsRefused(t *testing.T) {
	b := openDurableTest(t, t.TempDir(), NewFakeClock(t0), func(o *Options) { o.WAL.SegmentBytes = 128 << 10 })
	dlq := DefaultQueueConfig()
	mustQueue(t, b, "dlq", dlq)
	src := DefaultQueueConfig()
	src.DeadLetterQueue, src.MaxReceiveCount = "dlq", 1
	mustQueue(t, b, "src", src)
	if _, err := b.CreateTopic("t", DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Subscribe("t", "s", SubscriptionConfig{Endpoint: qEndpoint("src"), Format: FormatXML}); err != nil {
		t.Fatal(err)
	}
	_, err := b.Publish("t", PublishInput{Body: bytes.Repeat([]byte("&"), 26116)})
	var ae *ArgumentError
	if !errors.As(err, &ae) {
		t.Fatalf("publish: %v, want an *ArgumentError", err)
	}
	t.Log(err)
	if _, err := b.Publish("t", PublishInput{Body: bytes.Repeat([]byte("&"), 4096)}); err != nil {
		t.Fatalf("a smaller publish: %v", err)
	}
	if err := b.Health(); err != nil {
		t.Fatal(err)
	}
}
