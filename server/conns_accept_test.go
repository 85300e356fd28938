package server

import (
	"errors"
	"log/slog"
	"net"
	"os"
	"syscall"
	"testing"
)

// failingListener fails its first fails Accepts with err, then accepts
// one end of a pipe.
type failingListener struct {
	net.Listener
	fails int
	err   error
}

func (l *failingListener) Accept() (net.Conn, error) {
	if l.fails > 0 {
		l.fails--
		return nil, l.err
	}
	c, _ := net.Pipe()
	return c, nil
}

func (l *failingListener) Close() error { return nil }

// An Accept that fails for want of a file descriptor is tried again: the
// listener still works once one is free. fasthttp ends its Serve on any
// error but a timeout, and smqd then stopped: 1,100 connections under an
// open-file limit of 1,024 shut the process down (scale audit,
// 2026-12-06). Any other error still ends it, and gives its slot back.
func TestAcceptOutOfDescriptorsIsTriedAgain(t *testing.T) {
	s := &Server{log: slog.New(slog.DiscardHandler)}
	cs := newConnSlots(4)
	emfile := &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	l := s.limit(&failingListener{fails: 3, err: emfile}, cs)
	c, err := l.Accept()
	if err != nil {
		t.Fatalf("Accept after 3 EMFILE: %v", err)
	}
	if got := cs.acceptFails.Load(); got != 3 {
		t.Fatalf("%d failures tried again, want 3", got)
	}
	if cs.open() != 1 {
		t.Fatalf("%d slots held, want 1", cs.open())
	}
	c.Close()

	other := errors.New("listener closed for good")
	l = s.limit(&failingListener{fails: 1, err: other}, cs)
	if _, err := l.Accept(); !errors.Is(err, other) {
		t.Fatalf("Accept: %v, want the listener's own error", err)
	}
	if cs.open() != 0 {
		t.Fatalf("%d slots held after a failed Accept, want 0", cs.open())
	}
}
