//go:build unix

package wal

import (
	"syscall"
	"time"
)

// processCPU is this process's user+system CPU time so far and its
// voluntary context switches (a thread blocking: a futex wait, a
// blocking syscall).
func processCPU() (time.Duration, int64) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), int64(ru.Nvcsw)
}
