//go:build unix

package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDataDir takes an exclusive flock(2) on <dir>/LOCK for as long as the
// broker is open, so that a second broker (in this or another process) never
// touches the log or the index of a running one.
func lockDataDir(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("engine: open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is used by another broker", ErrLocked, dir)
		}
		return nil, fmt.Errorf("engine: lock %s: %w", dir, err)
	}
	return func() { f.Close() }, nil // closing releases the lock
}

// isMountPoint reports whether dir, an existing directory, is the root of
// a file system other than its parent's: a restore cannot rename a new
// directory onto it.
func isMountPoint(dir string) bool {
	var a, b syscall.Stat_t
	if syscall.Stat(dir, &a) != nil || syscall.Stat(filepath.Dir(dir), &b) != nil {
		return false
	}
	return a.Dev != b.Dev
}
