package cluster

// A node whose disk is full hands its leads over.
//
// A full disk (the engine's free-space guard, engine/space.go) makes a
// shard's broker refuse new messages and queues (503 DiskFull). A single
// node can do no more; in a cluster the other members may have room, and
// a minority with a full disk should cost no queue its sends. So:
//
//  1. Every balanceEvery each node tells every peer whether its disk is
//     full, in a node-state frame (transport shard nodeStateShard: a
//     MsgHeartbeat whose Context is the state; a build without this file
//     drops it, as it drops any frame of a shard it does not have).
//  2. A leader on a full node hands each shard it leads to a voter that is
//     active and not full, the first such in the shard's order of
//     preference after its preferred leader (balance.go), so that the
//     shards of a full node spread over the others.
//  3. The balancer hands no shard to a preferred leader whose disk is full;
//     once its disk has room again the shards go back to it as usual.
//  4. A peer that has sent no state within stateStale counts as not full
//     (it may run an older build); one that says it is full and then goes
//     quiet stays full until stateStale passes.
//
// With every voter full nothing moves: each leader refuses new messages
// while receives, deletes and visibility changes go on, as on one node.
// A full node may still win an election (its log is as good as any); it
// hands the shard over at its next check.
//
// Owner: balanceLoop computes this node's state (n.diskFull) and sends it;
// the transport's readers write peers' states (stateMu); shard loops read
// both.

import (
	"context"
	"errors"
	"log/slog"
	"syscall"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/wal"
)

const (
	// nodeStateShard is the transport shard number of node-state frames
	// (shards are fewer than 1024).
	nodeStateShard = 0xffff
	nodeStateV1    = 1
	stateDiskFull  = 1 << 0
	stateLeaving   = 1 << 1 // shutting down: hand it no lead (transfer.go)
	// stateStale: a peer's state older than this is forgotten.
	stateStale = 5 * balanceEvery
)

type peerState struct {
	full, leaving bool
	at            time.Time
}

// pollDiskFull sets n.diskFull from the shard brokers (their disks are
// one file system: any full one means the node's is) and tells the peers.
// A shard whose log failed for lack of space counts as full too: it waits
// to restart with no broker whose guard could say so (restart.go), and
// with every shard of the node in that state the node used to tell its
// peers, its status and its metrics that its disk had room (audit F3).
func (n *Node) pollDiskFull() {
	full := false
	for _, s := range n.shards {
		if b := s.broker(); (b != nil && b.DiskFull()) || s.failedForSpace() {
			full = true
			break
		}
	}
	if n.diskFull.Swap(full) != full {
		if full {
			n.log.Warn("disk full: this node hands the shards it leads to members with room")
		} else {
			n.log.Info("disk space is back: this node may lead shards again")
		}
	}
	n.sendState()
}

// DiskFull reports whether this node counts its disk as full
// (pollDiskFull): a shard's broker says so, or a shard waits to restart
// after its storage failed for lack of space. What the server reports
// from the brokers alone (smqd_disk_full, /healthz's note) misses the
// latter: a waiting shard has no broker.
func (n *Node) DiskFull() bool { return n.diskFull.Load() }

// failedForSpace reports whether the shard waits to restart after its
// storage failed for lack of space (the log's write met ENOSPC or EDQUOT,
// or the guard refused). Its cause, not a sample of free space, decides:
// the guard that sizes the reserve lives in the broker, which is gone, and
// the failure stays until a restart succeeds, which needs the room the
// guard asks for (engine.Broker.Resync, the open's minimum); from then on
// the new broker's guard answers.
func (s *shard) failedForSpace() bool {
	f := s.failure.Load()
	return f != nil && (errors.Is(f.err, syscall.ENOSPC) || errors.Is(f.err, syscall.EDQUOT) ||
		errors.Is(f.err, engine.ErrDiskFull) || errors.Is(f.err, wal.ErrNoSpace))
}

// sendState tells every peer this node's state: its disk full, it leaving
// (HandOverLeads, transfer.go).
func (n *Node) sendState() {
	var flags byte
	if n.diskFull.Load() {
		flags |= stateDiskFull
	}
	if n.givingLeadsAway() {
		flags |= stateLeaving
	}
	n.bookMu.Lock()
	msgs := make([]*pb.Message, 0, len(n.book))
	for id := range n.book {
		if id != n.cfg.NodeID {
			msgs = append(msgs, &pb.Message{Type: pb.MsgHeartbeat.Enum(), From: proto.Uint64(n.cfg.NodeID), To: proto.Uint64(id),
				Context: []byte{nodeStateV1, flags}})
		}
	}
	n.bookMu.Unlock()
	n.tr.send(nodeStateShard, msgs)
}

