package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
)

// TestClusterHandshakeCannotBeRelayed: a process without the cluster key
// that a node dials must not be able to pass the dialling node's proof on
// to another member, and so get a connection there as the dialling node.
// Here node 1 dials it as the probe of AddMember for node 7 (a key with
// only smqd:ClusterAddNode is enough to make a node do that), and the
// relay asks node 2, in node 1's name, for a shard's state, which holds
// every message. Before the dialling node checked that the node it reached
// was the one it meant before proving itself (security audit, 2026-12-06),
// the relay read the shard's messages; with a dead-letter move it stored
// messages in any queue the same way.
func TestClusterHandshakeCannotBeRelayed(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	c.sendOne("q", "relayed-secret")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b := relayTrial(t, c, func(relay string) {
		if err := c.nodes[0].AddMember(ctx, 7, relay); err == nil {
			t.Fatal("node 7 added at the relay's address")
		}
	})
	if bytes.Contains(b, []byte("relayed-secret")) {
		t.Fatalf("a process without the key read a shard's messages through a relayed handshake (%d bytes)", len(b))
	}
	if len(b) > 0 {
		t.Fatalf("the relay got %d bytes of a snapshot stream", len(b))
	}

	// A member "added" at the relay's address: a probe there would prove
	// node 1 to the member itself through the relay. It is refused before
	// any dial (the API refuses it too, server/cluster.go).
	b = relayTrial(t, c, func(relay string) {
		if err := c.nodes[0].AddMember(ctx, 2, relay); !errors.Is(err, ErrMemberExists) {
			t.Fatalf("node 2 added again at another address: %v", err)
		}
	})
	if len(b) > 0 {
		t.Fatalf("the relay got %d bytes of a snapshot stream", len(b))
	}
}

// sendOne creates queue q through its shard's leader, sends body to it,
// and waits until every node holds it.
func (c *testCluster) sendOne(q, body string) {
	c.t.Helper()
	c.onLeader(q, func(b *engine.Broker) error {
		if _, err := b.CreateQueue(q, engine.DefaultQueueConfig()); err != nil {
			return err
		}
		qq, err := b.Queue(q)
		if err == nil {
			_, err = qq.Send([]engine.SendEntry{{Body: []byte(body)}}, nil)
		}
		return err
	})
	c.converged(q, 1, 0)
}

// relayTrial listens for a relay to node 2 (relaySnapshot), runs try with
// its address, and returns what the relay read.
func relayTrial(t *testing.T, c *testCluster, try func(relay string)) []byte {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 1)
	go func() { got <- relaySnapshot(ln, c.addrs[2]) }()
	try(ln.Addr().String())
	ln.Close()
	select {
	case b := <-got:
		return b
	case <-time.After(10 * time.Second): // a hang, not a timing
		t.Fatal("the relay did not end")
		return nil
	}
}

// relaySnapshot accepts one connection on ln and relays its handshake to
// the node at victim as a snapshot request for shard 0 in the dialler's
// name; it returns what the victim streamed (nil if the dialler did not
// prove itself).
func relaySnapshot(ln net.Listener, victim string) []byte {
	in, err := ln.Accept()
	if err != nil {
		return nil
	}
	defer in.Close()
	in.SetDeadline(time.Now().Add(5 * time.Second))
	hello := make([]byte, len(handshakeMagic)+1+8+16)
	if _, err := io.ReadFull(in, hello); err != nil {
		return nil
	}
	api, err := readAddr(in)
	if err != nil {
		return nil
	}
	out, err := net.Dial("tcp", victim)
	if err != nil {
		return nil
	}
	defer out.Close()
	out.SetDeadline(time.Now().Add(5 * time.Second))
	hello[len(handshakeMagic)] = kindSnapshot // the dialler's id and nonce kept
	out.Write(hello)
	writeAddr(out, api)
	resp := make([]byte, 16+8+32)
	if _, err := io.ReadFull(out, resp); err != nil {
		return nil
	}
	vapi, err := readAddr(out)
	if err != nil {
		return nil
	}
	in.Write(resp)
	writeAddr(in, vapi)
	proof := make([]byte, 32)
	if _, err := io.ReadFull(in, proof); err != nil {
		return nil // the dialler refused to prove itself
	}
	out.Write(proof)
	out.Write(binary.LittleEndian.AppendUint32(nil, 0))
	b, _ := io.ReadAll(out)
	return b
}

