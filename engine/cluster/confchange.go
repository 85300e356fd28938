package cluster

// Committed configuration changes, applied by the shard's loop: Raft's
// own, the books of smqd's membership (members.go, addresses.go), and a
// guard for a change that would leave the shard no voter.

import (
	"maps"
	"strings"
	"time"

	"github.com/smqd/smqd/engine"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// applyConfChange applies a committed configuration change.
func (s *shard) applyConfChange(b *engine.Broker, e *pb.Entry) error {
	var cc pb.ConfChangeI
	var v2 *pb.ConfChangeV2
	switch e.GetType() {
	case pb.EntryConfChange:
		var c pb.ConfChange
		if err := proto.Unmarshal(e.GetData(), &c); err != nil {
			return err
		}
		cc = &c
	case pb.EntryConfChangeV2:
		v2 = &pb.ConfChangeV2{}
		if err := proto.Unmarshal(e.GetData(), v2); err != nil {
			return err
		}
		cc = v2
	default:
		return nil
	}
	if leavesNoVoter(s.rn.Status().Config.Voters[0], cc) {
		// Raft panics applying it ("removed all voters"), here and at
		// every start after, on every member (members audit,
		// 2026-12-07). The leader refuses to propose one now
		// (proposeMember); a log written before may hold one. Applied as
		// no change, as Raft takes a change whose member id is 0: every
		// member decides the same at the same entry.
		s.log.Error("a committed configuration change would leave the shard no voter: applied as no change", "index", e.GetIndex(), "change", cc.AsV2().String())
		s.rn.ApplyConfChange(&pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: pb.ConfChangeRemoveNode.Enum(), NodeId: proto.Uint64(0)}}})
		return nil
	}
	cs := s.rn.ApplyConfChange(cc)
	if v2 != nil && strings.HasPrefix(string(v2.GetContext()), replacePrefix) && s.rn.BasicStatus().RaftState == raft.StateLeader {
		// The first half of a replacement: add the member back (node.go).
		// Proposed after this Ready is done: Raft refuses a conf change
		// while one is not yet marked applied.
		for _, c := range v2.GetChanges() {
			if c.GetType() == pb.ConfChangeRemoveNode {
				id, addr := c.GetNodeId(), strings.TrimPrefix(string(v2.GetContext()), replacePrefix)
				s.do(func() {
					if err := s.rn.ProposeConfChange(addMember(id, addr)); err != nil {
						s.log.Warn("replace member: the re-add was dropped", "member", id, "err", err)
					}
				})
			}
		}
	}
	data, err := proto.Marshal(cs)
	if err != nil {
		return err
	}
	if err := b.PersistConfState(e.GetIndex(), data); err != nil {
		return err
	}
	s.st.setConfState(cs)
	if s.id == 0 {
		s.n.zeroSince.Store(time.Now().UnixNano()) // memberorder.go
	}
	s.n.confChanged(s.id, e)
	return nil
}

// leavesNoVoter reports whether cc, applied to a configuration whose
// (incoming) voters are voters, leaves none.
func leavesNoVoter(voters map[uint64]struct{}, cc pb.ConfChangeI) bool {
	v2 := cc.AsV2()
	if v2.LeaveJoint() {
		return false
	}
	left := maps.Clone(voters)
	if left == nil {
		left = map[uint64]struct{}{}
	}
	for _, c := range v2.GetChanges() {
		if c.GetNodeId() == 0 {
			continue // Raft skips it
		}
		switch c.GetType() {
		case pb.ConfChangeAddNode:
			left[c.GetNodeId()] = struct{}{}
		case pb.ConfChangeRemoveNode, pb.ConfChangeAddLearnerNode:
			delete(left, c.GetNodeId())
		}
	}
	return len(left) == 0
}
