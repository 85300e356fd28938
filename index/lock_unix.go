//go:build unix

package index

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockDir takes an exclusive flock(2) on dir for the checks that run before
// Badger opens it, failing with ErrLocked if another Store (in this or
// another process) has dir open. Badger locks the directory the same way,
// but its error cannot be told apart from damage. The caller must call
// unlock before Badger opens dir: flock locks belong to the open file, so
// Badger's own lock would conflict with this one even in this process.
func lockDir(dir string) (unlock func(), err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("index: open %s: %w", dir, err)
	}
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrLocked, dir)
		}
		return nil, fmt.Errorf("index: lock %s: %w", dir, err)
	}
	return func() { f.Close() }, nil // closing releases the lock
}
