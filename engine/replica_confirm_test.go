package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
)

// confirmReplica is a handReplica whose ConfirmLead answers err and notes
// the terms it was asked for.
type confirmReplica struct {
	*handReplica
	mu    sync.Mutex
	err   error
	terms []uint64
}

func (c *confirmReplica) ConfirmLead(term uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.terms = append(c.terms, term)
	return c.err
}

func (c *confirmReplica) set(err error) {
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
}

func (c *confirmReplica) asked() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.terms)
}

// A leader's receive and peek answer what they read only once the replica
// confirmed the lead of the term they read it in (replica_confirm.go): an
// unconfirmed one answers ErrNotLeader and no message; a receive that
// found nothing asks for no confirmation.
func TestReplicaAnswersReadsOnlyOnceTheLeadIsConfirmed(t *testing.T) {
	var cr *confirmReplica
	h, q := newHandShardWith(t, func(hr *handReplica) Replica {
		cr = &confirmReplica{handReplica: hr}
		return cr
	})
	h.do(func() error {
		_, err := q.Send([]SendEntry{{Body: []byte("a")}, {Body: []byte("b")}}, nil)
		return err
	})

	cr.set(fmt.Errorf("%w: not confirmed (test)", ErrNotLeader))
	if got, err := q.Peek(16, nil); len(got) != 0 || !errors.Is(err, ErrNotLeader) {
		t.Fatalf("unconfirmed peek: %d messages, %v", len(got), err)
	}
	if got, err := q.Receive(context.Background(), ReceiveOptions{Max: 1, HasWait: true}, nil); len(got) != 0 || !errors.Is(err, ErrNotLeader) {
		t.Fatalf("unconfirmed receive: %d messages, %v", len(got), err)
	}
	cr.set(nil)
	got, err := q.Receive(context.Background(), ReceiveOptions{Max: 16, HasWait: true}, nil)
	if err != nil || len(got) != 1 {
		// The unconfirmed receive took the other one: it comes back after
		// its visibility timeout, as any message whose answer was lost.
		t.Fatalf("confirmed receive: %d messages, %v", len(got), err)
	}
	if _, err := q.Receive(context.Background(), ReceiveOptions{Max: 16, HasWait: true}, nil); !errors.Is(err, ErrMessageNotExist) {
		t.Fatalf("empty receive: %v", err)
	}
	if asked := cr.asked(); !slices.Equal(asked, []uint64{1, 1, 1}) {
		t.Fatalf("confirmations asked for terms %v, want [1 1 1]", asked)
	}
	info, err := q.Attributes()
	if err != nil || info.Active != 0 || info.Inactive != 2 {
		t.Fatalf("after the receives: %+v, %v; want both Inactive", info, err)
	}
}

// A leader that steps down between a receive's admission and its read
// still has the read confirmed for the term it was admitted in (and so
// refused), never answered unconfirmed: the term is read with the
// admission, not after it (replica_confirm.go, invariant 1).
func TestReplicaReceiveAdmittedJustBeforeAStepDownIsConfirmed(t *testing.T) {
	var cr *confirmReplica
	h, q := newHandShardWith(t, func(hr *handReplica) Replica {
		cr = &confirmReplica{handReplica: hr}
		return cr
	})
	h.do(func() error {
		_, err := q.Send([]SendEntry{{Body: []byte("a")}}, nil)
		return err
	})
	cr.set(fmt.Errorf("%w: stepped down (test)", ErrNotLeader))
	r := h.leader.store.(*replStore)
	r.enterHook = func(admitted bool) {
		if admitted {
			r.enterHook = nil
			if err := h.leader.SetLeader(false, 0); err != nil {
				t.Error(err)
			}
		}
	}
	got, err := q.Receive(context.Background(), ReceiveOptions{Max: 1, HasWait: true}, nil)
	if len(got) != 0 {
		t.Fatalf("a receive admitted just before the step-down answered %d messages unconfirmed (err %v)", len(got), err)
	}
	if !errors.Is(err, ErrNotLeader) {
		t.Fatalf("receive: %v, want ErrNotLeader", err)
	}
	if asked := cr.asked(); !slices.Equal(asked, []uint64{1}) {
		t.Fatalf("confirmations asked for terms %v, want [1]", asked)
	}
}

// blockingConfirm is a handReplica whose ConfirmLead tells asked and
// waits for release's answer.
type blockingConfirm struct {
	*handReplica
	asked   chan struct{}
	release chan error
}

func (c *blockingConfirm) ConfirmLead(term uint64) error {
	c.asked <- struct{}{}
	return <-c.release
}

// A receive waiting for its lead's confirmation stays admitted
// (replica_confirm.go, invariant 4): a hand-over (Yield, then Settled)
// waits for it even once its records are committed, so that the lead does
// not move between its take and its answer.
func TestReplicaHandOverWaitsForAConfirmingReceive(t *testing.T) {
	var bc *blockingConfirm
	h, q := newHandShardWith(t, func(hr *handReplica) Replica {
		bc = &blockingConfirm{handReplica: hr, asked: make(chan struct{}), release: make(chan error)}
		return bc
	})
	h.do(func() error {
		_, err := q.Send([]SendEntry{{Body: []byte("a")}}, nil)
		return err
	})
	got := make(chan error, 1)
	go func() {
		msgs, err := q.Receive(context.Background(), ReceiveOptions{Max: 1, HasWait: true}, nil)
		if err == nil && len(msgs) != 1 {
			err = fmt.Errorf("%d messages, want 1", len(msgs))
		}
		got <- err
	}()
	<-bc.asked
	h.waitProposals(1)
	h.pump() // the receive's records commit: only its answer is left
	if err := h.leader.Yield(true); err != nil {
		t.Fatal(err)
	}
	if h.leader.Settled() {
		t.Fatal("settled while a receive waits for its lead's confirmation: a hand-over would move the lead between its take and its answer")
	}
	bc.release <- nil
	if err := <-got; err != nil {
		t.Fatalf("the confirmed receive: %v", err)
	}
	h.pump()
	if !h.leader.Settled() {
		t.Fatal("not settled once the receive answered")
	}
}
