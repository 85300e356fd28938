package server

import (
	"syscall"

	"golang.org/x/sys/unix"
)

const canWatchPeer = true

// peerClosed reports whether the peer of rc has closed its side (or the
// connection failed), without reading anything (clientwatch.go).
func peerClosed(rc syscall.RawConn) bool {
	gone := false
	rc.Control(func(fd uintptr) {
		p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
		n, err := unix.Poll(p, 0)
		gone = err == nil && n > 0 && p[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0
	})
	return gone
}
