//go:build unix

package bench

import (
	"syscall"
	"time"
)

// selfCPU returns the user plus system CPU time of this process so far
// (getrusage RUSAGE_SELF: every thread, including the Go runtime's).
func selfCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
