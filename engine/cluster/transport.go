package cluster

// The transport between the nodes of a cluster: one TCP connection per
// ordered pair of nodes carrying every shard's Raft messages in batches,
// and short-lived connections that stream a shard's state to a follower
// that needs a snapshot.
//
// Authentication. A connection begins with a handshake that proves to both
// ends that the other holds the cluster key, without sending it:
//
//	initiator → acceptor  "SMQR1" | kind u8 | initiator id u64 | nonce_i [16] | api address (u16 length, bytes)
//	acceptor → initiator  nonce_a [16] | acceptor id u64 | HMAC-SHA256(key, "A"|nonce_i|nonce_a|ids) [32] | api address
//	initiator → acceptor  HMAC-SHA256(key, "I"|nonce_a|nonce_i|ids) [32]
//
// Either end closes the connection (and logs it) when the other's MAC is
// wrong: a process without the key cannot vote, append, join or fetch a
// snapshot; nothing it sends is read past the handshake. The handshake
// also tells each node the other's client API address (for forwarding).
//
// The initiator always means to reach one node, and sends its proof only
// once the acceptor proved that it is that node (dial's want). The MACs do
// not bind the connection to the socket it runs on, so whoever a node
// dials could otherwise pass the node's proof on: open a connection of its
// own to another member in the dialling node's name, hand the member's
// answer back for the node to check, and the node's proof over. A process
// without the key did exactly that, made node 1 dial it as a new member's
// probe (AddMember), and read a shard's messages from node 2 and stored
// messages with a dead-letter move (security audit, 2026-12-06;
// TestClusterHandshakeCannotBeRelayed). An acceptor likewise refuses an
// initiator that claims its own id. Against an attacker on the path
// between two members (who can pass the whole handshake between the very
// two nodes it was meant for, then write into the connection), only TLS
// helps: see docs/operations.md, "What to protect in a cluster".
//
// TLS (Config.TLS). When set, a connection is a mutual TLS session (1.3,
// both certificates verified) before the first byte of the handshake
// above, which runs inside it unchanged: the key and the certificates
// must both be right, and everything after is encrypted.
//
// Snapshots (kind 1): the member sends the shard and the index of the
// snapshot it installs; the acceptor acknowledges the index and streams
// the shard's state (fetchSnapshot).
//
// Frames (kind 0): length u32 | shard u16 | a marshalled raftpb.Message;
// frames are marshalled straight into the peer's queue, chunks of up to
// chunkBytes filled back to back (a larger frame gets a chunk of its own),
// and a writer sends all queued chunks in one write (writev); written
// chunks go back to the peer's free list, so a frame costs no allocation
// and no chunk is ever copied to grow, whatever the queue holds (a
// catch-up queues megabytes). The reader reuses one buffer per connection
// (Unmarshal copies what it keeps). A lost connection drops
// the queued frames (Raft retransmits) and tells the node, which treats a
// leader it can no longer reach as gone at once (node.go: fast failover).
//
// Owner: each peer's writer goroutine owns its connection; each accepted
// connection's reader goroutine owns it; mu guards the peer and address
// tables.

