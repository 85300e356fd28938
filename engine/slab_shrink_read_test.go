package engine

import (
	"bytes"
	"testing"
)

// TestReadBodyAfterShrinkAndCompaction: a read that finds its body's
// segment removed looks its slot up again (readBody). The slot number it
// holds was taken before the stripe emptied; once the stripe shrank
// (slab.go), that slot is past the slab's chunks, and the lookup must say
// "gone", not index past them (review-e, 2026-12-07).
func TestReadBodyAfterShrinkAndCompaction(t *testing.T) {
	b, q, other, es := shrinkReadSetup(t, 300) // slots 0..299, more than one chunk
	// The locs a receive (or a push worker, or a snapshot export) took of
	// the messages in slots 256.. before reading their bodies outside the
	// lock.
	st := &q.stripes[0]
	var locs []bodyLoc
	st.mu.Lock()
	for i := uint32(256); i < 300; i++ {
		s := st.slab.at(i)
		locs = append(locs, bodyLoc{pos: s.bodyPos, size: s.recSize, slot: i, seq: s.seq, stripe: st.idx})
	}
	st.mu.Unlock()
	// Meanwhile the queue is purged, a send comes (the slab shrinks), and
	// compaction removes the segment that held the body.
	if _, err := q.Purge(); err != nil {
		t.Fatal(err)
	}
	churnPast(t, other, es) // the log's head well past the old segments
	if out, err := q.Send(es[:1], nil); err != nil || out[0].Err != nil {
		t.Fatal(err, out)
	}
	if removed, _, err := b.compactOnce(0); err != nil || removed == 0 {
		t.Fatalf("compaction: %d segments removed, %v", removed, err)
	}
	st.mu.Lock()
	n := st.slab.n
	st.mu.Unlock()
	t.Logf("slab high-water mark after the shrink: %d", n)
	var loc *bodyLoc
	for i := range locs {
		if _, _, _, err := b.store.read(locs[i].pos, locs[i].size, nil); err == errSegmentRemoved {
			loc = &locs[i]
			break
		}
	}
	if loc == nil {
		t.Fatal("no segment of the messages in slots 256.. was removed")
	}
	var m Message
	func() {
		defer func() {
			if p := recover(); p != nil {
				st.mu.Unlock() // the panic left it held: Close would wait for it
				t.Fatalf("readBody of a message purged before the shrink panicked: %v", p)
			}
		}()
		ok, err := q.readBody(b.getReader(), &m, loc)
		if ok || err != nil {
			t.Fatalf("readBody of a purged message: %v, %v; want false, nil", ok, err)
		}
	}()
}

// TestReadBodyOfADeletedQueueAfterCompaction: the same lookup on a queue
// deleted meanwhile (its stripes' slabs have no chunks at all: killLocked)
// must say "gone" too (review-e, 2026-12-07; older than the shrink).
func TestReadBodyOfADeletedQueueAfterCompaction(t *testing.T) {
	b, q, other, es := shrinkReadSetup(t, 100)
	st := &q.stripes[0]
	st.mu.Lock()
	s := st.slab.at(0)
	loc := bodyLoc{pos: s.bodyPos, size: s.recSize, slot: 0, seq: s.seq, stripe: st.idx}
	st.mu.Unlock()
	if err := b.DeleteQueue("q"); err != nil {
		t.Fatal(err)
	}
	churnPast(t, other, es)
	if removed, _, err := b.compactOnce(0); err != nil || removed == 0 {
		t.Fatalf("compaction: %d segments removed, %v", removed, err)
	}
	if _, _, _, err := b.store.read(loc.pos, loc.size, nil); err != errSegmentRemoved {
		t.Fatalf("the deleted queue's first body: %v, want its segment removed", err)
	}
	var m Message
	func() {
		defer func() {
			if p := recover(); p != nil {
				st.mu.Unlock() // the panic left it held
				t.Fatalf("readBody of a deleted queue's message panicked: %v", p)
			}
		}()
		ok, err := q.readBody(b.getReader(), &m, &loc)
		if ok || err != nil {
			t.Fatalf("readBody of a deleted queue's message: %v, %v; want false, nil", ok, err)
		}
	}()
}

// shrinkReadSetup opens a broker of one stripe and small segments, with
// queue q holding n messages of 1,000 bytes (sent 10 at a time) and an
// empty queue other; es is the batch of 10 it sent.
func shrinkReadSetup(t *testing.T, n int) (b *Broker, q, other *Queue, es []SendEntry) {
	t.Helper()
	b, _ = openTest(t, Options{Stripes: 1, MemSegmentBytes: 64 << 10})
	q = mustQueue(t, b, "q", DefaultQueueConfig())
	other = mustQueue(t, b, "other", DefaultQueueConfig())
	body := bytes.Repeat([]byte("x"), 1000)
	es = make([]SendEntry, 10)
	for i := range es {
		es[i].Body = body
	}
	var out []SendResult
	for range n / 10 {
		var err error
		if out, err = q.Send(es, out[:0]); err != nil {
			t.Fatal(err)
		}
	}
	return b, q, other, es
}

// churnPast sends, receives and deletes 400 messages through other, so
// that the log's head moves well past the segments written before.
func churnPast(t *testing.T, other *Queue, es []SendEntry) {
	t.Helper()
	var out []SendResult
	for range 40 {
		var err error
		if out, err = other.Send(es, out[:0]); err != nil {
			t.Fatal(err)
		}
		ms, _ := other.Receive(t.Context(), ReceiveOptions{Max: 10}, nil)
		hs := make([]ReceiptHandle, len(ms))
		for i := range ms {
			hs[i] = ms[i].Handle
		}
		other.Delete(hs, make([]error, len(hs)))
	}
}
