package cluster

// FuzzReadFrame: readFrame (a forward frame from a peer) and readAddr (an
// address of a handshake or membership request) never panic on any bytes,
// however the reads cut them; what readFrame accepts is exactly the
// payload of the one frame sent, after what dst held, and what it refuses
// leaves dst's bytes as they were.

import (
	"bytes"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"testing"
)

// cutConn reads its bytes in pieces: each read gives at most the next
// cut's length (1 to 256 bytes; the last cut repeats).
type cutConn struct {
	net.Conn
	b    []byte
	cuts []byte
}

func (c *cutConn) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := len(c.b)
	if len(c.cuts) > 0 {
		n = min(n, int(c.cuts[0])+1)
		if len(c.cuts) > 1 {
			c.cuts = c.cuts[1:]
		}
	}
	n = copy(p, c.b[:n])
	c.b = c.b[n:]
	return n, nil
}

func FuzzReadFrame(f *testing.F) {
	f.Add(frame([]byte("hello")), []byte{1, 2}, false)
	f.Add(frame(bytes.Repeat([]byte("0123456789abcdef"), 300)), []byte{255}, false)
	f.Add(frame(nil), []byte(nil), false)
	f.Add(binary.LittleEndian.AppendUint32(nil, maxForwardBytes+1), []byte(nil), false)
	f.Add(append(frame([]byte("hi")), 'x'), []byte(nil), false)
	f.Add(frame([]byte("hello"))[:6], []byte(nil), false)
	f.Add(append([]byte{9, 0}, "127.0.0.1"...), []byte{3}, true)
	f.Add([]byte{0xff, 0xff}, []byte(nil), true)
	f.Fuzz(func(t *testing.T, in, cuts []byte, addr bool) {
		c := &cutConn{b: in, cuts: cuts}
		if addr {
			s, err := readAddr(c)
			if err == nil {
				var w bytes.Buffer
				writeAddr(&w, s)
				if !bytes.Equal(w.Bytes(), in[:w.Len()]) {
					t.Fatalf("address %x read as %q", in, s)
				}
			}
			return
		}
		kept := []byte("kept:")
		got, size, err := readFrame(c, kept)
		if !bytes.HasPrefix(got, kept) {
			t.Fatalf("dst %q became %q (err %v)", kept, got, err)
		}
		if err != nil {
			if size != 0 {
				t.Fatalf("error %v with a size of %d", err, size)
			}
			return
		}
		if len(in) < 4 {
			t.Fatalf("%x: a frame from %d bytes", in, len(in))
		}
		n := int(binary.LittleEndian.Uint32(in))
		if size != n || n == 0 || n > maxForwardBytes || !bytes.Equal(got[len(kept):], in[4:4+n]) || len(got) != len(kept)+n {
			t.Fatalf("%x: read %d bytes %x, want the %d of the frame", in, size, got[len(kept):], n)
		}
		if rest := len(in) - 4 - n; rest > 0 && len(c.b) != rest {
			t.Fatalf("%x: %d bytes past the frame, %d left unread", in, rest, len(c.b))
		}
	})
}

// sinkConn is a cutConn whose writes go nowhere.
type sinkConn struct{ cutConn }

func (c *sinkConn) Write(p []byte) (int, error) { return len(p), nil }

// FuzzAccept: the acceptor's side of the handshake (handshake.go), which
// reads what anyone who reaches the raft port sends before the peer has
// proved the cluster key, never panics and never accepts bytes that prove
// nothing (the nonces are fresh, so no input holds a valid MAC); the
// peer's API address is kept only for an accepted peer.
func FuzzAccept(f *testing.F) {
	hello := func(kind byte, from uint64, addr string, rest []byte) []byte {
		b := append([]byte(handshakeMagic), kind)
		b = binary.LittleEndian.AppendUint64(b, from)
		b = append(b, make([]byte, 16)...)
		b = binary.LittleEndian.AppendUint16(b, uint16(len(addr)))
		return append(append(b, addr...), rest...)
	}
	f.Add(hello(kindMember, 2, "127.0.0.1:1", make([]byte, 32)), []byte(nil))
	f.Add(hello(kindMove+1, 2, "", make([]byte, 32)), []byte{0, 3})
	f.Add(hello(0, 1, "x", nil), []byte(nil))
	f.Add([]byte{0x16, 0x03, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, []byte(nil))
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	f.Fuzz(func(t *testing.T, in, cuts []byte) {
		tr := newTransport(1, []byte("0123456789abcdef0123456789abcdef"), "127.0.0.1:2", nil, quiet)
		kind, from, err := tr.accept(&sinkConn{cutConn{b: in, cuts: cuts}})
		if err == nil {
			t.Fatalf("%x: accepted (kind %d from %d) without the cluster key", in, kind, from)
		}
		if len(tr.apis) != 0 {
			t.Fatalf("%x: refused (%v), yet the API address of %v kept", in, err, tr.apis)
		}
	})
}
