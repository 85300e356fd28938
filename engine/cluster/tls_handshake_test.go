package cluster

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
)

// Under cluster TLS, a connection that sends more than
// MaxTLSHandshakeBytes before its TLS handshake is done is refused for
// it, not held with what it sent until the handshake's 5 s deadline:
// crypto/tls takes handshake messages of up to 64 KiB, and 3,000
// connections each holding an unfinished one of 64 KiB took node 1 from
// 37 to 405 MiB of RSS (about 125 KiB each, up to 4,096 of them: 500 MiB
// from anyone who reaches the Raft port, no certificate needed; TLS
// audit, 2026-12-07). A node's own handshake, certificate and all, is
// well inside the bound (TestClusterTLSRefusesStrangers gets in).
func TestClusterTLSHandshakeSizeIsBounded(t *testing.T) {
	ca := newTestCA(t, "cluster CA")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	tr := newTransport(1, testKey, "api-1", ln, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})))
	tr.tls = ca.config(t, "node 1", ca.pool)
	// A bare transport, no Node: what its connections' ends call (node 2's
	// raft connection below ends with the test; unset, the call panicked
	// the package's test binary once, in make test).
	tr.peerDown = func(uint64) {}
	tr.deliver = func(int, *pb.Message) {}
	tr.start()
	defer tr.close()

	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	msg := append([]byte{0x01, 0x00, 0xff, 0xfc, 0x03, 0x03}, bytes.Repeat([]byte{0}, 48<<10)...)
	var hello []byte
	for len(msg) > 0 {
		n := min(len(msg), 16<<10)
		hello = append(hello, 0x16, 0x03, 0x01, byte(n>>8), byte(n))
		hello, msg = append(hello, msg[:n]...), msg[n:]
	}
	go conn.Write(hello) // the node may close before it has read it all
	eventually(t, "the refusal logged", func() error {
		if !strings.Contains(logs.String(), "raft connection refused") {
			return errors.New("not yet")
		}
		return nil
	})
	if !strings.Contains(logs.String(), "before the TLS handshake was done") {
		t.Fatalf("refused for another reason than its size:\n%s", logs.String())
	}
	// And a node with the cluster's certificate still gets in.
	other := newTransport(2, testKey, "api-2", nil, slog.New(slog.DiscardHandler))
	other.tls = ca.config(t, "node 2", ca.pool)
	c, _, err := other.dial(ln.Addr().String(), kindRaft, 1)
	if err != nil {
		t.Fatalf("a node with the cluster's certificate: %v", err)
	}
	c.Close()
}
