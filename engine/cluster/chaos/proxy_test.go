package chaos

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// echoServer echoes every line back until the connection closes.
func echoServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn, r *bufio.Reader, line string, wait time.Duration) (string, error) {
	c.SetDeadline(time.Now().Add(wait))
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return "", err
	}
	s, err := r.ReadString('\n')
	return s, err
}

// The proxy passes bytes in order, under loss and delay; a cut swallows
// them without closing anything; lifting it closes the connections that
// lost bytes, and new connections pass again.
func TestProxyFaults(t *testing.T) {
	p, err := NewProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if s, err := roundTrip(c, r, "hello", 5*time.Second); err != nil || s != "hello\n" {
		t.Fatalf("%q %v", s, err)
	}

	p.Set(Faults{Loss: 0.5, Retransmit: 5 * time.Millisecond, Delay: time.Millisecond})
	for i := 0; i < 20; i++ {
		want := string(rune('a'+i)) + "-line"
		if s, err := roundTrip(c, r, want, 5*time.Second); err != nil || s != want+"\n" {
			t.Fatalf("under loss: %q %v", s, err)
		}
	}

	p.Set(Faults{Cut: true})
	if _, err := roundTrip(c, r, "lost", 200*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("through a cut: %v (want a silent drop)", err)
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := roundTrip(c2, bufio.NewReader(c2), "new", 200*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a new connection through a cut: %v", err)
	}

	p.Set(Faults{})
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.ReadString('\n'); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a connection that lost bytes was not closed when the cut was lifted: %v", err)
	}
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if s, err := roundTrip(c3, bufio.NewReader(c3), "again", 5*time.Second); err != nil || s != "again\n" {
		t.Fatalf("after healing: %q %v", s, err)
	}
}
