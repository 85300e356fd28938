package chaos

// The history: every operation a client invoked, with what it was told.
//
// Invariants:
//  1. An operation is recorded when it is invoked (Pending), before its
//     request leaves, and completed at most once, with its Outcome and the
//     time its answer (or error) came back; Complete ≥ Invoke.
//  2. The history only grows; Ops returns a copy.
//
// Owner: mu guards ops; an *Op is written only by the client that invoked
// it until Complete, and read by others only through Ops.

import (
	"errors"
	"os"
	"sync"
	"time"
)

// Kind is an operation's kind.
type Kind uint8

const (
	OpSend    Kind = iota + 1 // send one message
	OpReceive                 // receive up to N messages
	OpDelete                  // delete one message by its handle
	OpPublish                 // publish one message to a topic (Queue: the topic)
)

func (k Kind) String() string {
	return [...]string{"?", "send", "receive", "delete", "publish"}[k]
}

// Op is one operation of the history.
type Op struct {
	ID       int
	Process  int // the client that ran it
	Kind     Kind
	Node     int // the node whose API it was sent to
	Queue    string
	Invoke   time.Time
	Complete time.Time // zero while Pending
	Outcome  Outcome
	Err      string
	TimedOut bool // the client gave up waiting (its timeout)

	Body      string     // send, publish: the body; delete: the deleted message's body
	MessageID string     // send, publish: the id it was given; delete: the message's id
	Received  []Received // receive: what it took
	Handle    string     // delete: the receipt handle
}

// History records operations; safe for concurrent use.
type History struct {
	mu  sync.Mutex
	ops []*Op // guarded by mu
}

// Invoke records op as invoked now and returns it.
func (h *History) Invoke(op Op) *Op {
	op.Invoke = time.Now()
	op.Outcome = Pending
	p := &op
	h.mu.Lock()
	p.ID = len(h.ops)
	h.ops = append(h.ops, p)
	h.mu.Unlock()
	return p
}

// Done completes op with the error its call returned; set (if not nil)
// records the call's results in op.
func (h *History) Done(op *Op, err error, set func(op *Op)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	op.Complete = time.Now()
	if set != nil {
		set(op)
	}
	op.Outcome = classify(err)
	if err != nil {
		op.Err = err.Error()
		op.TimedOut = errors.Is(err, os.ErrDeadlineExceeded) || isTimeout(err)
	}
}

// isTimeout reports a net/http client timeout.
func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

// Ops returns a copy of the history (each op as it is now).
func (h *History) Ops() []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Op, len(h.ops))
	for i, p := range h.ops {
		out[i] = *p
	}
	return out
}
