//go:build unix

package main

import "syscall"

// privateUmask sets the process umask to 077 and returns the previous one.
func privateUmask() (old int, ok bool) { return syscall.Umask(0o077), true }

// openFileLimit returns the process's open-file limit (soft; Go raises it
// to the hard one at start), or 0 where there is none to read.
func openFileLimit() uint64 {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) != nil {
		return 0
	}
	return l.Cur
}
