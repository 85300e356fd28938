package engine

// One-message helpers: SendOne, ReceiveOne, DeleteOne, ChangeVisibilityOne.
//
// The batch forms (Send, Receive, Delete, ChangeVisibility) stay the
// primary API: they take caller-owned slices so that a busy caller
// allocates nothing. For a program that handles one message at a time that
// is ceremony: a result slice, an error slice, ReceiveOptions.HasWait. The
// helpers here are thin wrappers over the batch forms with the shape Go
// programs that embed a queue tend to have:
//
//   - goqite: q.Send(ctx, Message), q.Receive(ctx) (*Message, error),
//     q.Delete(ctx, id), q.Extend(ctx, id, d): context first, one message
//     per call. We take that shape.
//   - nsq's go-diskqueue: Put([]byte) error and a ReadChan() channel: no
//     acknowledgement, so no handle to delete or extend; it does not fit a
//     queue with visibility timeouts.
//   - nats-server in-process (nats.go against an embedded server):
//     Publish, then sub.NextMsg(timeout) and msg.Ack(): a wait per receive,
//     which ReceiveOne's wait argument mirrors.
//
// Every helper takes a ctx first, as STYLE §7 asks of calls that can wait:
// a durable send, delete or visibility change waits for its fsync (group
// commit), a receive waits for a message. When ctx can end and ends first,
// the helper returns ctx.Err() at once; the operation itself cannot be
// withdrawn once handed to the log, so it may still take effect (exactly
// like a client whose network call timed out: at-least-once). That wait
// runs the batch call on a goroutine that ends when the call returns (the
// log answers every append, also when the broker closes). With a ctx that
// cannot end (context.Background()), no goroutine is used.
//
// A received message from ReceiveOne owns its Body (nothing is reused).

import (
	"bytes"
	"context"
	"time"
)

// SendOne stores one message and returns its id and body MD5. It returns
// once the message is acknowledged by the log's sync mode (after its fsync
// with SyncAlways), or with ctx.Err() when ctx ends first; the message may
// then still be stored (at least once: as a client whose call timed out,
// retry only what may be sent twice). The caller may reuse e's body and
// properties as soon as SendOne returns.
//
//	res, err := q.SendOne(ctx, engine.SendEntry{Body: []byte("hello"), Priority: 1})
func (q *Queue) SendOne(ctx context.Context, e SendEntry) (SendResult, error) {
	if ctx.Done() != nil {
		// The send may outlive the call (waitOne): it works on its own
		// copies.
		e.Body = bytes.Clone(e.Body)
		if len(e.Properties) > 0 {
			ps := make([]Property, len(e.Properties))
			for i, p := range e.Properties {
				ps[i] = Property{Name: bytes.Clone(p.Name), Value: bytes.Clone(p.Value), Type: p.Type, System: p.System}
			}
			e.Properties = ps
		}
	}
	return waitOne(ctx, func() (SendResult, error) {
		var buf [1]SendResult
		out, err := q.Send([]SendEntry{e}, buf[:0])
		if err != nil {
			return SendResult{}, err
		}
		return out[0], out[0].Err
	})
}

// ReceiveOne takes one Active message, waiting up to wait (0..30 s; 0: do
// not wait) for one, and returns it Inactive with a fresh receipt handle.
// It returns ErrMessageNotExist when none came, and ctx.Err() when ctx
// ends first; the other errors are Receive's (ErrTooManyLongPolls too
// means nothing for this caller now: poll again after a pause).
//
//	m, err := q.ReceiveOne(ctx, 5*time.Second)
//	if errors.Is(err, engine.ErrMessageNotExist) { /* nothing yet */ }
func (q *Queue) ReceiveOne(ctx context.Context, wait time.Duration) (Message, error) {
	if err := ctx.Err(); err != nil {
		return Message{}, err // as the other helpers: an ended context takes nothing
	}
	msgs, err := q.Receive(ctx, ReceiveOptions{Max: 1, Wait: wait, HasWait: true}, nil)
	if err == nil && len(msgs) == 0 {
		err = ErrMessageNotExist
	}
	if err != nil {
		if ctx.Err() != nil {
			return Message{}, ctx.Err()
		}
		return Message{}, err
	}
	return msgs[0], nil
}

// DeleteOne deletes the message that h was issued for. A stale, used or
// expired handle is ErrMessageNotExist; one not issued here is
// ErrReceiptHandleError. When ctx ends first it returns ctx.Err(), and the
// delete may still happen.
//
//	err := q.DeleteOne(ctx, m.Handle)
func (q *Queue) DeleteOne(ctx context.Context, h ReceiptHandle) error {
	_, err := waitOne(ctx, func() (struct{}, error) {
		var errs [1]error
		if _, err := q.Delete([]ReceiptHandle{h}, errs[:]); err != nil {
			return struct{}{}, err
		}
		return struct{}{}, errs[0]
	})
	return err
}

// ChangeVisibilityOne makes the message of h visible again timeout (1 s ..
// 12 h) from now, and returns its new receipt handle; h stops working.
// When ctx ends first it returns ctx.Err(), and the change may still
// happen: h may then be dead with no new handle given, and the message
// comes back when the new timeout ends.
//
//	h, err := q.ChangeVisibilityOne(ctx, m.Handle, time.Minute) // more time to work on it
func (q *Queue) ChangeVisibilityOne(ctx context.Context, h ReceiptHandle, timeout time.Duration) (ReceiptHandle, error) {
	return waitOne(ctx, func() (ReceiptHandle, error) {
		nh, _, err := q.ChangeVisibility(h, timeout)
		return nh, err
	})
}

// Ack deletes m, received from q: the work it carried is done. It is
// DeleteOne(ctx, m.Handle); an error means the message may come back (its
// visibility timeout ended first: ErrMessageNotExist), at least once.
//
//	if err := q.Ack(ctx, &m); err != nil { log.Print(err) }
func (q *Queue) Ack(ctx context.Context, m *Message) error { return q.DeleteOne(ctx, m.Handle) }

// Extend keeps m, received from q, invisible for timeout (1 s .. 12 h)
// (not at the same time as another Extend or Ack of m)
// from now, and updates m.Handle and m.NextVisibleTime in place, so that a
// later Ack or Extend uses the new handle (ChangeVisibilityOne returns it
// and kills the old one: a caller that kept the old one could no longer
// delete the message). When ctx ends first it returns ctx.Err(), m is
// unchanged, and the change may still happen (m.Handle then no longer
// works, and the message comes back when the new timeout ends).
//
//	for working { if err := q.Extend(ctx, &m, time.Minute); err != nil { break } }
func (q *Queue) Extend(ctx context.Context, m *Message, timeout time.Duration) error {
	type ext struct {
		h    ReceiptHandle
		next time.Time
	}
	old := m.Handle // read now: the change may run on after ctx ends, and m be reused
	r, err := waitOne(ctx, func() (ext, error) {
		h, next, err := q.ChangeVisibility(old, timeout)
		return ext{h, next}, err
	})
	if err == nil {
		m.Handle, m.NextVisibleTime = r.h, r.next
	}
	return err
}

// waitOne runs op and returns its outcome, or ctx.Err() if ctx ends first
// (op then finishes on its own goroutine; see the file comment).
func waitOne[T any](ctx context.Context, op func() (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	if ctx.Done() == nil {
		return op()
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1) // buffered: the goroutine never blocks on an abandoned wait
	go func() {
		v, err := op()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}
