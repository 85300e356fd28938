//go:build unix

package cluster

import (
	"crypto/tls"
	"errors"
	"net"
	"syscall"
)

// alive tells whether an idle connection is still open. The other end
// closes its side when it goes away (a restart, a kill), and a peek then
// sees the end of the stream at once; an open, idle connection has nothing
// to read. One recv(2) with MSG_PEEK|MSG_DONTWAIT, which neither consumes
// data nor waits. (A read under a deadline in the past cannot tell: Go
// returns the timeout before it reads.)
func alive(c net.Conn) bool {
	if tc, ok := c.(*tls.Conn); ok {
		// A TLS peer's close sends an alert first: bytes unasked, out of
		// step; nothing else arrives on an idle connection (no session
		// tickets, Config.TLS).
		c = tc.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	err = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case errors.Is(rerr, syscall.EAGAIN), errors.Is(rerr, syscall.EINTR):
			open = true // nothing to read: open and idle
		case rerr == nil && n > 0:
			open = false // the other end sent something unasked: out of step
		default:
			open = false // n == 0: closed by the other end; or an error
		}
		return true // never wait for readiness
	})
	return err == nil && open
}
