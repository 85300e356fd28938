package ctl

// A moved batch stays invisible at the source while its copies are sent.
// A redrive or a migration receives a batch, sends the copies, then
// deletes the originals with their receipt handles. A send that outlasted
// the source queue's visibility timeout (a destination electing a leader,
// retries after a lost answer) let the originals become visible again:
// their delete missed, and a later round moved them a second time (a
// duplicate at the destination, exit 1).
//
// Invariants:
//  1. While a batch's copies are being sent, every half of the source
//     queue's visibility timeout (counted from the receive) each original
//     is made invisible for the whole timeout again
//     (ChangeMessageVisibility), so that none becomes visible while its
//     copy may still be stored.
//  2. A change returns a new receipt handle and the old one is spent: the
//     delete uses the latest handle of each original (end). An original
//     whose change failed keeps its last handle; its delete then misses if
//     that handle expired, and it is counted as copied, not moved (at
//     least once, never lost).
//  3. end stops the keeping and waits for a change under way, so no change
//     races the delete.
//
// Owner: the keeper's goroutine owns cur until end returns it.

import (
	"context"
	"time"
)

// keeper keeps one batch invisible at the source (invariant 1).
type keeper struct {
	stop chan struct{}
	done chan struct{}
	cur  map[string]string // the received handle → the latest
}

// keep starts keeping msgs invisible, from their receive at received, in
// queue rd.from of the source whose visibility timeout is rd.visibility
// (none kept when it is unknown).
func (rd *mover) keep(ctx context.Context, r *run, msgs []Message, received time.Time) *keeper {
	k := &keeper{stop: make(chan struct{}), done: make(chan struct{}), cur: make(map[string]string, len(msgs))}
	for _, m := range msgs {
		k.cur[m.ReceiptHandle] = m.ReceiptHandle
	}
	if rd.visibility <= 0 {
		close(k.done)
		return k
	}
	secs := max(1, int(rd.visibility/time.Second))
	go func() {
		defer close(k.done)
		next := received.Add(rd.visibility / 2)
		for {
			t := time.NewTimer(time.Until(next))
			select {
			case <-t.C:
			case <-k.stop:
				t.Stop()
				return
			case <-ctx.Done():
				t.Stop()
				return
			}
			next = time.Now().Add(rd.visibility / 2)
			for first, h := range k.cur {
				select {
				case <-k.stop:
					return
				default:
				}
				// One try each: the next round comes in half a timeout,
				// and a change whose answer was lost may have spent h.
				rctx, cancel := r.reqCtx(ctx, 0)
				nh, _, err := rd.src.changeVisibility(rctx, rd.from, h, secs)
				cancel()
				if err == nil && nh != "" {
					k.cur[first] = nh
				}
			}
		}
	}()
	return k
}

// end stops the keeping and returns each received handle's latest
// (invariants 2, 3).
func (k *keeper) end() map[string]string {
	close(k.stop)
	<-k.done
	return k.cur
}
