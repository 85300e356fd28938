package engine

// The leases of notifications being pushed (push.go invariant 5): a
// notification is leased (hidden from the other workers) from the receive
// that took it until it is settled. It may wait long for its turn: the
// endpoint's slots are shared by every subscription pointing there, and a
// worker pushes its batch one notification after another. So its lease is
// renewed while it waits, and again before its push if what is left might
// not outlast the attempt. A lapsed lease made another worker push it too
// (topics audit), and even with one worker a lapse is one more receive,
// an attempt of its retry strategy spent (review).

import (
	"context"
	"errors"
	"time"
)

// takeSlot waits for a slot of the endpoint for ms[0] (invariant 3),
// renewing the leases of the batch's notifications still to push (ms) as
// each comes within Timeout + leaseMargin of its end. A notification whose
// renewal finds it lapsed gets a zero Handle (it is skipped). It reports
// false when ctx ends or ms[0] lapsed.
func (ps *pushSub) takeSlot(ctx context.Context, ms []Message) bool {
	select {
	case ps.sem <- struct{}{}:
		return true
	default:
	}
	p := ps.p
	margin := p.opts.Timeout + leaseMargin
	for {
		now := p.b.clock.Now()
		next := p.opts.Lease
		for k := range ms {
			m := &ms[k]
			if m.Handle.IsZero() {
				continue
			}
			if m.NextVisibleTime.Sub(now) < margin && !ps.renew(m) {
				m.Handle = ReceiptHandle{}
				continue
			}
			next = min(next, m.NextVisibleTime.Sub(now)-margin)
		}
		if ms[0].Handle.IsZero() {
			return false
		}
		fired := make(chan struct{})
		t := p.b.clock.AfterFunc(max(next, 100*time.Millisecond), func() { close(fired) })
		select {
		case ps.sem <- struct{}{}:
			t.Stop()
			return true
		case <-fired:
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
}

// leaseFor makes sure m's lease outlasts an attempt that starts now
// (invariant 5), renewing it, and reports whether m may be pushed: false
// when its lease ended before its turn (another worker may have it).
func (ps *pushSub) leaseFor(m *Message) bool {
	if m.NextVisibleTime.Sub(ps.p.b.clock.Now()) >= ps.p.opts.Timeout+leaseMargin {
		return true
	}
	return ps.renew(m)
}

// renew leases m for another PushOptions.Lease from now, and reports
// false when its lease had lapsed (its handle refused). Another failure
// (the storage, for now) keeps the old lease and reports true: pushed all
// the same, it is at worst pushed twice. The record is not waited for: a
// renewal lost in a crash repeats a push, which at-least-once allows.
func (ps *pushSub) renew(m *Message) bool {
	h, next, err := ps.q.changeVisibility(m.Handle, ps.p.opts.Lease, false)
	switch {
	case errors.Is(err, ErrMessageNotExist), errors.Is(err, ErrReceiptHandleError), errors.Is(err, ErrQueueNotExist):
		ps.p.b.log.Debug("notification not pushed: its lease ended before its turn; it is pushed again once received", "subscription", ps.sub.Load().name, "err", err)
		return false
	case err != nil:
		return true
	}
	m.Handle, m.NextVisibleTime = h, next
	return true
}

// deleteDelivered deletes m, answered 2xx, from its push queue at once, so
// that its lease need not outlast the rest of the batch.
func (ps *pushSub) deleteDelivered(m *Message) {
	var errs [1]error
	if _, err := ps.q.delete([]ReceiptHandle{m.Handle}, errs[:], false); err != nil || errs[0] != nil {
		ps.p.b.log.Info("a delivered notification could not be deleted from its push queue; it will be pushed again",
			"subscription", ps.sub.Load().name, "err", errors.Join(err, errs[0]))
	}
}
