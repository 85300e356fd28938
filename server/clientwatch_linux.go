package server

import "golang.org/x/sys/unix"

const canWatchPeer = true

// peersClosed reports, with one poll(2) and without reading anything,
// which of the connections fds have been closed by their peers (or have
// failed): clientwatch.go.
func peersClosed(fds []int) []bool {
	p := make([]unix.PollFd, len(fds))
	for i, fd := range fds {
		p[i] = unix.PollFd{Fd: int32(fd), Events: unix.POLLRDHUP}
	}
	out := make([]bool, len(fds))
	if n, err := unix.Poll(p, 0); err != nil || n == 0 {
		return out
	}
	for i := range p {
		out[i] = p[i].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0
	}
	return out
}