import (
	"bufio"
	"container/list"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

const (
	handshakeMagic = "SMQR1"
	kindRaft       = 0
	kindSnapshot   = 1
	kindRejoin     = 2         // "I lost my data; replace me" (node.go)
	maxFrame       = 256 << 20 // a batch of entries is at most MaxSizePerMsg; snapshots go apart
	maxQueued      = 64 << 20  // bytes queued for one peer before frames are dropped
)

// ErrAuth is the error of a handshake with a process that does not hold
// the cluster key.
var ErrAuth = errors.New("cluster: peer failed authentication (wrong or missing cluster key)")

type transport struct {
	self       uint64
	key        []byte
	acceptKeys [][]byte // other keys taken from peers (keys.go); set before start
	apiAddr    string
	log        *slog.Logger
	ln         net.Listener
	tls        *tls.Config // mutual TLS on every connection (Config.TLS), or nil

	deliver   func(shard int, m *pb.Message)           // a message for a shard
	peerDown  func(peer uint64)                        // a connection to or from peer ended
	serveSnap func(req snapRequest, w io.Writer) error // stream a shard's state
	acked     func(from uint64, shards int) []uint64   // what a member that may have lost its data acknowledged here (rejoin.go)
	rejoin    func(from uint64, lost int) byte         // such a member found it lost data: replace it (rejoin.go: rejoin*)
	flags     func(from uint64, shards int) []byte     // per shard, rejoinHistory and rejoinVoter (votehold.go)
	refused   func()                                   // a handshake failed (metrics)
	forward   func(from uint64, c net.Conn)            // serve a forward connection (forward.go)
	member    func(from uint64, c net.Conn)            // serve a membership request (members.go)
	move      func(from uint64, c net.Conn)            // serve a dead-letter move (deadletter.go)

	pendMu       sync.Mutex
	pending      *list.List   // guarded by pendMu: *pendingConn in their handshake, oldest first (maxHandshakes)
	handshakeCap atomic.Int32 // tests: maxHandshakes when 0

	refusedMu     sync.Mutex
	refusedAt     time.Time // guarded by refusedMu: the start of this second of refusals
	refusedLogged int       // guarded by refusedMu: refusals logged in it
	refusedQuiet  int       // guarded by refusedMu: refusals not logged since the last one logged

	mu    sync.Mutex
	peers map[uint64]*peer  // guarded by mu
	apis  map[uint64]string // guarded by mu: API addresses learned in handshakes
	conns map[net.Conn]bool // guarded by mu: accepted connections, closed on close
	done  bool              // guarded by mu

	stop chan struct{}
	wg   sync.WaitGroup
}

type peer struct {
	id      uint64
	addr    string    // guarded by mu once the writer runs (movePeer)
	failing time.Time // guarded by mu: since when every dial failed (zero: the last one worked)
	mu      sync.Mutex
	q       [][]byte // guarded by mu: chunks of frames to send; the last one is filled next
	qlen    int      // guarded by mu: bytes in q
	free    [][]byte // guarded by mu: written chunks of chunkBytes, for reuse
	kick    chan struct{}
}

const (
	chunkBytes = 256 << 10 // a chunk of a peer's queue
	maxFree    = 8         // chunks a peer keeps for reuse
	// maxKeptBuffer bounds the buffer a reader keeps for the next frame
	// (a catch-up's big frames are not held on to).
	maxKeptBuffer = 4 << 20
)

func newTransport(self uint64, key []byte, apiAddr string, ln net.Listener, log *slog.Logger) *transport {
	return &transport{self: self, key: key, apiAddr: apiAddr, ln: ln, log: log,
		peers: map[uint64]*peer{}, apis: map[uint64]string{}, conns: map[net.Conn]bool{}, stop: make(chan struct{})}
}

// start accepts connections until close.
func (t *transport) start() {
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		for {
			c, err := t.ln.Accept()
			if err != nil {
				select {
				case <-t.stop:
					return
				default:
				}
				t.log.Warn("raft transport accept", "err", err)
				time.Sleep(10 * time.Millisecond)
				continue
			}
			t.mu.Lock()
			if t.done {
				t.mu.Unlock()
				c.Close()
				return
			}
			t.conns[c] = true
			t.mu.Unlock()
			h := t.handshakeBegins(c)
			t.wg.Add(1)
			go func() {
				defer t.wg.Done()
				t.serveConn(c, h)
				t.mu.Lock()
				delete(t.conns, c)
				t.mu.Unlock()
			}()
		}
	}()
}

// addPeer makes sure there is a writer to peer id at addr.
func (t *transport) addPeer(id uint64, addr string) {
	if id == t.self {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.peers[id]; p != nil || t.done {
		// A known peer keeps the address this node has for it (its flags
		// or address book): another member's view of it, carried in a
		// configuration change, may be a route only that member uses.
		return
	}
	p := &peer{id: id, addr: addr, kick: make(chan struct{}, 1)}
	t.peers[id] = p
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		t.writeLoop(p)
	}()
}

