//go:build !unix

package main

// privateUmask does nothing where there is no umask.
func privateUmask() (old int, ok bool) { return 0, false }