// noteState records a peer's node-state frame.
func (n *Node) noteState(m *pb.Message) {
	c := m.GetContext()
	if len(c) < 2 || c[0] != nodeStateV1 {
		return // a later version's state: not understood, ignored
	}
	n.stateMu.Lock()
	if n.peerStates == nil {
		n.peerStates = map[uint64]peerState{}
	}
	n.peerStates[m.GetFrom()] = peerState{full: c[1]&stateDiskFull != 0, leaving: c[1]&stateLeaving != 0, at: time.Now()}
	n.stateMu.Unlock()
}

// peerFull reports whether member id said recently that its disk is full.
func (n *Node) peerFull(id uint64) bool {
	if id == n.cfg.NodeID {
		return n.diskFull.Load()
	}
	n.stateMu.Lock()
	ps := n.peerStates[id]
	n.stateMu.Unlock()
	return ps.full && time.Since(ps.at) < stateStale
}

// unwanted reports whether member id should not be handed a lead: its
// disk is full, or it is shutting down (transfer.go); for this node, the
// same of itself.
func (n *Node) unwanted(id uint64) bool {
	if id == n.cfg.NodeID {
		return n.diskFull.Load() || n.givingLeadsAway()
	}
	n.stateMu.Lock()
	ps := n.peerStates[id]
	n.stateMu.Unlock()
	return (ps.full || ps.leaving) && time.Since(ps.at) < stateStale
}

// peerVotes reports whether node id said lately that it is not leaving
// (shutting down, or holding its vote: transfer.go). A peer that sent no
// state within stateStale counts only once it has been active (its shard
// messages, since activeSince) for longer than that: a node of a build
// before node-state frames sends none (item 4), and a node just added,
// such as a held --join node, has not sent its first (balance.go
// electable).
func (n *Node) peerVotes(id uint64, activeSince time.Time) bool {
	n.stateMu.Lock()
	ps := n.peerStates[id]
	n.stateMu.Unlock()
	if time.Since(ps.at) < stateStale {
		return !ps.leaving
	}
	return !activeSince.IsZero() && time.Since(activeSince) > stateStale
}

// whyDiskFull is the reason handOff logs for a full disk's hand-over
// (balance.go), the one logged at Warn.
const whyDiskFull = "disk full: handing the lead to a member with room"

// handOff (the shard's loop, on its leader: the node's disk is full, or it
// is shutting down) hands the shard to the first voter in its order of
// preference that is active and wanted; with none, it keeps the lead
// (false).
func (s *shard) handOff(active func(uint64) bool, why string) bool {
	if !s.electable() { // balance.go: no member could win; keep the lead
		return false
	}
	for _, to := range s.preference() {
		if to == s.n.cfg.NodeID || s.n.unwanted(to) || !active(to) {
			continue
		}
		// A full disk is a fault (Warn); a shutdown or a removal is the
		// operator's plan, one line per shard led (Info: a rolling restart
		// trips no alert on Warn lines; tour audit, 2026-12-06).
		// By the reason, not by the disk's state now: a removal's
		// hand-over that races a full disk is still the plan (review S).
		level := slog.LevelInfo
		if why == whyDiskFull {
			level = slog.LevelWarn
		}
		if s.n.diskFull.Load() {
			s.n.handoffs.Add(1)
		}
		s.log.Log(context.Background(), level, why, "to", to)
		s.handLeadTo(to) // transfer.go
		return true
	}
	return false
}

// diskCritical (the loop) reports whether the shard's disk is too full
// for replicated entries (handoff.go): the member then drops appends and
// snapshots, as if they were lost, rather than write until its log meets
// ENOSPC, which takes the shard on this node out of its group until it
// restarts (restart.go). Raft resends them; it catches up once there is
// room.
func (s *shard) diskCritical() bool {
	b := s.broker()
	critical := b != nil && b.DiskCritical()
	if critical != s.starved {
		s.starved = critical
		if critical {
			s.log.Error("disk space critical: this member takes no replicated entries until space is freed; the others carry on")
		} else {
			s.log.Info("disk space no longer critical: this member takes replicated entries again")
		}
	}
	return critical
}
