package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestReplicaYield (replica_role.go Yield, replica.go append): a leader
// handing its lead over refuses every new operation with ErrRetryOnLeader
// and changes nothing; a proposal made before the yield still commits, and
// Settled says when; a send that passed its first check just before the
// yield is refused at its append without making the broker diverge, and
// its messages are released; Yield(false) takes operations again, and
// SetLeader ends a yield.
func TestReplicaYield(t *testing.T) {
	h, q := newHandShard(t)
	h.do(func() error { _, err := q.Send([]SendEntry{{Body: []byte("before")}}, nil); return err })
	m := h.receiveOne(q) // Inactive now: a delete has something to refuse

	// A send in flight when the yield begins: proposed, not yet committed.
	sent := make(chan error, 1)
	go func() { _, err := q.Send([]SendEntry{{Body: []byte("in flight")}}, nil); sent <- err }()
	h.waitProposals(1)
	if err := h.leader.Yield(true); err != nil {
		t.Fatal(err)
	}
	if h.leader.Settled() {
		t.Fatal("Settled with a proposal waiting for its commit")
	}
	h.pump()
	if err := <-sent; err != nil {
		t.Fatalf("a send proposed before the yield: %v", err)
	}
	if !h.leader.Settled() {
		t.Fatal("not Settled once every proposal committed")
	}

	// New operations are refused before they change anything.
	if _, err := q.Send([]SendEntry{{Body: []byte("refused")}}, nil); !errors.Is(err, ErrRetryOnLeader) {
		t.Fatalf("send while yielding: %v, want ErrRetryOnLeader", err)
	}
	if _, err := q.Receive(context.Background(), ReceiveOptions{Max: 1}, nil); !errors.Is(err, ErrRetryOnLeader) {
		t.Fatalf("receive while yielding: %v, want ErrRetryOnLeader", err)
	}
	if err := deleteHandle(q, m.Handle); !errors.Is(err, ErrRetryOnLeader) {
		t.Fatalf("delete while yielding: %v, want ErrRetryOnLeader", err)
	}
	if _, err := h.leader.CreateQueue("other", DefaultQueueConfig()); !errors.Is(err, ErrRetryOnLeader) {
		t.Fatalf("create queue while yielding: %v, want ErrRetryOnLeader", err)
	}
	if info, err := q.Attributes(); err != nil || info.Active != 1 || info.Inactive != 1 {
		t.Fatalf("after the refused operations: %+v %v, want 1 active and 1 inactive", info, err)
	}

	// A send past its first check before the yield: refused at its append.
	r := h.leader.store.(*replStore)
	if err := r.append([]logRec{{typ: recSend, head: make([]byte, snapLen)}}); !errors.Is(err, ErrRetryOnLeader) {
		t.Fatalf("a send's append while yielding: %v, want ErrRetryOnLeader", err)
	}
	if h.leader.Diverged() {
		t.Fatal("a send refused while yielding made the broker diverge: its messages were only pending")
	}
	if !h.leader.Settled() {
		t.Fatal("a refused send left a proposal")
	}

	// The hand-over did not happen: lead on.
	if err := h.leader.Yield(false); err != nil {
		t.Fatal(err)
	}
	h.do(func() error { _, err := q.Send([]SendEntry{{Body: []byte("after")}}, nil); return err })
	h.deleteOne(q, m.Handle)
	if n := h.followerCount(); n != 2 {
		t.Fatalf("the follower holds %d messages, want 2 (in flight, after)", n)
	}

	// SetLeader ends a yield.
	if err := h.leader.Yield(true); err != nil {
		t.Fatal(err)
	}
	if err := h.leader.SetLeader(true, 2); err != nil {
		t.Fatal(err)
	}
	h.do(func() error { _, err := q.Send([]SendEntry{{Body: []byte("new term")}}, nil); return err })
}

