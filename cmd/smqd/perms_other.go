//go:build !unix

package main

// privateUmask does nothing where there is no umask.
func privateUmask() (old int, ok bool) { return 0, false }

// openFileLimit: no limit to read here.
func openFileLimit() uint64 { return 0 }
