package engine

import (
	"sort"
	"sync"
	"time"
)

// Clock is the engine's only source of time. Tests use a FakeClock and never
// sleep; the daemon uses SystemClock.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine (system clock) or in the
	// goroutine that advances the clock (fake clock) once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a stoppable, resettable timer created by a Clock.
type Timer interface {
	Stop() bool
	Reset(d time.Duration) bool
}

// OffsetClock is the system clock shifted by offset: a node whose clock is
// wrong, for fault tests (smqd --clock-offset).
func OffsetClock(offset time.Duration) Clock { return offsetClock{offset} }

type offsetClock struct{ d time.Duration }

func (c offsetClock) Now() time.Time { return time.Now().Add(c.d) }

func (offsetClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// SystemClock returns the wall clock.
func SystemClock() Clock { return systemClock{} }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// FakeClock is a manually advanced Clock for tests. Timers fire, in deadline
// order, inside Advance/Set, in the calling goroutine, with no lock held.
type FakeClock struct {
	mu struct {
		sync.Mutex
		now    time.Time
		timers []*fakeTimer // armed timers
		seq    uint64       // creation order, for stable firing order
	}
}

// NewFakeClock returns a fake clock set to start.
func NewFakeClock(start time.Time) *FakeClock {
	c := &FakeClock{}
	c.mu.now = start
	return c
}

// Now returns the fake time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.now
}

// AfterFunc registers f to run once the fake time reaches now+d.
func (c *FakeClock) AfterFunc(d time.Duration, f func()) Timer {
	t := &fakeTimer{c: c, f: f}
	t.Reset(d)
	return t
}

// Advance moves the clock forward by d, firing every timer that falls due
// (each at its own deadline, in order).
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	to := c.mu.now.Add(d)
	c.mu.Unlock()
	c.Set(to)
}

// Set moves the clock to t (never backwards), firing due timers in order.
func (c *FakeClock) Set(to time.Time) {
	for {
		c.mu.Lock()
		if to.Before(c.mu.now) {
			c.mu.Unlock()
			return
		}
		var next *fakeTimer
		for _, t := range c.mu.timers {
			if !t.at.After(to) && (next == nil || t.at.Before(next.at) || (t.at.Equal(next.at) && t.seq < next.seq)) {
				next = t
			}
		}
		if next == nil {
			c.mu.now = to
			c.mu.Unlock()
			return
		}
		if next.at.After(c.mu.now) {
			c.mu.now = next.at
		}
		c.removeLocked(next)
		f := next.f
		c.mu.Unlock()
		f()
	}
}

// Pending returns the deadlines of the armed timers, earliest first.
func (c *FakeClock) Pending() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]time.Time, 0, len(c.mu.timers))
	for _, t := range c.mu.timers {
		out = append(out, t.at)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

func (c *FakeClock) removeLocked(t *fakeTimer) bool {
	for i, x := range c.mu.timers {
		if x == t {
			last := len(c.mu.timers) - 1
			c.mu.timers[i] = c.mu.timers[last]
			c.mu.timers[last] = nil
			c.mu.timers = c.mu.timers[:last]
			return true
		}
	}
	return false
}

type fakeTimer struct {
	c   *FakeClock
	f   func()
	at  time.Time // guarded by c.mu
	seq uint64    // guarded by c.mu
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	return t.c.removeLocked(t)
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.c.removeLocked(t)
	t.at = t.c.mu.now.Add(d)
	t.c.mu.seq++
	t.seq = t.c.mu.seq
	t.c.mu.timers = append(t.c.mu.timers, t)
	return was
}
