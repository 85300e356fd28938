package engine

import (
	"context"
	"testing"
	"time"
)

// TestRetentionChangeAppliesToHeldMessages: raising MessageRetentionPeriod
// keeps the messages already held past their old expiry, in every state,
// also across a crash; lowering it expires those older than the new
// retention at once (retention.go). Until 2026-12-06 the expiry was fixed
// at the send: a backlog a user raised the retention to keep was deleted
// at the old expiry (semantics audit).
func TestRetentionChangeAppliesToHeldMessages(t *testing.T) {
	bothModes(t, func(t *testing.T) {
		durable := t.Name() == "TestRetentionChangeAppliesToHeldMessages/durable"
		dir := t.TempDir()
		clk := NewFakeClock(t0)
		open := func() *Broker {
			if durable {
				return openDurableTest(t, dir, clk, nil)
			}
			b, err := Open(Options{Clock: clk, Logger: testLogger(t), Stripes: 2})
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		b := open()
		cfg := DefaultQueueConfig()
		cfg.Retention = time.Minute
		q := mustQueue(t, b, "keep", cfg)
		ctx := context.Background()
		for _, e := range []SendEntry{{Body: []byte("active")}, {Body: []byte("received")}, {Body: []byte("delayed"), HasDelay: true, Delay: 50 * time.Second}} {
			if _, err := q.SendOne(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		msgs, err := q.Receive(ctx, ReceiveOptions{Max: 1, HasWait: true}, nil)
		if err != nil || len(msgs) != 1 {
			t.Fatalf("receive: %v", err)
		}
		if _, _, err := q.ChangeVisibility(msgs[0].Handle, 10*time.Minute); err != nil {
			t.Fatal(err)
		}
		clk.Advance(30 * time.Second)
		if err := b.SetQueueAttributes("keep", ConfigPatch{Retention: ptrTo(7 * 24 * time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if durable {
			crashBroker(b)
			b = open()
			q, _ = b.Queue("keep")
		}
		defer func() { b.Close() }()
		clk.Advance(40 * time.Second) // 70 s after the sends: past the old expiry
		if info, _ := q.Attributes(); info.Active+info.Inactive+info.Delayed != 3 {
			t.Fatalf("70 s after the sends, retention raised from 60 s to 7 days at 30 s: %+v", info)
		}
		want := t0.Add(7 * 24 * time.Hour)
		var got []time.Time
		for i := range q.stripes {
			st := &q.stripes[i]
			st.mu.Lock()
			for j := uint32(0); j < st.slab.n; j++ {
				if s := st.slab.at(j); s.seq != 0 && s.state() != stPending {
					got = append(got, time.UnixMilli(s.expireMs()))
				}
			}
			st.mu.Unlock()
		}
		for _, e := range got {
			if !e.Equal(want) {
				t.Errorf("expiry %v, want %v (EnqueueTime + 7 days)", e, want)
			}
		}

		// Lowered below a message's age: it expires at once.
		if err := b.SetQueueAttributes("keep", ConfigPatch{Retention: ptrTo(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if info, _ := q.Attributes(); info.Active+info.Inactive+info.Delayed != 0 {
			t.Fatalf("retention lowered to 60 s, 70 s after the sends: %+v", info)
		}
		if durable {
			crashBroker(b)
			b = open()
			q, _ = b.Queue("keep")
			if info, _ := q.Attributes(); info.Active+info.Inactive+info.Delayed != 0 {
				t.Fatalf("after a crash: %+v", info)
			}
		}
	})
}

func ptrTo[T any](v T) *T { return &v }
