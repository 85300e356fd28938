package cluster

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/smqd/smqd/engine"
)

// syncBuffer collects a node's log for the test to search.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A process without the cluster key, or with a wrong one, cannot join,
// vote, append, fetch a snapshot, ask to be replaced or forward a request:
// every attempt is refused at the handshake and logged, and the cluster's
// state (terms, members, a queue's messages) is unchanged. Against a
// transport that skipped the acceptor's MAC check, the test fails: the
// forged vote would raise the shard's term.
func TestClusterRefusesPeersWithoutTheKey(t *testing.T) {
	c := newTestCluster(t, 3, 2)
	var logs syncBuffer
	// Node 1's log, for the refusals.
	c.stop(0)
	cfg := c.config(0)
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.nodes[0] = n
	c.preferredLeaders() // no balancer hand-over under the create and the send
	_, b := c.leader("guarded")
	if _, err := b.CreateQueue("guarded", engine.DefaultQueueConfig()); err != nil {
		t.Fatal(err)
	}
	q, _ := b.Queue("guarded")
	if _, err := q.Send([]engine.SendEntry{{Body: []byte("kept")}}, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "replicated", func() error {
		info, err := c.counts(0, "guarded")
		if err != nil || info.Active != 1 {
			return fmt.Errorf("node 1 holds %+v, %v", info, err)
		}
		return nil
	})
	before := c.nodes[0].Status()
	addr := c.addrs[1]

	wrong := []byte("not-the-cluster-key-but-long-enough")
	vote := &pb.Message{Type: pb.MsgVote.Enum(), From: proto.Uint64(2), To: proto.Uint64(1), Term: proto.Uint64(before.Shards[0].Term + 100),
		LogTerm: proto.Uint64(1 << 40), Index: proto.Uint64(1 << 40)}
	app := &pb.Message{Type: pb.MsgApp.Enum(), From: proto.Uint64(2), To: proto.Uint64(1), Term: proto.Uint64(before.Shards[0].Term + 100),
		Entries: []*pb.Entry{{Term: proto.Uint64(before.Shards[0].Term + 100), Index: proto.Uint64(1 << 30), Data: []byte("forged")}}}
	attempts := []struct {
		name  string
		kind  byte
		key   []byte // nil: no key at all (a zero MAC)
		after []byte // what the intruder sends after its handshake
	}{
		{"vote with a wrong key", kindRaft, wrong, raftFrame(t, 0, vote)},
		{"append with a wrong key", kindRaft, wrong, raftFrame(t, 0, app)},
		{"vote without a key", kindRaft, nil, raftFrame(t, 1, vote)},
		{"join with a wrong key", kindMember, wrong, memberRequest(memberAdd, 0, 9, "127.0.0.1:1")},
		{"replace a member without a key", kindRejoin, nil, binary.LittleEndian.AppendUint32(nil, 0)},
		{"snapshot with a wrong key", kindSnapshot, wrong, []byte{0, 0, 0, 0}},
		{"forward with a wrong key", kindForward, wrong, append(binary.LittleEndian.AppendUint32(nil, 20), "\x00GET /queues HTTP/1.1"...)},
		{"move a dead letter with a wrong key", kindMove, wrong, moveFrame(t, "guarded")},
	}
	for _, a := range attempts {
		refused := c.nodes[0].refused.Load()
		got, err := intrude(addr, 2, a.kind, a.key, a.after)
		if err == nil && len(got) > 0 {
			t.Errorf("%s: the node answered %q", a.name, got)
		}
		eventually(t, a.name+" refused", func() error {
			if c.nodes[0].refused.Load() == refused {
				return errors.New("not counted as refused")
			}
			return nil
		})
	}
	// Garbage instead of a handshake.
	refused := c.nodes[0].refused.Load()
	if conn, err := net.Dial("tcp", addr); err == nil {
		conn.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		io.ReadAll(conn)
		conn.Close()
	}
	eventually(t, "garbage refused", func() error {
		if c.nodes[0].refused.Load() == refused {
			return errors.New("not counted")
		}
		return nil
	})

	// Nothing changed: terms, members, the queue; and each refusal was logged.
	time.Sleep(200 * time.Millisecond)
	after := c.nodes[0].Status()
	for i := range after.Shards {
		// The forged messages carry terms 100 above; an election for
		// other reasons (the leaders moving to their preferred nodes, a
		// slow machine) moves a term by a few.
		if after.Shards[i].Term >= before.Shards[0].Term+100 {
			t.Errorf("shard %d: term %d -> %d: a forged message was taken", i, before.Shards[i].Term, after.Shards[i].Term)
		}
	}
	if m := c.nodes[0].Members(); !slices.Equal(m, []uint64{1, 2, 3}) {
		t.Errorf("members: %v", m)
	}
	if info, err := c.counts(0, "guarded"); err != nil || info.Active != 1 {
		t.Errorf("queue after the attempts: %+v, %v", info, err)
	}
	if k := strings.Count(logs.String(), "raft connection refused"); k < len(attempts)+1 {
		t.Errorf("%d refusals logged, want %d:\n%s", k, len(attempts)+1, logs.String())
	}
}

// moveFrame is a dead-letter move of one message into queue, framed.
func moveFrame(t *testing.T, queue string) []byte {
	now := time.Now().UnixMilli()
	req := appendMove(nil, queue, []engine.MovedMessage{{Body: []byte("forged"), EnqueueMs: now, ExpireMs: now + 60_000, Priority: 8}})
	if _, _, err := parseMove(req); err != nil {
		t.Fatal(err)
	}
	return append(binary.LittleEndian.AppendUint32(nil, uint32(len(req))), req...)
}

// intrude plays the initiator's side of the handshake with key (nil: a
// zero MAC), then sends after, and returns what the node sent back after
// its half of the handshake.
func intrude(addr string, claimID uint64, kind byte, key, after []byte) ([]byte, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	ni := make([]byte, 16)
	rand.Read(ni)
	hello := append([]byte(handshakeMagic), kind)
	hello = binary.LittleEndian.AppendUint64(hello, claimID)
	hello = append(hello, ni...)
	conn.Write(hello)
	writeAddr(conn, "")
	var resp [16 + 8 + 32]byte
	if _, err := io.ReadFull(conn, resp[:]); err != nil {
		return nil, err
	}
	if _, err := readAddr(conn); err != nil {
		return nil, err
	}
	mac := make([]byte, 32)
	if key != nil {
		t := &transport{key: key}
		mac = t.mac('I', resp[:16], ni, claimID, binary.LittleEndian.Uint64(resp[16:24]))
	}
	conn.Write(mac)
	conn.Write(after)
	return io.ReadAll(conn)
}

func raftFrame(t *testing.T, shard uint16, m *pb.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	f := binary.LittleEndian.AppendUint32(nil, uint32(2+len(b)))
	f = binary.LittleEndian.AppendUint16(f, shard)
	return append(f, b...)
}

func memberRequest(op byte, shard uint32, id uint64, addr string) []byte {
	b := []byte{op}
	b = binary.LittleEndian.AppendUint32(b, shard)
	b = binary.LittleEndian.AppendUint64(b, id)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(addr)))
	return append(b, addr...)
}