// removePeer forgets a peer (it left the cluster).
func (t *transport) removePeer(id uint64) {
	t.mu.Lock()
	p := t.peers[id]
	delete(t.peers, id)
	t.mu.Unlock()
	if p != nil {
		p.mu.Lock()
		p.q, p.qlen, p.free = nil, 0, nil
		p.addr = ""
		p.mu.Unlock()
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
}

// apiAddr returns the client API address of node id, if known.
func (t *transport) peerAPI(id uint64) (string, bool) {
	if id == t.self {
		return t.apiAddr, true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	a, ok := t.apis[id]
	return a, ok
}

// testHookDrop, when set (tests), drops every Raft message it reports
// true for, as a cut link would (the connections stay up).
var testHookDrop atomic.Pointer[func(m *pb.Message) bool]

// send queues messages of shard for their destinations.
func (t *transport) send(shard int, msgs []*pb.Message) {
	for _, m := range msgs {
		if h := testHookDrop.Load(); h != nil && (*h)(m) {
			continue
		}
		t.mu.Lock()
		p := t.peers[m.GetTo()]
		t.mu.Unlock()
		if p == nil {
			continue
		}
		// Marshalled straight into the queue's last chunk, which has room
		// for it (no lock is held across I/O: the writer holds p.mu only
		// to take the chunks and to give written ones back).
		size := proto.Size(m)
		need := 6 + size
		p.mu.Lock()
		if p.qlen+need > maxQueued {
			p.mu.Unlock()
			continue // Raft resends what is lost
		}
		n := len(p.q)
		if n == 0 || cap(p.q[n-1])-len(p.q[n-1]) < need {
			var c []byte
			switch k := len(p.free); {
			case need > chunkBytes:
				c = make([]byte, 0, need)
			case k > 0:
				c, p.free = p.free[k-1], p.free[:k-1]
			default:
				c = make([]byte, 0, chunkBytes)
			}
			p.q = append(p.q, c)
			n++
		}
		c := p.q[n-1]
		start := len(c)
		c, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(append(c, 0, 0, 0, 0, 0, 0), m)
		if err != nil {
			p.mu.Unlock()
			t.log.Error("marshal raft message", "err", err)
			continue
		}
		binary.LittleEndian.PutUint32(c[start:], uint32(len(c)-start-4))
		binary.LittleEndian.PutUint16(c[start+4:], uint16(shard))
		p.q[n-1] = c
		p.qlen += len(c) - start
		p.mu.Unlock()
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
}

// writeLoop keeps a connection to p and writes its queued frames.
func (t *transport) writeLoop(p *peer) {
	backoff := 20 * time.Millisecond
	var warned time.Time // the last refusal logged, and what it said
	var warnedErr string
	for {
		select {
		case <-t.stop:
			return
		default:
		}
		p.mu.Lock()
		addr := p.addr
		p.mu.Unlock()
		if addr == "" {
			return // removed
		}
		c, _, err := t.dial(addr, kindRaft, p.id)
		p.mu.Lock()
		switch {
		case err == nil:
			p.failing = time.Time{}
		case p.failing.IsZero():
			p.failing = time.Now()
		}
		p.mu.Unlock()
		if err != nil {
			// A refusal (key or certificate, either side) is for the
			// operator to fix: logged (again when it changes, else every
			// 30 s) and counted. A peer that is down is not.
			if refusal(err) {
				if t.refused != nil {
					t.refused()
				}
				if msg := err.Error(); msg != warnedErr || time.Since(warned) >= 30*time.Second {
					t.log.Warn("raft peer refused", "peer", p.id, "addr", addr, "err", explainRefusal(err))
					warned, warnedErr = time.Now(), msg
				}
			}
			select {
			case <-t.stop:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 20 * time.Millisecond
		err = t.writeFrames(p, c)
		c.Close()
		if err != nil {
			t.peerDown(p.id)
		}
	}
}

func (t *transport) writeFrames(p *peer, c net.Conn) error {
	var chunks, iov [][]byte
	// Notice the other end going away even while idle: a reader that sees
	// EOF ends the connection.
	closed := make(chan struct{})
	go func() {
		io.Copy(io.Discard, c)
		close(closed)
	}()
	for {
		select {
		case <-t.stop:
			return nil
		case <-closed:
			return io.EOF
		case <-p.kick:
		}
		p.mu.Lock()
		chunks = append(chunks[:0], p.q...)
		clear(p.q)
		p.q, p.qlen = p.q[:0], 0
		addr := p.addr
		p.mu.Unlock()
		if addr == "" {
			return nil
		}
		if len(chunks) > 0 {
			c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			iov = append(iov[:0], chunks...) // WriteTo consumes its slice
			bufs := net.Buffers(iov)
			if _, err := bufs.WriteTo(c); err != nil {
				return err
			}
		}
		p.mu.Lock()
		for _, ch := range chunks {
			if cap(ch) == chunkBytes && len(p.free) < maxFree {
				p.free = append(p.free, ch[:0])
			}
		}
		p.mu.Unlock()
		clear(chunks)
		clear(iov)
	}
}

// serveConn runs an accepted connection (h: its place among those in
// their handshake).
func (t *transport) serveConn(c net.Conn, h *list.Element) {
	defer c.Close()
	kind, from, c, err := t.handshake(c)
	if t.handshakeEnds(h) {
		err = errTooManyHandshakes
	}
	if err != nil {
		t.refusedConn(c.RemoteAddr().String(), err)
		return
	}
	switch kind {
	case kindForward:
		t.forward(from, c)
		return
	case kindMember:
		t.member(from, c)
		return
	case kindMove:
		t.move(from, c)
		return
	case kindRejoin:
		t.serveRejoin(from, c)
		return
	case kindSnapshot:
		// The shard with its flags, then, with snapAtBit, the index of
		// the snapshot the member installs (fetchState).
		var sh [4]byte
		if _, err := io.ReadFull(c, sh[:]); err != nil {
			return
		}
		req := snapRequest{shard: binary.LittleEndian.Uint32(sh[:])}
		if req.shard&snapFlags != 0 && (testHookEarlierSnapshots == nil || !testHookEarlierSnapshots()) {
			req.leading = req.shard&snapLeadBit != 0
			if req.shard&snapAtBit != 0 {
				var v [8]byte
				if _, err := io.ReadFull(c, v[:]); err != nil {
					return
				}
				req.at = binary.LittleEndian.Uint64(v[:])
			}
			req.shard &^= snapFlags
			if _, err := c.Write([]byte{snapAtAck}); err != nil {
				return
			}
		}
		w := bufio.NewWriterSize(idleConn{Conn: c, idle: snapshotWriteIdle}, 1<<20)
		if err := t.serveSnap(req, w); err != nil {
			t.log.Warn("snapshot not sent", "peer", from, "err", err)
			return
		}
		w.Flush()
		return
	case kindRaft:
		r := bufio.NewReaderSize(c, 256<<10)
		var hdr [6]byte
		var buf []byte // reused: Unmarshal copies what it keeps
		for {
			if _, err := io.ReadFull(r, hdr[:]); err != nil {
				t.peerDown(from)
				return
			}
			n := binary.LittleEndian.Uint32(hdr[:4])
			if n < 2 || n > maxFrame {
				t.log.Warn("raft frame of a bad size; closing", "peer", from, "size", n)
				t.peerDown(from)
				return
			}
			if cap(buf) < int(n-2) || cap(buf) > maxKeptBuffer {
				buf = make([]byte, n-2)
			}
			buf = buf[:n-2]
			if _, err := io.ReadFull(r, buf); err != nil {
				t.peerDown(from)
				return
			}
			m := &pb.Message{}
			if err := proto.Unmarshal(buf, m); err != nil {
				t.log.Warn("bad raft message; closing", "peer", from, "err", err)
				return
			}
			if m.GetFrom() != from {
				t.log.Warn("raft message claims another sender; closing", "peer", from, "from", m.GetFrom())
				return
			}
			t.deliver(int(binary.LittleEndian.Uint16(hdr[4:])), m)
		}
	}
}

// A snapshot request is the shard (u32). A member of 2026-12-06 or later
// sets snapAtBit in it and adds the index of the snapshot it installs
// (u64), so that the topics' counts are as of that index
// (engine.ExportStateAt); a backup sets snapLeadBit: only the shard's
// leader answers it (engine.ExportStateLeading). A node that reads the
// flags answers snapAtAck before the stream. A node of an earlier version
// reads no flag and closes the connection (no such shard): fetchSnapshot
// tells so (errNoSnapshotAt), and the member asks again without the
// index.
const (
	snapAtBit   = 1 << 31
	snapLeadBit = 1 << 30
	snapFlags   = snapAtBit | snapLeadBit
	snapAtAck   = 0xA5
)

// snapRequest is a snapshot request as read.
type snapRequest struct {
	shard   uint32
	at      uint64 // the snapshot's index (snapAtBit), or 0
	leading bool   // a backup's: only the confirmed leader answers (snapLeadBit)
}

// testHookEarlierSnapshots, when set (tests) and true, makes this node
// read snapshot requests as a node of an earlier version does: the shard
// alone.
var testHookEarlierSnapshots func() bool

// errNoSnapshotAt: the peer closed a request naming the snapshot's index
// without acknowledging it.
var errNoSnapshotAt = errors.New("cluster: the peer does not take a snapshot's index (a version before 2026-12-06)")

// fetchSnapshot asks node id (at addr) for a shard's state: as of the
// snapshot of entry index (engine.ExportStateAt), or, with index 0, as
// of now.
func (t *transport) fetchSnapshot(id uint64, addr string, shard int, index uint64) (io.ReadCloser, error) {
	return t.fetchState(id, addr, snapRequest{shard: uint32(shard), at: index})
}

// fetchState sends a snapshot request (see snapAtBit) to the node at addr
// and returns the stream.
func (t *transport) fetchState(id uint64, addr string, r snapRequest) (io.ReadCloser, error) {
	c, _, err := t.dial(addr, kindSnapshot, id)
	if err != nil {
		return nil, err
	}
	flags := uint32(0)
	if r.at > 0 {
		flags |= snapAtBit
	}
	if r.leading {
		flags |= snapLeadBit
	}
	req := binary.LittleEndian.AppendUint32(nil, r.shard|flags)
	if r.at > 0 {
		req = binary.LittleEndian.AppendUint64(req, r.at)
	}
	if _, err := c.Write(req); err != nil {
		c.Close()
		return nil, err
	}
	if flags != 0 {
		// The answer comes at once: the stream comes after it.
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		var ack [1]byte
		_, err := io.ReadFull(c, ack[:])
		switch {
		case err == nil && ack[0] == snapAtAck:
			c.SetReadDeadline(time.Time{})
		case err == nil:
			c.Close()
			return nil, fmt.Errorf("cluster: snapshot request answered with %#x", ack[0])
		case errors.Is(err, os.ErrDeadlineExceeded):
			c.Close()
			return nil, fmt.Errorf("cluster: snapshot request: %w", err)
		default:
			// Closed (EOF), or reset: the earlier version closes with
			// the index unread.
			c.Close()
			return nil, fmt.Errorf("%w: %v", errNoSnapshotAt, err)
		}
	}
	return idleConn{Conn: c, idle: snapshotReadIdle}, nil
}

// A snapshot stream through a link that went silent (a partition, a host
// that died without closing its connections) would wait for good: the
// member installing it takes no appends meanwhile, and the leader serving
// it holds its export open. So a read waits at most snapshotReadIdle for a
// byte, and a write of the server's 1 MiB buffer at most snapshotWriteIdle
// (long enough for a cluster backup read at a low --rate).
var (
	snapshotReadIdle  = 30 * time.Second
	snapshotWriteIdle = 5 * time.Minute
)

// idleConn fails a read or write that makes no progress for idle.
type idleConn struct {
	net.Conn
	idle time.Duration
}

func (c idleConn) Read(p []byte) (int, error) {
	c.Conn.SetReadDeadline(time.Now().Add(c.idle))
	return c.Conn.Read(p)
}

func (c idleConn) Write(p []byte) (int, error) {
	c.Conn.SetWriteDeadline(time.Now().Add(c.idle))
	return c.Conn.Write(p)
}

// failingPeers returns the peers every dial of which failed for at least d,
// with the address dialled.
func (t *transport) failingPeers(d time.Duration) map[uint64]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[uint64]string{}
	for id, p := range t.peers {
		p.mu.Lock()
		if !p.failing.IsZero() && time.Since(p.failing) >= d && p.addr != "" {
			out[id] = p.addr
		}
		p.mu.Unlock()
	}
	return out
}

// movePeer dials peer id at to from now on, if it was dialled at from.
func (t *transport) movePeer(id uint64, from, to string) bool {
	t.mu.Lock()
	p := t.peers[id]
	t.mu.Unlock()
	if p == nil {
		return false
	}
	p.mu.Lock()
	moved := p.addr == from
	if moved {
		p.addr, p.failing = to, time.Time{}
	}
	p.mu.Unlock()
	return moved
}

// peerAddr returns the raft address of a peer.
func (t *transport) peerAddr(id uint64) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.peers[id]; p != nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.addr
	}
	return ""
}

// close stops every goroutine and closes every connection.
func (t *transport) close() {
	t.mu.Lock()
	if t.done {
		t.mu.Unlock()
		return
	}
	t.done = true
	close(t.stop)
	for c := range t.conns {
		c.Close()
	}
	for _, p := range t.peers {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
	t.mu.Unlock()
	t.ln.Close()
	t.wg.Wait()
}
