//go:build !unix

package wal

import "time"

// processCPU is not measured here.
func processCPU() (time.Duration, int64) { return 0, 0 }
