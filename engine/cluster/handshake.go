package cluster

// The handshake that opens every connection between nodes (the protocol
// is in transport.go's file comment), and the bounds on connections that
// have not finished it.

import (
	"cmp"
	"container/list"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// maxHandshakes bounds the connections accepted and not yet
// authenticated: each holds a descriptor and a goroutine for up to 5 s, so
// a process without the key held as many as it opened (security audit,
// 2026-12-06: 3,000 idle connections, 3,000 descriptors, a Warn line each).
// One more closes the oldest of them, not itself: closing the newcomer let
// 1,024 silent connections shut every member out (review, 2026-12-06),
// while a member's handshake, well under a millisecond, outlives any
// flood short of maxHandshakes new connections in that time. Above the
// 2,048 forward connections a node may open to a leader, so a burst of
// them after a failover fits.
const maxHandshakes = 4096

var errTooManyHandshakes = fmt.Errorf("closed: more connections in their handshake than %d", maxHandshakes)

// pendingConn is an accepted connection in its handshake (handshakeBegins).
type pendingConn struct {
	c       net.Conn
	evicted bool // guarded by pendMu: closed to make room
}

// handshakeBegins counts c among the connections in their handshake,
// closing the oldest one when there are maxHandshakes already.
func (t *transport) handshakeBegins(c net.Conn) *list.Element {
	t.pendMu.Lock()
	defer t.pendMu.Unlock()
	if t.pending == nil {
		t.pending = list.New()
	}
	if t.pending.Len() >= cmp.Or(int(t.handshakeCap.Load()), maxHandshakes) {
		old := t.pending.Remove(t.pending.Front()).(*pendingConn)
		old.evicted = true
		old.c.Close()
	}
	return t.pending.PushBack(&pendingConn{c: c})
}

// handshakeEnds takes h out of the connections in their handshake and
// reports whether it was closed to make room.
func (t *transport) handshakeEnds(h *list.Element) (evicted bool) {
	t.pendMu.Lock()
	defer t.pendMu.Unlock()
	p := h.Value.(*pendingConn)
	if !p.evicted {
		t.pending.Remove(h)
	}
	return p.evicted
}

// refusedLogBurst: refusals logged in a second; the rest are counted and
// their number is logged with the next line (a flood of refusals would
// otherwise flood the log).
const refusedLogBurst = 20

// refusedConn counts a refused connection and logs it (refusedLogBurst).
func (t *transport) refusedConn(remote string, err error) {
	if t.refused != nil {
		t.refused()
	}
	t.refusedMu.Lock()
	now := time.Now()
	if now.Sub(t.refusedAt) >= time.Second {
		t.refusedAt, t.refusedLogged = now, 0
	}
	if t.refusedLogged >= refusedLogBurst {
		t.refusedQuiet++
		t.refusedMu.Unlock()
		return
	}
	t.refusedLogged++
	quiet := t.refusedQuiet
	t.refusedQuiet = 0
	t.refusedMu.Unlock()
	if quiet > 0 {
		t.log.Warn("raft connection refused", "remote", remote, "err", err, "refusals_not_logged_before", quiet)
		return
	}
	t.log.Warn("raft connection refused", "remote", remote, "err", err)
}

func writeAddr(w io.Writer, s string) error {
	var l [2]byte
	binary.LittleEndian.PutUint16(l[:], uint16(len(s)))
	if _, err := w.Write(l[:]); err != nil {
		return err
	}
	_, err := io.WriteString(w, s)
	return err
}

func readAddr(r io.Reader) (string, error) {
	var l [2]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return "", err
	}
	n := binary.LittleEndian.Uint16(l[:])
	if n > 512 {
		return "", fmt.Errorf("address of %d bytes", n)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return string(b), err
}

// refusal reports whether err, from dial, means that the peer and this
// node refused each other (the cluster key, a certificate, a peer not
// speaking TLS, another node than the one dialled), as opposed to a peer
// that is down or unreachable.
func refusal(err error) bool {
	var cv *tls.CertificateVerificationError
	var rh tls.RecordHeaderError
	return errors.Is(err, ErrAuth) || errors.Is(err, errWrongPeer) || errors.As(err, &cv) || errors.As(err, &rh) || remoteAlert(err)
}

// remoteAlert reports whether err is a TLS alert the peer sent: the peer
// refused this node's certificate (or its lack of one).
func remoteAlert(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "remote error"
}

// explainRefusal says, for a TLS alert from the peer, which side refused
// what: "remote error: tls: bad certificate" read as if this node had
// refused someone.
func explainRefusal(err error) error {
	if remoteAlert(err) {
		return fmt.Errorf("the peer refused this node's certificate (check it against the peer's --cluster-tls-ca, its dates and its SAN): %w", err)
	}
	return err
}

// errNoClusterTLS: an accepted connection opened with a TLS handshake
// at a node without cluster TLS: the key was never tried.
var errNoClusterTLS = errors.New("cluster: the peer speaks TLS and this node has no cluster TLS (--cluster-tls-cert, --cluster-tls-key, --cluster-tls-ca)")

// errWrongPeer: the node reached at an address is not the one dialled;
// this node did not prove itself to it.
var errWrongPeer = errors.New("cluster: the node reached is not the one dialled")

// dial connects to addr and runs the initiator's side of the handshake
// with node want: it proves this node only to node want (see the file
// comment). It returns the acceptor's id, also with errWrongPeer.
func (t *transport) dial(addr string, kind byte, want uint64) (net.Conn, uint64, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return nil, 0, err
	}
	hs := 5 * time.Second
	if kind == kindForward {
		hs = fwdHandshake
	}
	c.SetDeadline(time.Now().Add(hs))
	if t.tls != nil {
		cfg := t.tls
		if cfg.ServerName == "" {
			cfg = cfg.Clone()
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(c, cfg)
		if err := tc.Handshake(); err != nil {
			c.Close()
			return nil, 0, fmt.Errorf("cluster: TLS handshake with %s: %w", addr, err)
		}
		c = tc
	}
	ni := make([]byte, 16)
	rand.Read(ni)
	hello := append([]byte(handshakeMagic), kind)
	hello = binary.LittleEndian.AppendUint64(hello, t.self)
	hello = append(hello, ni...)
	_, err = c.Write(hello)
	if err == nil {
		err = writeAddr(c, t.apiAddr)
	}
	if err != nil {
		c.Close()
		return nil, 0, err
	}
	var resp [16 + 8 + 32]byte
	if _, err := io.ReadFull(c, resp[:]); err != nil {
		c.Close()
		return nil, 0, fmt.Errorf("cluster: handshake with %s: %w", addr, err)
	}
	na, id := resp[:16], binary.LittleEndian.Uint64(resp[16:24])
	ok, accepted := t.verifyMAC(resp[24:], 'A', ni, na, t.self, id)
	if !ok {
		c.Close()
		return nil, 0, ErrAuth
	}
	if id != want {
		c.Close()
		return nil, id, fmt.Errorf("%w: node %d answered at %s, not node %d", errWrongPeer, id, addr, want)
	}
	if accepted {
		t.log.Info("peer proved an accepted cluster key, not this node's", "peer", id)
	}
	api, err := readAddr(c)
	if err == nil {
		_, err = c.Write(t.mac('I', na, ni, t.self, id))
	}
	if err != nil {
		c.Close()
		return nil, 0, err
	}
	c.SetDeadline(time.Time{})
	t.mu.Lock()
	t.apis[id] = api
	t.mu.Unlock()
	return c, id, nil
}

// handshake runs an accepted connection's TLS session, if any, and the
// acceptor's side of the handshake, within 5 s; it returns the connection
// to use.
func (t *transport) handshake(c net.Conn) (kind byte, from uint64, _ net.Conn, err error) {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if t.tls != nil {
		hb := NewHandshakeBudget(c)
		tc := tls.Server(hb, t.tls)
		err := tc.Handshake()
		hb.Done()
		if err != nil {
			var rh tls.RecordHeaderError
			if errors.As(err, &rh) {
				// Not TLS at all: most likely a node started without
				// --cluster-tls-* (Go says only "first record does not
				// look like a TLS handshake").
				return 0, 0, c, fmt.Errorf("TLS: the peer does not speak TLS (a node without --cluster-tls-*?): %w", err)
			}
			return 0, 0, c, explainRefusal(fmt.Errorf("TLS: %w", err))
		}
		c = tc
	}
	if kind, from, err = t.accept(c); err != nil {
		return 0, 0, c, err
	}
	c.SetDeadline(time.Time{})
	return kind, from, c, nil
}

// accept runs the acceptor's side of the handshake.
func (t *transport) accept(c net.Conn) (kind byte, from uint64, err error) {
	var hello [len(handshakeMagic) + 1 + 8 + 16]byte
	if _, err := io.ReadFull(c, hello[:]); err != nil {
		return 0, 0, err
	}
	if string(hello[:len(handshakeMagic)]) != handshakeMagic {
		if hello[0] == 0x16 && hello[1] == 0x03 { // a TLS handshake record
			return 0, 0, errNoClusterTLS
		}
		return 0, 0, fmt.Errorf("%w: not a cluster peer", ErrAuth)
	}
	kind = hello[len(handshakeMagic)]
	from = binary.LittleEndian.Uint64(hello[len(handshakeMagic)+1:])
	ni := hello[len(handshakeMagic)+9:]
	if from == t.self {
		return 0, 0, fmt.Errorf("%w: a peer that claims this node's own id %d", ErrAuth, from)
	}
	api, err := readAddr(c)
	if err != nil {
		return 0, 0, err
	}
	na := make([]byte, 16)
	rand.Read(na)
	resp := append(na, make([]byte, 8)...)
	binary.LittleEndian.PutUint64(resp[16:], t.self)
	resp = append(resp, t.mac('A', ni, na, from, t.self)...)
	if _, err := c.Write(resp); err != nil {
		return 0, 0, err
	}
	if err := writeAddr(c, t.apiAddr); err != nil {
		return 0, 0, err
	}
	var mi [32]byte
	if _, err := io.ReadFull(c, mi[:]); err != nil {
		return 0, 0, fmt.Errorf("%w: %v", ErrAuth, err)
	}
	ok, accepted := t.verifyMAC(mi[:], 'I', na, ni, from, t.self)
	if !ok {
		return 0, 0, fmt.Errorf("%w: node %d", ErrAuth, from)
	}
	if accepted {
		t.log.Info("peer proved an accepted cluster key, not this node's", "peer", from)
	}
	if kind > kindMove {
		return 0, 0, fmt.Errorf("unknown connection kind %d", kind)
	}
	t.mu.Lock()
	t.apis[from] = api
	t.mu.Unlock()
	return kind, from, nil
}

// MaxTLSHandshakeBytes bounds what an accepted connection may send before
// its TLS handshake is done, on the raft port and the client API's. A
// node sends a ClientHello, its certificate chain and its Finished, a few
// KiB (an RSA chain of three: about 6); a client's ClientHello is a few
// hundred bytes to 2 KiB (with a post-quantum key share), and the bytes
// it sends right behind its Finished (its request) may be read with it.
// crypto/tls takes handshake messages of up to 64 KiB, and a connection
// holding an unfinished one held 115-125 KiB until its deadline: 500 MiB
// for maxHandshakes of them here, 1.8 GiB at the API's default
// --max-conns (TLS audit, 2026-12-07; TestClusterTLSHandshakeSizeIsBounded,
// server TestTLSHandshakeSizeIsBounded).
const MaxTLSHandshakeBytes = 16 << 10

// ErrTLSHandshakeTooLarge is a HandshakeBudget's read past its bound.
var ErrTLSHandshakeTooLarge = fmt.Errorf("more than %d bytes before the TLS handshake was done", MaxTLSHandshakeBytes)

// HandshakeBudget is the connection under a server-side tls.Conn: it
// fails a read past MaxTLSHandshakeBytes until Done. Only the goroutine
// that runs the handshake reads it until then.
type HandshakeBudget struct {
	net.Conn
	left int // bytes the handshake may still read; -1 once it is done
}

// NewHandshakeBudget wraps c for its TLS handshake.
func NewHandshakeBudget(c net.Conn) *HandshakeBudget {
	return &HandshakeBudget{Conn: c, left: MaxTLSHandshakeBytes}
}

// Done lifts the bound: the handshake is over.
func (b *HandshakeBudget) Done() { b.left = -1 }

func (b *HandshakeBudget) Read(p []byte) (int, error) {
	if b.left < 0 {
		return b.Conn.Read(p)
	}
	if b.left == 0 {
		return 0, ErrTLSHandshakeTooLarge
	}
	if len(p) > b.left {
		p = p[:b.left]
	}
	n, err := b.Conn.Read(p)
	b.left -= n
	return n, err
}
