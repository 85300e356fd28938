package engine

// Time that does not run the way a broker would like: a wall clock
// stepped back while the broker runs (an NTP correction, a VM restored
// from a snapshot), across a restart, and times read by concurrent
// operations in another order than they stamp. SystemClock holds steady
// against steps back (clock.go), but a Clock given by an embedder, and a
// cluster's replicas whose clocks differ, still meet these; each test
// failed before its fix (from the clock audit, 2026-12-06):
//   - a received message whose visibility offset (unsigned, from its
//     enqueue time) wrapped to 49.7 days and never came back: receive,
//     ChangeMessageVisibility (TestReceiveOnAClockBehindComesBack,
//     TestChangeVisibilityOnAClockBehindComesBack);
//   - a FirstDequeueTime 49.7 days after the enqueue time, on about 0.4 %
//     of receives of a busy queue, with no step at all
//     (TestFirstDequeueTimeNeverBeforeEnqueue);
//   - every push retry of a failing endpoint fired at once and the
//     notification discarded (TestPushRetriesAfterAClockStepBack);
//   - a long poll waiting as long as the step (TestClockStepBackEndsLongPolls);
//   - a message sent after a step longer than its retention expired as
//     it was sent, and a delay shorter than the step ignored
//     (TestClockStepBackKeepsNewMessages, TestClockStepBackKeepsDelays).

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// stepClock models the real system clock: timers run on a monotonic time
// (as time.AfterFunc does), Now() is that monotonic time plus a wall offset
// that Step changes (an NTP step, a VM restore) without firing anything.
type stepClock struct {
	mu     sync.Mutex
	mono   time.Time
	off    time.Duration
	timers []*stepTimer
	seq    uint64
}

type stepTimer struct {
	c   *stepClock
	f   func()
	at  time.Time
	seq uint64
}

func newStepClock(start time.Time) *stepClock { return &stepClock{mono: start} }

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mono.Add(c.off)
}

func (c *stepClock) AfterFunc(d time.Duration, f func()) Timer {
	t := &stepTimer{c: c, f: f}
	t.Reset(d)
	return t
}

// Step moves the wall clock by d (either way); timers keep their monotonic deadlines.
func (c *stepClock) Step(d time.Duration) {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}

// Advance lets d of real (monotonic) time pass, firing due timers in order.
func (c *stepClock) Advance(d time.Duration) {
	c.mu.Lock()
	to := c.mono.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		var next *stepTimer
		for _, t := range c.timers {
			if !t.at.After(to) && (next == nil || t.at.Before(next.at) || (t.at.Equal(next.at) && t.seq < next.seq)) {
				next = t
			}
		}
		if next == nil {
			c.mono = to
			c.mu.Unlock()
			return
		}
		if next.at.After(c.mono) {
			c.mono = next.at
		}
		c.removeLocked(next)
		f := next.f
		c.mu.Unlock()
		f()
	}
}

