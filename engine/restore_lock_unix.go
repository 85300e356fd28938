//go:build unix

package engine

import (
	"errors"
	"os"
	"syscall"
)

// lockPath takes an exclusive flock(2) on the directory path, waiting
// for it if wait, else held reports that another has it; unlock releases it.
func lockPath(path string, wait bool) (unlock func(), held bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, err
	}
	how := syscall.LOCK_EX
	if !wait {
		how |= syscall.LOCK_NB
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, true, nil
		}
		return nil, false, err
	}
	return func() { f.Close() }, false, nil
}
