package engine

// Long polling.
//
// A receive that finds nothing and may wait registers a waiter on its
// queue's FIFO list, checks once more (so a message that arrived between the
// first look and the registration is not missed), and sleeps on the waiter's
// channel, on its context and on a clock timer for the remaining wait. Every
// event that makes messages Active (send, delay end, visibility end) wakes as
// many waiters as it made messages Active; a woken waiter that finds nothing
// (another receive was faster) waits again for the rest of its time.
// No goroutine per message, no polling loop, no lock held while sleeping.
//
// Owner: waitQueue.mu guards the list; a waiter's fields other than its list
// links belong to the receive using it.

import (
	"sync"
	"sync/atomic"
	"time"
)

type waiter struct {
	ch         chan struct{} // capacity 1: a wake-up or a timeout
	timer      Timer         // created once per waiter, reset per wait
	next, prev *waiter       // guarded by waitQueue.mu
	queued     bool          // guarded by waitQueue.mu
	fired      atomic.Bool   // the timer ran its course
}

type waitQueue struct {
	mu         sync.Mutex
	head, tail *waiter
	n          int
}

func (wq *waitQueue) init() {}

func (wq *waitQueue) push(w *waiter) {
	wq.mu.Lock()
	w.next, w.prev = nil, wq.tail
	if wq.tail != nil {
		wq.tail.next = w
	} else {
		wq.head = w
	}
	wq.tail = w
	w.queued = true
	wq.n++
	wq.mu.Unlock()
}

// remove unlinks w if it is still queued, and reports whether it was not:
// a wake-up took it off the list (wake).
func (wq *waitQueue) remove(w *waiter) (woken bool) {
	wq.mu.Lock()
	woken = !w.queued
	if !woken {
		wq.unlinkLocked(w)
	}
	wq.mu.Unlock()
	return woken
}

// leave is remove for a receive that stops waiting (it took messages, or
// its deadline or its context ended): a wake-up it was given and will not
// use goes to the next waiter. (Dropped, the next waiter slept through its
// wait, up to 30 s, beside an Active message: an embedder's cancelled
// receive, or a cluster's forwarded poll whose forwarding node stopped
// waiting, during a send.) A wake-up passed on to a waiter that then finds
// nothing costs it one more look.
func (wq *waitQueue) leave(w *waiter) {
	if wq.remove(w) {
		wq.wake(1)
	}
}

func (wq *waitQueue) unlinkLocked(w *waiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		wq.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		wq.tail = w.prev
	}
	w.next, w.prev, w.queued = nil, nil, false
	wq.n--
}

// wake wakes up to k waiters, oldest first; k < 0 wakes all.
func (wq *waitQueue) wake(k int) {
	wq.mu.Lock()
	for wq.head != nil && k != 0 {
		w := wq.head
		wq.unlinkLocked(w)
		select {
		case w.ch <- struct{}{}:
		default:
		}
		k--
	}
	wq.mu.Unlock()
}

// waiting returns the number of queued waiters.
func (wq *waitQueue) waiting() int {
	wq.mu.Lock()
	defer wq.mu.Unlock()
	return wq.n
}

// getWaiter returns a pooled waiter with a drained channel.
func (b *Broker) getWaiter() *waiter {
	if w, ok := b.waiterPool.Get().(*waiter); ok {
		return w
	}
	w := &waiter{ch: make(chan struct{}, 1)}
	w.timer = b.clock.AfterFunc(time.Hour, w.signal)
	w.timer.Stop()
	return w
}

func (b *Broker) putWaiter(w *waiter) {
	if !w.timer.Stop() && !w.fired.Load() {
		// Its timer is firing right now: a late fired flag must not end
		// the next wait that takes this waiter from the pool.
		return
	}
	select {
	case <-w.ch:
	default:
	}
	b.waiterPool.Put(w)
}

func (w *waiter) signal() {
	w.fired.Store(true)
	select {
	case w.ch <- struct{}{}:
	default:
	}
}
