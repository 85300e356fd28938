//go:build unix

package main

import "syscall"

// privateUmask sets the process umask to 077 and returns the previous one.
func privateUmask() (old int, ok bool) { return syscall.Umask(0o077), true }
