package main

import (
	"context"
	"time"
)

// trimWhenIdle returns memory to the operating system (release:
// Broker.ReleaseMemory) once traffic stops:
// after a burst (a preload, a drain) the heap holds garbage from index
// flushes and checkpoint folds that the collector would otherwise keep
// until the heap grows again. It trims every other tick for the first 30
// ticks of an idle period (the index may still be flushing and compacting
// at the first ones) and leaves busy periods alone; each trim is one forced
// collection of a heap made mostly of pointer-free metadata: milliseconds.
func trimWhenIdle(ctx context.Context, requests func() uint64, release func(), every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	last, idle := requests(), -1 // -1: no traffic since the last trims
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n := requests()
		if n != last {
			last, idle = n, 0
			continue
		}
		if idle < 0 {
			continue
		}
		idle++
		if idle%2 == 1 {
			release()
		}
		if idle >= 30 {
			idle = -1
		}
	}
}