// TestClusterBoundsConnectionsBeforeTheirHandshake: connections that open
// and say nothing each held a descriptor and a goroutine for 5 s, however
// many a process without the key opened, and each was logged. Beyond the
// cap the oldest are closed at once, every one is counted, the log takes a
// bounded number of lines, and members still get in while the silent ones
// are held (closing the newcomer instead shut them out: review,
// 2026-12-06).
func TestClusterBoundsConnectionsBeforeTheirHandshake(t *testing.T) {
	var logs syncBuffer
	c := &testCluster{t: t, nodes: make([]*Node, 3), shards: 1}
	c.cfgTweak = func(i int, cfg *Config) {
		if i == 0 {
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
		}
	}
	startTestCluster(c)
	c.leader("q")
	const limit, opened = 4, 60
	c.nodes[0].tr.handshakeCap.Store(limit)
	before := c.nodes[0].refused.Load()
	var conns []net.Conn
	// One deadline for all reads, short of the 5 s after which the node
	// closes a silent connection anyway: only those it closed at once
	// count (a hang, not a timing, if the cap failed).
	deadline := time.Now().Add(3 * time.Second)
	defer func() {
		for _, k := range conns {
			k.Close()
		}
	}()
	for range opened {
		k, err := net.Dial("tcp", c.addrs[1])
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, k)
	}
	// Those beyond the cap are closed by the node well before the 5 s a
	// handshake may take (a hang, not a timing: the bound is the
	// handshake's own deadline).
	eofs := make(chan bool, len(conns))
	for _, k := range conns {
		go func() {
			k.SetReadDeadline(deadline)
			_, err := k.Read(make([]byte, 1))
			eofs <- err == io.EOF
		}()
	}
	closed := 0
	for range conns {
		if <-eofs {
			closed++
		}
	}
	if closed < opened-limit {
		t.Fatalf("%d of %d idle connections closed, want at least %d", closed, opened, opened-limit)
	}
	if n := c.nodes[0].refused.Load() - before; n < opened-limit {
		t.Fatalf("%d refusals counted, want at least %d", n, opened-limit)
	}
	if k := strings.Count(logs.String(), "raft connection refused"); k > refusedLogBurst+limit {
		t.Fatalf("%d refusals logged in about a second, want at most %d", k, refusedLogBurst+limit)
	}
	// The last silent ones are still held: a member's dials get in.
	for i := range 10 {
		k, _, err := c.nodes[1].tr.dial(c.addrs[1], kindMember, 1)
		if err != nil {
			t.Fatalf("member dial %d while silent connections are held: %v", i, err)
		}
		k.Close()
	}
	for _, k := range conns {
		k.Close()
	}
	conns = nil
	c.nodes[0].tr.handshakeCap.Store(0)
	// The members still reach node 1: a send through its shard's leader
	// commits on every node.
	c.sendOne("q", "after")
}

// A node started with --join and not added yet knows no members, so it
// probed even an existing member at any address: a process without the key
// relayed that probe to node 2 and read a shard through it (review,
// 2026-12-06). A node that is not a member itself adds no one.
func TestClusterJoiningNodeAddsNoOne(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	c.sendOne("q", "relayed-secret")
	c.nodes = append(c.nodes, nil)
	c.dirs = append(c.dirs, filepath.Join(t.TempDir(), "4"))
	c.hold(4)
	c.cfgTweak = func(i int, cfg *Config) { cfg.Join = i == 3 }
	c.start(3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	b := relayTrial(t, c, func(relay string) {
		if err := c.nodes[3].AddMember(ctx, 2, relay); !errors.Is(err, ErrNotAMember) {
			t.Errorf("AddMember on a node not added yet: %v, want ErrNotAMember", err)
		}
	})
	if len(b) > 0 {
		t.Fatalf("the relay read %d bytes of a shard in the joining node's name", len(b))
	}
}
