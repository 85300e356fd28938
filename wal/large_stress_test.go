package wal

// Review W of the large append (wal invariant 12, 2026-12-07): large
// batches together with normal appenders, SkipTo, WaitDurable/WaitWritten
// callers, DeferWrites, a roll stall, a sticky failure and Close, in every
// sync mode. Every call must return (no lost wake-up), every large batch
// that succeeded must be back to back, and nothing may stay held
// (mu.large) after an error.

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestLargeBatchesWithEverythingElse(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncInterval, SyncNone} {
		for _, deferW := range []bool{false, true} {
			for _, end := range []string{"close", "fail", "stall"} {
				if deferW && mode != SyncAlways {
					continue // DeferWrites applies to SyncAlways only
				}
				t.Run(fmt.Sprintf("%v/defer=%v/%s", mode, deferW, end), func(t *testing.T) {
					largeStressRun(t, mode, deferW, end)
				})
			}
		}
	}
}

func largeStressRun(t *testing.T, mode SyncMode, deferW bool, end string) {
	ffs := NewFaultFS(NewMemFS())
	if end == "stall" {
		ffs.Filter = func(name string) bool { return strings.HasSuffix(filepath.Base(name), spareSuffix) }
	}
	opts := testOptions(t, ffs)
	opts.Sync, opts.DeferWrites = mode, deferW
	opts.SyncInterval = time.Millisecond
	l := mustOpen(t, crashDir, opts)
	closed := false
	defer func() {
		if !closed {
			l.Close()
		}
	}()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []string
	note := func(s string) { mu.Lock(); bad = append(bad, s); mu.Unlock() }
	var largeOK, largeFailed, largeFailedMid atomic.Int64
	// Two large appenders.
	for g := range 2 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				recs := make([]Record, 100+g*50)
				for j := range recs {
					recs[j] = Record{Type: 2, Body: testPayload(uint64(g<<40|i<<20|j), 3000+j%7*100, false), Live: true}
				}
				e0 := l.End()
				if err := l.Append(recs); err != nil {
					largeFailed.Add(1)
					if l.End() > e0 {
						largeFailedMid.Add(1) // a prefix (or others' records) went in meanwhile
					}
					for j := range recs {
						if recs[j].Pos != 0 || recs[j].Size != 0 {
							note("a failed large batch keeps positions")
						}
					}
					if end == "stall" && errors.Is(err, ErrSpareFailed) {
						continue
					}
					return
				}
				largeOK.Add(1)
				for j := 1; j < len(recs); j++ {
					if recs[j].Pos != recs[j-1].Pos+Pos(recs[j-1].Size) {
						note(fmt.Sprintf("large batch not contiguous at record %d", j))
						break
					}
				}
				if i%3 == 0 {
					if err := l.WaitDurable(recs[len(recs)-1].Pos); err != nil && !errors.Is(err, ErrSpareFailed) && !errors.Is(err, ErrFailed) && !errors.Is(err, ErrClosed) {
						note("WaitDurable: " + err.Error())
					}
				}
			}
		})
	}
	// Four small appenders, some waiting.
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				recs := []Record{{Type: 1, Body: testPayload(uint64(1<<50|g<<30|i), 50+i%300, false)}}
				if err := l.Append(recs); err != nil {
					if end == "stall" && errors.Is(err, ErrSpareFailed) {
						time.Sleep(time.Millisecond)
						continue
					}
					return
				}
				switch i % 4 {
				case 1:
					_ = l.WaitDurable(recs[0].Pos)
				case 2:
					_ = l.WaitWritten(recs[0].Pos)
				}
			}
		})
	}
	// SkipTo now and then.
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			if _, err := l.SkipTo(l.End() + 100); err != nil && !errors.Is(err, ErrSpareFailed) {
				return
			}
		}
	})
	// Ring readers.
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if e := l.End(); e > 4096 {
				_, _, _ = l.ReadAt((e-4096)&^3, 0, nil) // any answer, no hang, no race
			}
		}
	})

	waitUntil(t, 20*time.Second, "some large batches", func() bool { return l.End() > 8<<20 })
	switch end {
	case "stall":
		ffs.FailPreallocate(syscall.ENOSPC)
		waitUntil(t, 20*time.Second, "a stall", func() bool { return l.Stalled() != nil })
		time.Sleep(50 * time.Millisecond) // let appenders meet it
		ffs.Disarm()
		waitUntil(t, 30*time.Second, "the stall to end", func() bool { return l.Stalled() == nil })
		e := l.End()
		waitUntil(t, 30*time.Second, "appends after the stall", func() bool { return l.End() > e+(4<<20) })
		close(stop)
	case "fail":
		ffs.FailNthWrite(1, syscall.EIO)
		waitUntil(t, 20*time.Second, "the sticky failure", func() bool { return l.Health() != nil })
		close(stop)
	case "close":
		close(stop)
		closed = true
		go l.Close()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("appenders still blocked a minute after the end: a lost wake-up")
	}
	t.Logf("large batches: %d appended, %d failed (%d after the log grew during the call)", largeOK.Load(), largeFailed.Load(), largeFailedMid.Load())
	if len(bad) > 0 {
		t.Fatalf("%d problems, first: %s", len(bad), bad[0])
	}
	if end != "close" {
		l.mu.Lock()
		large := l.mu.large
		l.mu.Unlock()
		if large {
			t.Fatal("mu.large still set after every appender returned")
		}
	}
}