// Pending returns the monotonic delays left of the armed timers.
func (c *stepClock) Pending() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []time.Duration
	for _, t := range c.timers {
		out = append(out, t.at.Sub(c.mono))
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func (c *stepClock) removeLocked(t *stepTimer) bool {
	for i, x := range c.timers {
		if x == t {
			last := len(c.timers) - 1
			c.timers[i] = c.timers[last]
			c.timers[last] = nil
			c.timers = c.timers[:last]
			return true
		}
	}
	return false
}

func (t *stepTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	return t.c.removeLocked(t)
}

func (t *stepTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.c.removeLocked(t)
	t.at = t.c.mono.Add(d)
	t.c.seq++
	t.seq = t.c.seq
	t.c.timers = append(t.c.timers, t)
	return was
}

func openStep(t *testing.T, dir string, clk *stepClock) *Broker {
	t.Helper()
	b, err := Open(Options{Clock: clk, Logger: testLogger(t), Stripes: 1, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func recvNow(t *testing.T, q *Queue) []Message {
	t.Helper()
	msgs, err := q.Receive(context.Background(), ReceiveOptions{Max: 16}, nil)
	if err != nil && !errors.Is(err, ErrMessageNotExist) {
		t.Fatal(err)
	}
	return msgs
}

// A delayed message sent after the wall clock stepped back must still be
// delayed by its DelaySeconds.
func TestClockStepBackKeepsDelays(t *testing.T) {
	clk := newStepClock(t0)
	b := openStep(t, "", clk)
	defer b.Close()
	q := mustQueue(t, b, "q", DefaultQueueConfig())
	// Some activity so the stripe's wheel has seen the current time.
	if _, err := q.Send([]SendEntry{{Body: []byte("warm"), Delay: time.Second, HasDelay: true}}, nil); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Second)
	if got := recvNow(t, q); len(got) != 1 {
		t.Fatalf("warm: got %d", len(got))
	}
	clk.Step(-time.Hour)
	if _, err := q.Send([]SendEntry{{Body: []byte("late"), Delay: 60 * time.Second, HasDelay: true}}, nil); err != nil {
		t.Fatal(err)
	}
	if got := recvNow(t, q); len(got) != 0 {
		t.Errorf("a message sent with DelaySeconds=60 after a 1 h backward step was received at once: %q (NextVisibleTime %v, now %v)", got[0].Body, got[0].NextVisibleTime, clk.Now())
	}
}

// A message sent after the wall clock stepped back by more than the queue's
// retention must not be expired at once.
func TestClockStepBackKeepsNewMessages(t *testing.T) {
	clk := newStepClock(t0)
	b := openStep(t, "", clk)
	defer b.Close()
	cfg := DefaultQueueConfig()
	cfg.Retention = 60 * time.Second // spec minimum
	q := mustQueue(t, b, "q", cfg)
	if _, err := q.Send([]SendEntry{{Body: []byte("warm")}}, nil); err != nil {
		t.Fatal(err)
	}
	if got := recvNow(t, q); len(got) != 1 {
		t.Fatalf("warm: got %d", len(got))
	}
	clk.Step(-time.Hour)
	if _, err := q.Send([]SendEntry{{Body: []byte("new")}}, nil); err != nil {
		t.Fatal(err)
	}
	got := recvNow(t, q)
	info, _ := q.Attributes()
	if len(got) != 1 {
		t.Errorf("a message sent (acknowledged) after a 1 h backward step with retention 60 s is gone at once: received %d, attributes %+v", len(got), info)
	}
}

// A long poll with WaitSeconds=2 must return about 2 s later even if the wall
// clock steps back meanwhile.
func TestClockStepBackEndsLongPolls(t *testing.T) {
	clk := newStepClock(t0)
	b := openStep(t, "", clk)
	defer b.Close()
	q := mustQueue(t, b, "q", DefaultQueueConfig())
	done := make(chan error, 1)
	go func() {
		_, err := q.Receive(context.Background(), ReceiveOptions{Wait: 2 * time.Second, HasWait: true}, nil)
		done <- err
	}()
	// Wait until the poll is registered (its timer armed).
	for i := 0; i < 200 && q.waiters.waiting() == 0; i++ {
		time.Sleep(5 * time.Millisecond)
	}
	clk.Step(-time.Hour)
	for i := 0; i < 10; i++ {
		clk.Advance(time.Second)
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-done:
		t.Logf("long poll returned: %v", err)
	case <-time.After(time.Second):
		t.Errorf("a long poll with WaitSeconds=2 is still waiting 10 s (monotonic) after the wall clock stepped back 1 h; pending timers %v", clk.Pending())
		clk.Advance(2 * time.Hour)
		<-done
	}
}

func attrs(t *testing.T, q *Queue) QueueInfo {
	t.Helper()
	info, err := q.Attributes()
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// ChangeVisibility after a backward step longer than the timeout: the
// uint32 offset from the enqueue time wraps.
func TestChangeVisibilityOnAClockBehindComesBack(t *testing.T) {
	clk := newStepClock(t0)
	b := openStep(t, "", clk)
	defer b.Close()
	q := mustQueue(t, b, "q", DefaultQueueConfig())
	if _, err := q.Send([]SendEntry{{Body: []byte("a")}}, nil); err != nil {
		t.Fatal(err)
	}
	got := recvNow(t, q)
	if len(got) != 1 {
		t.Fatal("no message")
	}
	clk.Step(-10 * time.Minute)
	_, next, err := q.ChangeVisibility(got[0].Handle, 30*time.Second)
	t.Logf("ChangeVisibility(30s) at %v: err %v, NextVisibleTime %v", clk.Now(), err, next)
	if err == nil && next.Sub(clk.Now()) > time.Hour {
		t.Errorf("ChangeVisibility(30 s) after a 10 min backward step: NextVisibleTime %v is %v ahead", next, next.Sub(clk.Now()))
	}
	if !backWithin(t, clk, q, 20) {
		t.Errorf("message not back 20 h after ChangeVisibility(30 s); attributes %+v", attrs(t, q))
	}
}

// backWithin advances clk an hour at a time, up to hours, until q has a
// message to receive again.
func backWithin(t *testing.T, clk *stepClock, q *Queue, hours int) bool {
	t.Helper()
	for i := 0; i < hours; i++ {
		clk.Advance(time.Hour)
		if m := recvNow(t, q); len(m) > 0 {
			t.Logf("back after %d h", i+1)
			return true
		}
	}
	return false
}

// Receive of a message sent shortly before a backward step (the wheel idle,
// so its time lags): the visibility offset wraps.
func TestReceiveOnAClockBehindComesBack(t *testing.T) {
	clk := newStepClock(t0)
	b := openStep(t, "", clk)
	defer b.Close()
	cfg := DefaultQueueConfig()
	cfg.Retention = 24 * time.Hour
	q := mustQueue(t, b, "q", cfg)
	clk.Advance(10 * time.Minute)
	if _, err := q.Send([]SendEntry{{Body: []byte("a")}}, nil); err != nil {
		t.Fatal(err)
	}
	clk.Step(-5 * time.Minute)
	got := recvNow(t, q)
	if len(got) != 1 {
		t.Fatal("no message")
	}
	m := got[0]
	t.Logf("now %v Enqueue %v FirstDequeue %v NextVisible %v", clk.Now(), m.EnqueueTime, m.FirstDequeueTime, m.NextVisibleTime)
	if m.NextVisibleTime.Sub(clk.Now()) > time.Hour {
		t.Errorf("receive (visibility 30 s) 5 min after a backward step of 5 min: NextVisibleTime %v is %v ahead", m.NextVisibleTime, m.NextVisibleTime.Sub(clk.Now()))
	}
	if !backWithin(t, clk, q, 30) {
		t.Errorf("received message (not deleted) never came back; after 30 h attributes %+v (retention 24 h: expired unseen)", attrs(t, q))
	}
}

// Restart with the wall clock set back: messages sent in the last minutes
// before the stop are received after the restart.
func TestRestartOnAClockBehind(t *testing.T) {
	dir := t.TempDir()
	clk := newStepClock(t0)
	b := openStep(t, dir, clk)
	cfg := DefaultQueueConfig()
	cfg.Retention = 24 * time.Hour
	q := mustQueue(t, b, "q", cfg)
	if _, err := q.Send([]SendEntry{{Body: []byte("a")}, {Body: []byte("d"), Delay: 10 * time.Second, HasDelay: true}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	clk.Step(-2 * time.Minute) // the host comes back with its clock 2 minutes behind
	b = openStep(t, dir, clk)
	defer b.Close()
	q, err := b.Queue("q")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after reopening 2 min back: %+v", attrs(t, q))
	got := recvNow(t, q)
	t.Logf("first receive after reopening: %d messages", len(got))
	for _, m := range got {
		t.Logf("%q now %v Enqueue %v FirstDequeue %v NextVisible %v", m.Body, clk.Now(), m.EnqueueTime, m.FirstDequeueTime, m.NextVisibleTime)
		if m.NextVisibleTime.Sub(clk.Now()) > time.Hour {
			t.Errorf("receive (visibility 30 s) after a restart 2 min back: NextVisibleTime %v is %v ahead", m.NextVisibleTime, m.NextVisibleTime.Sub(clk.Now()))
		}
	}
	seen := len(got)
	for i := 0; i < 30; i++ {
		clk.Advance(time.Hour)
		seen += len(recvNow(t, q))
	}
	if seen < 3 {
		t.Errorf("messages received %d times in 30 h (want 'a' once at least twice, 'd' once); attributes %+v", seen, attrs(t, q))
	}
}

// Without any clock step: a receive reads its time before it takes a
// stripe's lock; a message sent in the next millisecond can be taken with
// now < its enqueue time, and firstOff = uint32(now - enq) wraps.
func TestFirstDequeueTimeNeverBeforeEnqueue(t *testing.T) {
	b, err := Open(Options{Logger: testLogger(t), Stripes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	q := mustQueue(t, b, "q", DefaultQueueConfig())
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	bad, total := 0, 0
	var example Message
	for i := 0; i < 2; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				q.Send([]SendEntry{{Body: []byte("x")}}, nil)
			}
		}()
		go func() {
			defer wg.Done()
			var dst []Message
			for {
				select {
				case <-stop:
					return
				default:
				}
				dst, _ = q.Receive(context.Background(), ReceiveOptions{Max: 16}, dst[:0])
				var hs []ReceiptHandle
				mu.Lock()
				for _, m := range dst {
					total++
					if d := m.FirstDequeueTime.Sub(m.EnqueueTime); d < 0 || d > time.Hour {
						bad++
						example = m
					}
					hs = append(hs, m.Handle)
				}
				mu.Unlock()
				if len(hs) > 0 {
					q.Delete(hs, nil)
				}
			}
		}()
	}
	time.Sleep(2 * time.Second) // a bounded run: about 0.4 % of receives were wrong before
	close(stop)
	wg.Wait()
	t.Logf("received %d, FirstDequeueTime out of order %d", total, bad)
	if bad > 0 {
		t.Errorf("%d of %d received messages have FirstDequeueTime - EnqueueTime outside [0, 1h]; e.g. Enqueue %v FirstDequeue %v NextVisible %v DequeueCount %d",
			bad, total, example.EnqueueTime, example.FirstDequeueTime, example.NextVisibleTime, example.DequeueCount)
	}
}

// Push retries (EXPONENTIAL_DECAY_RETRY: 1, 2, 4 ... s) of a failing endpoint
// after the wall clock stepped back 1 h: one retry after 1 s is expected.
func TestPushRetriesAfterAClockStepBack(t *testing.T) { pushRetryAfterStep(t, true) }

func pushRetryAfterStep(t *testing.T, stepFirst bool) {
	clk := newStepClock(t0)
	b, err := Open(Options{Clock: clk, Logger: testLogger(t), Push: pushOptions()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var hits atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		hits.Add(1)
		w.WriteHeader(500)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	if _, err := b.CreateTopic("t", DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Subscribe("t", "s", SubscriptionConfig{Endpoint: "http://" + ln.Addr().String() + "/", Strategy: ExponentialDecayRetry}); err != nil {
		t.Fatal(err)
	}
	if stepFirst {
		clk.Step(-time.Hour)
		if _, err := b.Publish("t", PublishInput{Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second) // no fake time passes: one attempt expected
		t.Logf("attempts in 2 s real, no fake time passing, after a publish 1 h back: %d; push stats %+v", hits.Load(), b.PushStats())
		if hits.Load() > 1 {
			t.Errorf("%d push attempts with no time passing (EXPONENTIAL_DECAY_RETRY: the first retry is 1 s after the first attempt)", hits.Load())
		}
		// And the retry is not lost either (late by the step at most, on
		// a clock that steps: a visibility offset that wrapped hid it for
		// 49.7 days).
		clk.Advance(time.Hour + 5*time.Second)
		for i := 0; i < 500 && hits.Load() < 2; i++ {
			time.Sleep(10 * time.Millisecond)
		}
		if hits.Load() < 2 {
			t.Errorf("no retry an hour and 5 s after the first attempt; push stats %+v", b.PushStats())
		}
		return
	}
	if _, err := b.Publish("t", PublishInput{Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 500 && hits.Load() == 0; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	t.Logf("attempts before the step: %d", hits.Load())
	before := hits.Load()
	clk.Step(-time.Hour)
	clk.Advance(1500 * time.Millisecond) // the first retry is due 1 s after the first attempt
	time.Sleep(2 * time.Second)
	got := hits.Load() - before
	t.Logf("attempts in the 1.5 s after a 1 h backward step: %d", got)
	if got > 1 {
		t.Errorf("%d push attempts within 1.5 s (and 2 s real) after the wall clock stepped back 1 h; EXPONENTIAL_DECAY_RETRY allows 1", got)
	}
}

// SystemClock's steady clock: it follows the monotonic clock from the
// wall time it took; a wall clock stepped back makes it run slow (never
// back) until it meets it again; a wall clock ahead by more than
// steadyAhead is taken at once, and by less is not a step.
func TestSteadyClockHoldsAgainstStepsBack(t *testing.T) {
	wall, mono := t0, time.Duration(0)
	c := &steadyClock{read: func() (time.Time, time.Duration) { return wall, mono }}
	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("first reading %v, want the wall time %v", got, t0)
	}
	tick := func(d time.Duration) { wall, mono = wall.Add(d), mono+d }
	tick(time.Second)
	if got := c.Now(); !got.Equal(t0.Add(time.Second)) {
		t.Fatalf("after a second: %v", got)
	}
	wall = wall.Add(steadyAhead / 2) // ahead, but not a step
	if got := c.Now(); !got.Equal(t0.Add(time.Second)) {
		t.Fatalf("a wall clock %v ahead is not a step: %v", steadyAhead/2, got)
	}
	wall = wall.Add(-steadyAhead / 2)
	wall = wall.Add(-time.Hour) // a step back
	at := c.Now()
	if !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("at a step back of an hour: %v, want %v (the step ignored)", at, t0.Add(time.Second))
	}
	tick(1000 * time.Second)
	if got, want := c.Now(), at.Add(999*time.Second); !got.Equal(want) {
		t.Fatalf("1,000 s after a step back: %v, want %v (slewing by 0.1 %%)", got, want)
	}
	wall = wall.Add(time.Hour) // a step forward past it: taken at once
	if got := c.Now(); !got.Equal(wall) {
		t.Fatalf("after a step forward: %v, want the wall time %v", got, wall)
	}
	tick(time.Second)
	if got := c.Now(); !got.Equal(wall) {
		t.Fatalf("a second after the step forward: %v, want %v", got, wall)
	}
}

// A long poll never waits longer than asked on a clock that steps back,
// by less than the wait too: it waited the step on top (up to twice the
// wait; found in review).
func TestClockStepBackShorterThanTheWait(t *testing.T) { pollAcrossAStepBack(t, 0) }

// The same with one wake-up that takes nothing (a message another receive
// took first) after the step: it waited 30 s for a 20 s poll before the
// timer was armed once for the whole wait (review).
func TestClockStepBackThenAWakeUp(t *testing.T) { pollAcrossAStepBack(t, 10) }

// pollAcrossAStepBack runs a 20 s long poll across a 15 s step back, woken
// with nothing to take wakeAt seconds in (0: never), and checks that it
// ends after about 20 s of the clock's timers.
func pollAcrossAStepBack(t *testing.T, wakeAt int) {
	clk := newStepClock(t0)
	b := openStep(t, "", clk)
	defer b.Close()
	q := mustQueue(t, b, "q", DefaultQueueConfig())
	done := make(chan error, 1)
	go func() {
		_, err := q.Receive(context.Background(), ReceiveOptions{Wait: 20 * time.Second, HasWait: true}, nil)
		done <- err
	}()
	for i := 0; i < 200 && q.waiters.waiting() == 0; i++ {
		time.Sleep(5 * time.Millisecond)
	}
	clk.Step(-15 * time.Second)
	for s := 1; s <= 40; s++ {
		clk.Advance(time.Second)
		time.Sleep(10 * time.Millisecond)
		if s == wakeAt {
			q.waiters.wake(-1) // woken, and nothing there
			time.Sleep(10 * time.Millisecond)
		}
		select {
		case err := <-done:
			t.Logf("returned after %d s of monotonic time: %v", s, err)
			if s > 21 {
				t.Errorf("a 20 s long poll waited %d s after a 15 s step back (woken at %d s)", s, wakeAt)
			}
			return
		default:
		}
	}
	t.Fatal("still waiting after 40 s")
}

// A host whose oscillator runs fast and whose time daemon steps the wall
// clock back now and then (ntpdate from cron, hypervisor tools: 0.5 s an
// hour here): the steady clock slews back to the wall clock after each
// step, so it stays within a step of it. It kept every step and drifted
// 84 s ahead in a week (found in review).
func TestSteadyClockCatchesUpWithStepsBack(t *testing.T) {
	wall, mono := t0, time.Duration(0)
	c := &steadyClock{read: func() (time.Time, time.Duration) { return wall, mono }}
	last := c.Now()
	for h := 0; h < 7*24; h++ {
		for m := 0; m < 60; m++ {
			d := time.Minute + time.Minute/7200 // runs 0.5 s an hour fast
			wall, mono = wall.Add(d), mono+d
			now := c.Now()
			if now.Before(last) {
				t.Fatalf("the steady clock went back from %v to %v", last, now)
			}
			last = now
		}
		wall = wall.Add(-500 * time.Millisecond) // the hourly correction
	}
	if d := c.Now().Sub(wall); d > time.Second || d < 0 {
		t.Errorf("after a week the steady clock is %v off the wall clock, want within the last step", d)
	}
}