// TestReplicaYieldAdmission (replica.go invariant 10): an operation that
// passed its first check just before the broker yielded, but had not been
// admitted yet, is refused when it goes on (ErrRetryOnLeader), proposes
// nothing and changes nothing; one admitted before the yield keeps the
// broker unsettled until its proposal commits, so the hand-over waits for
// it. Without admission such an operation was proposed while Raft's
// transfer ran (Raft drops proposals then), and failed at the step-down:
// its client got a 503 and the old leader rebuilt its broker.
func TestReplicaYieldAdmission(t *testing.T) {
	vis := time.Minute
	ops := []struct {
		name string
		run  func(b *Broker, q *Queue, m Message) error
	}{
		{"receive", func(_ *Broker, q *Queue, _ Message) error {
			_, err := q.Receive(context.Background(), ReceiveOptions{Max: 1}, nil)
			return err
		}},
		{"delete", func(_ *Broker, q *Queue, m Message) error { return deleteHandle(q, m.Handle) }},
		{"change visibility", func(_ *Broker, q *Queue, m Message) error {
			_, _, err := q.ChangeVisibility(m.Handle, time.Minute)
			return err
		}},
		{"create queue", func(b *Broker, _ *Queue, _ Message) error {
			_, err := b.CreateQueue("other", DefaultQueueConfig())
			return err
		}},
		{"set queue attributes", func(b *Broker, _ *Queue, _ Message) error {
			return b.SetQueueAttributes("q", ConfigPatch{VisibilityTimeout: &vis})
		}},
		{"delete queue", func(b *Broker, _ *Queue, _ Message) error { return b.DeleteQueue("q") }},
	}
	for _, op := range ops {
		for _, admitted := range []bool{false, true} {
			name := op.name + "/paused before admission"
			if admitted {
				name = op.name + "/admitted before the yield"
			}
			t.Run(name, func(t *testing.T) {
				h, q := newHandShard(t)
				h.do(func() error {
					_, err := q.Send([]SendEntry{{Body: []byte("a")}, {Body: []byte("b")}}, nil)
					return err
				})
				m := h.receiveOne(q) // one Inactive (for a delete, a visibility change), one Active (a receive)
				before, err := q.Attributes()
				if err != nil {
					t.Fatal(err)
				}

				// Pause the operation at the chosen side of its admission.
				r := h.leader.store.(*replStore)
				at, resume := make(chan struct{}), make(chan struct{})
				var once sync.Once
				r.enterHook = func(after bool) {
					if after == admitted {
						once.Do(func() { close(at); <-resume })
					}
				}
				select { // a kick left over from the set-up says nothing
				case <-h.rep.kick:
				default:
				}
				errc := make(chan error, 1)
				go func() { errc <- op.run(h.leader, q, m) }()
				<-at
				if err := h.leader.Yield(true); err != nil {
					t.Fatal(err)
				}
				settled := h.leader.Settled()
				close(resume)
				if settled == admitted {
					h.waitProposals(1) // let the operation finish before failing
					h.pump()
					<-errc
					t.Fatalf("Settled = %v with the operation paused (admitted: %v)", settled, admitted)
				}

				if !admitted {
					var err error
					select {
					case err = <-errc:
					case <-h.rep.kick:
						h.pump() // let it finish before failing
						t.Fatalf("the operation was proposed after the broker settled (Raft's transfer would drop it): %v", <-errc)
					}
					if !errors.Is(err, ErrRetryOnLeader) {
						t.Fatalf("resumed after the yield: %v, want ErrRetryOnLeader", err)
					}
					h.rep.mu.Lock()
					n := len(h.rep.props)
					h.rep.mu.Unlock()
					if n != 0 {
						t.Fatalf("%d proposals made after the broker settled: Raft's transfer would drop them", n)
					}
					after, err := q.Attributes()
					if err != nil || after.Active != before.Active || after.Inactive != before.Inactive || after.Config != before.Config {
						t.Fatalf("a refused operation changed the queue: %+v %v, before %+v", after, err, before)
					}
					if _, err := h.leader.Queue("other"); err == nil {
						t.Fatal("a refused create made its queue")
					}
					if h.leader.Diverged() {
						t.Fatal("a refused operation made the broker diverge")
					}
					// Nothing of it ran: once the hand-over is called off,
					// the same operation succeeds.
					if err := h.leader.Yield(false); err != nil {
						t.Fatal(err)
					}
					h.do(func() error { return op.run(h.leader, q, m) })
					return
				}
				// Admitted before the yield: proposed as usual, and the
				// broker settles once it commits.
				h.waitProposals(1)
				if h.leader.Settled() {
					t.Fatal("Settled with the operation's proposal not committed")
				}
				h.pump()
				if err := <-errc; err != nil {
					t.Fatalf("an operation admitted before the yield: %v", err)
				}
				if !h.leader.Settled() {
					t.Fatal("not Settled once the operation's proposal committed")
				}
				if h.leader.Diverged() {
					t.Fatal("the broker diverged")
				}
			})
		}
	}
}
