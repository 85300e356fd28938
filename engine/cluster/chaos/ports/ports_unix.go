//go:build unix

package ports

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// reserve takes the reservation of port for this process: an exclusive,
// non-blocking flock of its file, held on an open descriptor until the
// process exits. A lock belongs to one open file description, so another
// open of the same file fails to lock it in this process too.
func reserve(port int) bool {
	f, err := os.OpenFile(filepath.Join(reserveDir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return false
	}
	heldMu.Lock()
	held = append(held, f)
	heldMu.Unlock()
	return true
}
