package engine

import (
	"sort"
	"sync"
	"sync/atomic"
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

func (c offsetClock) Now() time.Time { return sysClock.Now().Add(c.d) }

func (offsetClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// SystemClock returns the wall clock, held steady against steps back.
//
// It advances with the monotonic clock, which NTP slews as it slews the
// wall clock but never steps, from the wall time it last took; it takes
// the wall time again only when that is ahead of it by more than
// steadyAhead (a host whose clock is set right after boot). A step back
// (an NTP correction, a VM restored from a snapshot, a leap second) is not
// followed while the process runs: the broker's deadlines are wall times,
// and following it made a message sent after it expire at once when the
// step was longer than its retention, ignored its delay, kept received
// messages hidden for the step on top of their timeout and long polls
// waiting as long. After a step back this clock runs slower than the
// monotonic one by steadySlew until it meets the wall clock again (as NTP
// slews), so it never goes back and is ahead of the system's by at most
// the step, for a while: a host whose time daemon steps its fast clock
// back by 0.5 s an hour drifted ahead without bound when every step was
// kept (found in review). Every broker of the process shares it.
func SystemClock() Clock { return sysClock }

const (
	// steadyAhead: a wall clock further ahead of the steady one than this
	// has been stepped forward, and is followed.
	steadyAhead = 100 * time.Millisecond
	// steadyBehind: a wall clock further behind than this has been
	// stepped back, and the steady clock slews towards it.
	steadyBehind = time.Millisecond
	// steadySlew: while it slews, the steady clock gives up 1/steadySlew
	// of the time that passes (0.1 %: a step back of 1 s is caught up in
	// about 17 minutes), so timeouts it measures then are 0.1 % short.
	steadySlew = 1000
)

var sysClock = &steadyClock{read: readSystemTime}

// procStart anchors the monotonic readings of readSystemTime.
var procStart = time.Now()

// readSystemTime returns the wall time and the monotonic time since
// procStart, from one reading.
func readSystemTime() (wall time.Time, mono time.Duration) {
	t := time.Now()
	return t.Round(0), t.Sub(procStart)
}

type steadyClock struct {
	read   func() (wall time.Time, mono time.Duration)
	anchor atomic.Pointer[clockAnchor] // the wall time taken last, and when (monotonic)
}

type clockAnchor struct {
	wall time.Time
	mono time.Duration
	slew bool // running slow towards a wall clock stepped back
}

func (c *steadyClock) Now() time.Time {
	wall, mono := c.read()
	if a := c.anchor.Load(); a != nil {
		e := mono - a.mono
		if a.slew {
			e -= e / steadySlew
		}
		steady := a.wall.Add(e)
		switch d := wall.Sub(steady); {
		case d > steadyAhead:
			// A step forward: follow it (below).
		case a.slew && d >= 0:
			// Caught up with the wall clock: follow it again (below); it
			// is not behind what this clock gave.
		case !a.slew && d < -steadyBehind:
			// A step back: slow down from here, not back.
			c.anchor.Store(&clockAnchor{wall: steady, mono: mono, slew: true})
			return steady
		default:
			return steady
		}
	}
	c.anchor.Store(&clockAnchor{wall: wall, mono: mono}) // the first reading, a step forward, or caught up
	return wall
}

func (*steadyClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

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
