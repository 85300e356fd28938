package engine

// Background jobs on the injected Clock.
//
// The checkpointer and the compactor are jobs: a function run by a Clock
// timer some time after someone kicks it. With the system clock the timer
// runs the function in its own goroutine; with a FakeClock it runs inside
// Advance, in the test's goroutine, so a seeded test replays the same
// interleaving every time.
//
// A job is armed only while there is work: the hot path kicks it (one atomic
// load once it is armed), and a run that finds more to do re-arms it. An idle
// broker runs no timer at all, and a fake clock moved by days fires an idle
// job once, not once per period.
//
// Invariants:
//  1. At most one run of a job is in progress; stop waits for it, and no run
//     starts after stop returns.
//  2. A kick during a run arms the job again (armed is cleared before the
//     run starts), so work that arrives meanwhile is not missed.
//
// Owner: mu serialises runs and guards stopped; armed is an atomic so that
// kick never takes mu.

import (
	"sync"
	"sync/atomic"
	"time"
)

type job struct {
	every   time.Duration
	fn      func() (again bool) // the work; true: run again after every
	timer   Timer
	armed   atomic.Bool
	mu      sync.Mutex
	stopped bool // guarded by mu
}

// newJob returns a job that runs fn every period while kicked.
func newJob(clock Clock, every time.Duration, fn func() bool) *job {
	j := &job{every: every, fn: fn}
	j.timer = clock.AfterFunc(time.Hour, j.run)
	j.timer.Stop()
	return j
}

// kick arms the job to run after its period, unless it is armed already.
func (j *job) kick() {
	if j.armed.Load() || !j.armed.CompareAndSwap(false, true) {
		return
	}
	j.timer.Reset(j.every)
}

func (j *job) run() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.stopped {
		return
	}
	j.armed.Store(false)
	if j.fn() {
		j.kick()
	}
}

// stop disarms the job and waits for a run in progress (invariant 1).
func (j *job) stop() {
	j.mu.Lock()
	j.stopped = true
	j.timer.Stop()
	j.mu.Unlock()
}
