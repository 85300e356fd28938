package engine

import (
	"context"
	"testing"
	"time"
)

// A follower applies what a leader's sends with properties and dead-letter
// moves log (record types 20 and 23): after the entries, and after a
// restart of the follower, it holds the message in the dead-letter queue
// only, with its properties and the DLQ ones.
func TestReplicaDeadLetterAndProperties(t *testing.T) {
	h := &handShard{t: t, rep: &handReplica{kick: make(chan struct{}, 1)}, clk: NewFakeClock(t0), next: 1}
	h.leader = h.open(t.TempDir(), h.rep)
	h.fdir = t.TempDir()
	h.follower = h.open(h.fdir, &handReplica{kick: make(chan struct{}, 1)})
	defer func() { h.leader.Close(); h.follower.Close() }()
	if err := h.leader.SetLeader(true, 1); err != nil {
		t.Fatal(err)
	}
	h.do(func() error { _, err := h.leader.CreateQueue("dlq", DefaultQueueConfig()); return err })
	h.do(func() error { _, err := h.leader.CreateQueue("src", dlqConfig("dlq", 1)); return err })
	q, err := h.leader.Queue("src")
	if err != nil {
		t.Fatal(err)
	}
	var sent []SendResult
	h.do(func() (err error) {
		sent, err = q.Send([]SendEntry{{Body: []byte("m0"), Properties: testProps(0)}, {Body: []byte("m1")}}, nil)
		return err
	})
	var msgs []Message
	h.do(func() (err error) {
		msgs, err = q.Receive(context.Background(), ReceiveOptions{Max: MaxBatch}, nil)
		return err
	})
	if len(msgs) != 2 {
		t.Fatalf("received %d", len(msgs))
	}
	h.clk.Advance(10 * time.Second)
	h.do(func() error {
		_, err := q.Receive(context.Background(), ReceiveOptions{Max: MaxBatch}, nil)
		if err == ErrMessageNotExist {
			return nil
		}
		return err
	})
	if q.deadLettered.Load() != 2 {
		t.Fatalf("moved %d", q.deadLettered.Load())
	}
	check := func(what string) {
		t.Helper()
		for _, name := range []string{"src", "dlq"} {
			fq, err := h.follower.Queue(name)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			err = dumpQueueMsgs(fq, func(id MessageID, m *Message, state string, dq uint32, visible int64) {
				n++
				if name == "src" {
					t.Fatalf("%s: %s still in src", what, m.Body)
				}
				i := 0
				if string(m.Body) == "m1" {
					i = 1
				}
				if v, ok := sysProp(m, SysDLQOriginMessageID); !ok || v != sent[i].ID.String() {
					t.Fatalf("%s: %s origin %q", what, m.Body, v)
				}
				if i == 0 && (len(m.Properties) != 6 || string(m.Properties[0].Value) != "0") {
					t.Fatalf("%s: properties of m0: %d", what, len(m.Properties))
				}
				if i == 1 && len(m.Properties) != 3 {
					t.Fatalf("%s: properties of m1: %d", what, len(m.Properties))
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if name == "dlq" && n != 2 {
				t.Fatalf("%s: the follower's dlq holds %d", what, n)
			}
			checkInvariants(t, fq)
		}
	}
	check("applied")
	h.restartFollower()
	check("after a restart")
}
