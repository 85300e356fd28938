//go:build !unix

package bench

import "time"

// selfCPU is not implemented here (no getrusage): the client's CPU is
// not reported.
func selfCPU() (time.Duration, error) { return 0, ErrUnsupported }
