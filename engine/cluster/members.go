package cluster

// Membership while the cluster runs: AddMember and RemoveMember change
// every shard's Raft configuration, one shard at a time through its leader
// (this node when it leads, else a kind-4 request to the leader over the
// authenticated transport), and return once this node has applied the
// change in every shard.
//
// A membership request (kind 4):
//
//	op u8 (1 add, 2 remove) | shard u32 | member id u64 | raft address (u16 length, bytes)
//
// answered with one byte: 1 proposed, 0 not the shard's leader here, 2
// busy: another change is under way (memberorder.go, which orders the
// changes). A forced removal carries "force" as its address.
//
// The address book. A member added while the cluster runs is in no one's
// --cluster-peers; every node learns its address from the change (shard
// 0's conf change carries it) and keeps it in <dir>/members, so that it is
// known again after a restart. Entries of the file win over the flags.

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

const (
	memberAdd     = 1
	memberRemove  = 2
	memberHold    = 3 // hold moves between queues (holdmoves.go); the id field carries the ms
	memberAddress = 4 // a voter's raft address, asked of another member (addresses.go)
	memberTell    = 5 // a member's raft address, told to a node being added (addresses.go)
)

// AddMember adds node id, reachable at raftAddr, to every shard. The new
// node must be started with --join (Config.Join); it catches up from
// snapshots. It returns when this node has applied the change everywhere,
// or ctx's error.
func (n *Node) AddMember(ctx context.Context, id uint64, raftAddr string) error {
	if id == 0 {
		return errors.New("cluster: node ids start at 1")
	}
	if _, _, err := net.SplitHostPort(raftAddr); err != nil {
		return fmt.Errorf("cluster: the new member's raft address: %w", err)
	}
	if !slices.Contains(n.Members(), n.cfg.NodeID) {
		// A node that is not a member itself (started with --join and not
		// added yet, or removed) knows no members: it would probe even an
		// existing one at any address given, and prove itself to it
		// through whoever listens there (review, 2026-12-06).
		return ErrNotAMember
	}
	if slices.Contains(n.Members(), id) {
		// Not probed at another address: whoever listens there could pass
		// the probe on to the member itself and be served in this node's
		// name (transport.go, the relay). A member moves by a restart.
		known := n.tr.peerAddr(id)
		if id == n.cfg.NodeID {
			known = n.cfg.RaftListen
		}
		// A voter of some shards that no one has an address for (an add
		// cut short outside shard 0, its member restarted) is probed at
		// the one given, and the add finished (review H, 2026-12-06).
		if known != "" && known != raftAddr {
			return fmt.Errorf("%w: node %d is a member already, at %s (to move a member, restart it with its new --raft-listen: docs/operations.md)", ErrMemberExists, id, known)
		}
	}
	if err := n.probeMember(ctx, id, raftAddr); err != nil {
		return err
	}
	n.tellAddresses(id, raftAddr) // addresses.go
	return n.changeMembers(ctx, memberAdd, id, raftAddr)
}

// ErrNotAMember is AddMember's error on a node that is not a member of
// the cluster itself.
var ErrNotAMember = errors.New("cluster: this node is not a member of the cluster (yet): ask a member")

// ErrRemoveSelf is RemoveMember's error for the node's own id. The
// leaders stop replicating to a member once its removal commits, so it
// never learns that the removal went through and waited for it in vain:
// asked of node 4, the removal of node 4 failed after 30 s and left it a
// voter of the shards it had led, in none of the member lists (cluster
// ops audit, 2026-12-06). Another member must make it.
var ErrRemoveSelf = errors.New("cluster: a node cannot remove itself: ask another member")

// ErrMemberExists is AddMember's error for a member given another address
// than the one it has.
var ErrMemberExists = errors.New("cluster: a member at another address")

// ErrMemberUnreachable is AddMember's error when this node cannot complete
// the cluster's handshake with the new member at its address.
var ErrMemberUnreachable = errors.New("cluster: the new member cannot be reached")

// probeMember runs the cluster's handshake with the node at addr, as its
// shards' leaders will, before any shard counts it as a voter, and checks
// that it is node id. A member no one reaches (nothing listening there,
// another cluster key, a certificate the cluster refuses, another node)
// would count in every quorum and take no share of it: one more failure
// would then stop every shard. A node just started gets up to 5 s. The
// probe is a membership connection closed at once: the member serves
// nothing on it (serveMember reads no request), unlike a Raft
// connection, whose end makes it forget a leader.
func (n *Node) probeMember(ctx context.Context, id uint64, addr string) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, got, err := n.tr.dial(addr, kindMember, id)
		if err == nil {
			c.Close()
			return nil
		}
		if errors.Is(err, errWrongPeer) {
			return fmt.Errorf("%w: the node at %s is node %d, not %d", ErrMemberUnreachable, addr, got, id)
		}
		if refusal(err) || time.Now().After(deadline) {
			return fmt.Errorf("%w at %s (start it with --join, the cluster's key and a certificate of its CA, then add it): %w", ErrMemberUnreachable, addr, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w at %s: %w", ErrMemberUnreachable, addr, ctx.Err())
		case <-n.stop:
			return ErrClosed
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// RemoveMember removes node id from every shard. Removing the last member
// is refused, and so is a removal after which some shard's voters left
// are no majority of the members this node reaches now (ErrQuorumAtRisk):
// with 3 members and one down, removing a live one left 2 voters, one of
// them down, and every shard stopped until the down one came back
// (members audit, 2026-12-06). ForceRemoveMember skips that check.
func (n *Node) RemoveMember(ctx context.Context, id uint64) error {
	if err := n.checkRemoval(id); err != nil {
		return err
	}
	if err := n.reachableAfter(ctx, id); err != nil {
		return err
	}
	return n.changeMembers(ctx, memberRemove, id, "")
}

// ForceRemoveMember is RemoveMember without the reachability check: the
// operator knows the members that are down are gone for good, or will be
// back.
func (n *Node) ForceRemoveMember(ctx context.Context, id uint64) error {
	if err := n.checkRemoval(id); err != nil {
		return err
	}
	return n.changeMembers(ctx, memberRemove, id, forcedRemoval)
}

func (n *Node) checkRemoval(id uint64) error {
	if id == n.cfg.NodeID {
		return ErrRemoveSelf
	}
	for _, s := range n.shards {
		v := s.st.votersNow()
		if len(v) == 1 && v[0] == id {
			return fmt.Errorf("cluster: node %d is shard %d's only member", id, s.id)
		}
	}
	return nil
}

// ErrQuorumAtRisk is RemoveMember's error when some shard would keep
// voters of which this node reaches no majority.
var ErrQuorumAtRisk = errors.New("cluster: after the removal a shard would keep no majority of members that answer")

// reachableAfter probes, at once, every voter other than this node and id
// (the cluster's handshake, as probeMember, each within its dial and
// handshake timeouts) and checks that each shard would keep a majority of
// voters that answered (this node counts).
func (n *Node) reachableAfter(ctx context.Context, id uint64) error {
	up := map[uint64]bool{n.cfg.NodeID: true}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, v := range n.Members() {
		addr := n.tr.peerAddr(v)
		if v == id || v == n.cfg.NodeID || addr == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if c, _, err := n.tr.dial(addr, kindMember, v); err == nil {
				c.Close()
				mu.Lock()
				up[v] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, s := range n.shards {
		var left, answering []uint64
		for _, v := range s.st.votersNow() {
			if v == id {
				continue
			}
			left = append(left, v)
			if up[v] {
				answering = append(answering, v)
			}
		}
		if len(answering) <= len(left)/2 {
			return fmt.Errorf("%w: shard %d would keep %v, of which %v answer here; bring the others back or remove them first (or force it)", ErrQuorumAtRisk, s.id, left, answering)
		}
	}
	return nil
}

// MemberOfEveryShard reports whether id is a voter of every shard. An add
// cut short (the member asked killed, a timeout) leaves it a voter of some
// only; the server refused every retry of it as "a member already", on
// Members' union, and nothing else finished it (members audit,
// 2026-12-06).
func (n *Node) MemberOfEveryShard(id uint64) bool {
	for _, s := range n.shards {
		if !slices.Contains(s.st.votersNow(), id) {
			return false
		}
	}
	return true
}

// Members returns the voters of every shard as this node knows them (the
// union, sorted).
func (n *Node) Members() []uint64 {
	var out []uint64
	for _, s := range n.shards {
		for _, id := range s.st.votersNow() {
			if !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
	}
	slices.Sort(out)
	return out
}

// changeMembers makes the change in every shard, shard 0 first
// (memberorder.go). For a removal addr is empty, or forcedRemoval.
func (n *Node) changeMembers(ctx context.Context, op byte, id uint64, addr string) error {
	done := func(s *shard) bool {
		if op == memberRemove && n.replaceState(s.id, id) == replaceRemoved {
			// A replacement's removal applied, its re-add still to come
			// (rejoin.go): that add would undo this removal.
			return false
		}
		return slices.Contains(s.st.votersNow(), id) == (op == memberAdd)
	}
	if op == memberAdd {
		n.tr.addPeer(id, addr) // so that the leaders here can reach it at once
	}
	var busySince time.Time
	for {
		var left []int
		var mine []chan byte // the answers of the shards led here
		busy := false
		for _, s := range n.shards {
			if done(s) {
				continue
			}
			left = append(left, s.id)
			if s.id != 0 && !done(n.shards[0]) {
				continue
			}
			switch lead := s.lead.Load(); {
			case lead == n.cfg.NodeID:
				res := make(chan byte, 1)
				s.do(func() { res <- s.proposeMember(op, id, addr) })
				mine = append(mine, res)
			case lead != 0:
				if a := n.tr.peerAddr(lead); a != "" {
					_, err := n.tr.askMember(lead, a, op, s.id, id, addr)
					busy = busy || errors.Is(err, errMemberBusy)
					if err != nil {
						n.log.Debug("membership request", "shard", s.id, "leader", lead, "err", err)
					}
				}
			}
		}
		answered := time.After(2 * time.Second)
	waitMine:
		for _, res := range mine {
			select {
			case a := <-res:
				busy = busy || a == memberBusy
			case <-answered:
				break waitMine
			}
		}
		if len(left) == 0 {
			if op == memberAdd {
				n.log.Info("membership changed", "op", "add", "member", id, "addr", addr)
			} else {
				n.log.Info("membership changed", "op", "remove", "member", id, "forced", addr == forcedRemoval)
			}
			return nil
		}
		switch {
		case !busy:
			busySince = time.Time{}
		case busySince.IsZero():
			busySince = time.Now()
		case time.Since(busySince) > memberBusyFor:
			if done(n.shards[0]) {
				return fmt.Errorf("%w: this change is made in shard 0 and not yet in shards %v (%s); repeat it to finish it", ErrMembershipBusy, left, n.shardsUnlikeZero())
			}
			return fmt.Errorf("%w: %s; repeat the change cut short to finish it, or remove its member with force", ErrMembershipBusy, n.shardsUnlikeZero())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: membership change of node %d not applied in shards %v: %w", id, left, ctx.Err())
		case <-n.stop:
			return ErrClosed
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// ErrClosed: the node is closed.
var ErrClosed = errors.New("cluster: node closed")

// proposeMember proposes a change in this shard (its loop; a no-op unless
// it leads), in the order memberorder.go keeps, and returns the answer
// to the request. A change already pending makes Raft drop this one; the
// caller asks again.
func (s *shard) proposeMember(op byte, id uint64, addr string) byte {
	if s.rn.BasicStatus().RaftState != raft.StateLeader {
		return memberNotHere
	}
	var cc *pb.ConfChangeV2
	switch op {
	case memberAdd:
		if slices.Contains(s.st.votersNow(), id) {
			return memberProposed
		}
		if !s.inOrder(op, id, false) {
			return memberBusy
		}
		cc = addMember(id, addr)
	case memberRemove:
		v := s.st.votersNow()
		if !slices.Contains(v, id) {
			return memberProposed
		}
		if len(v) == 1 {
			// The shard's last voter. The member asking checked its own
			// view, which may count more: two removals at once in a
			// cluster of two, or a member just removed asking. Raft
			// panics applying such a change, on every member and at
			// every start after (members audit, 2026-12-07). Raft
			// takes a conf change only once the one before is applied,
			// so the voters here are those the change would apply to.
			s.log.Warn("membership: refused to remove the shard's last voter", "member", id)
			return memberNotHere
		}
		if id == s.n.cfg.NodeID {
			// The leader is the member to remove: it would lead on until
			// the change applies and then step down with no successor,
			// failing what it holds and leaving the shard without a
			// leader for an election. It hands the lead over instead
			// (transfer.go: that costs clients nothing), and the next
			// leader proposes the removal when it is asked again. With no
			// member to hand to, it proposes the removal itself.
			s.n.removing.Store(time.Now().UnixNano())
			if s.handing != nil || s.handOff(s.activeMember, "this member is being removed: handing the lead over") {
				return memberNotHere
			}
		}
		// After the hand-over: the member removed never applies its own
		// removal in shard 0, so it would find the change out of order.
		if !s.inOrder(op, id, addr == forcedRemoval) {
			return memberBusy
		}
		cc = &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: pb.ConfChangeRemoveNode.Enum(), NodeId: proto.Uint64(id)}}}
	default:
		return memberNotHere
	}
	if err := s.rn.ProposeConfChange(cc); err != nil {
		s.log.Debug("membership proposal dropped", "err", err)
	}
	return memberProposed
}

// serveMember answers one membership request.
func (n *Node) serveMember(from uint64, c net.Conn) {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	var b [1 + 4 + 8]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return
	}
	addr, err := readAddr(c)
	if err != nil {
		return
	}
	op, sh, id := b[0], int(binary.LittleEndian.Uint32(b[1:])), binary.LittleEndian.Uint64(b[5:])
	if op == memberHold {
		// The shard field carries the backup's nonce (holdmoves.go).
		c.SetDeadline(time.Now().Add(holdSettle + 5*time.Second))
		n.holdMoves(from<<32|uint64(uint32(sh)), time.Duration(min(id, uint64(holdFor.Milliseconds())))*time.Millisecond)
		c.Write([]byte{1})
		return
	}
	switch op {
	case memberAddress:
		n.serveAddress(c, id) // addresses.go
		return
	case memberTell:
		n.learnTold(from, id, addr) // addresses.go
		c.Write([]byte{1})
		return
	}
	if sh >= len(n.shards) || (op != memberAdd && op != memberRemove) {
		return
	}
	n.log.Info("membership request", "from", from, "shard", sh, "op", op, "member", id, "addr", addr)
	if op == memberAdd {
		n.tr.addPeer(id, addr)
	}
	s := n.shards[sh]
	res := make(chan byte, 1)
	s.do(func() { res <- s.proposeMember(op, id, addr) })
	a := byte(memberNotHere)
	select {
	case a = <-res:
	case <-time.After(2 * time.Second):
	}
	c.Write([]byte{a})
}

// askMember asks node to, at addr, to propose a change in one shard.
func (t *transport) askMember(to uint64, addr string, op byte, shard int, id uint64, member string) (bool, error) {
	wait := 5 * time.Second
	if op == memberHold {
		wait += holdSettle // the member waits for its moves in flight first
	}
	c, err := t.memberRequest(to, addr, wait, op, shard, id, member)
	if err != nil {
		return false, err
	}
	defer c.Close()
	var r [1]byte
	if _, err := io.ReadFull(c, r[:]); err != nil {
		return false, err
	}
	if r[0] == memberBusy {
		return false, errMemberBusy
	}
	return r[0] == memberProposed, nil
}

// memberRequest dials node to at addr and sends it one membership request
// (the file comment), with wait for the whole exchange; the caller reads
// the answer and closes the connection.
func (t *transport) memberRequest(to uint64, addr string, wait time.Duration, op byte, shard int, id uint64, member string) (net.Conn, error) {
	c, _, err := t.dial(addr, kindMember, to)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(wait))
	var b [1 + 4 + 8]byte
	b[0] = op
	binary.LittleEndian.PutUint32(b[1:], uint32(shard))
	binary.LittleEndian.PutUint64(b[5:], id)
	_, err = c.Write(b[:])
	if err == nil {
		err = writeAddr(c, member)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// The address book (<dir>/members): "id address" per line.

func membersPath(dir string) string { return dir + "/members" }

// removedPath is the file of the members this node saw removed, one id a
// line (forgetRemoved). A file of its own: a version before it reads the
// address book and never this.
func removedPath(dir string) string { return dir + "/members.removed" }

func loadRemoved(dir string) (map[uint64]bool, error) {
	out := map[uint64]bool{}
	b, err := os.ReadFile(removedPath(dir))
	if os.IsNotExist(err) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Fields(string(b)) {
		v, err := strconv.ParseUint(line, 10, 64)
		if err != nil || v == 0 {
			return nil, fmt.Errorf("cluster: %s: bad line %q", removedPath(dir), line)
		}
		out[v] = true
	}
	return out, nil
}

func saveRemoved(dir string, gone map[uint64]bool) error {
	var b strings.Builder
	for _, id := range slices.Sorted(maps.Keys(gone)) {
		fmt.Fprintf(&b, "%d\n", id)
	}
	return writeSynced(removedPath(dir), b.String())
}

// loadMembers reads the address book (empty if there is none).
func loadMembers(dir string) (map[uint64]string, error) {
	f, err := os.Open(membersPath(dir))
	if os.IsNotExist(err) {
		return map[uint64]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[uint64]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		id, addr, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if !ok {
			continue
		}
		v, err := strconv.ParseUint(id, 10, 64)
		if err != nil || v == 0 {
			return nil, fmt.Errorf("cluster: %s: bad line %q", membersPath(dir), sc.Text())
		}
		out[v] = addr
	}
	return out, sc.Err()
}

// saveMembers writes the address book atomically (a temporary file renamed
// over the old one).
func saveMembers(dir string, m map[uint64]string) error {
	ids := make([]uint64, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, "%d %s\n", id, m[id])
	}
	return writeSynced(membersPath(dir), b.String())
}

// writeSynced replaces the file p with content: written beside it, synced,
// renamed over it.
func writeSynced(p, content string) error {
	tmp := p + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		return err
	}
	// The rename itself is durable only once the directory is synced
	// (review M: a power loss right after it left DAMAGED.tmp alone).
	return syncDir(filepath.Dir(p))
}

// forgetRemoved (Open, once the shards have started, before any peer is
// dialled) drops from the address book every member this node saw removed
// (smqctl cluster rm; <dir>/members.removed) that no shard's configuration
// holds: the flags may still name it. Kept, it was dialled and listed again
// after each restart, and when added back at a new address this node kept
// the old one (addPeer keeps a known peer's address), so it never caught
// up. A member this node did not see removed stays, even in no shard's
// configuration here: one added while this node was down, which the flags
// name before this node's shards catch up (from a snapshot, which carries
// no addresses). A joining node's shards have no configuration yet: it
// forgets nothing.
func (n *Node) forgetRemoved() {
	known := map[uint64]bool{}
	for _, s := range n.shards {
		ids := s.st.membersNow()
		if len(ids) == 0 {
			return
		}
		for _, id := range ids {
			known[id] = true
		}
	}
	n.bookMu.Lock()
	defer n.bookMu.Unlock()
	changed := false
	for id, addr := range n.book {
		if id != n.cfg.NodeID && !known[id] && n.gone[id] {
			n.log.Info("a member named by --cluster-peers or the address book is in no shard (it was removed): not dialled", "member", id, "addr", addr)
			delete(n.book, id)
			changed = true
		}
	}
	if changed {
		if err := saveMembers(n.cfg.Dir, n.book); err != nil {
			n.log.Warn("the member address book could not be saved", "err", err)
		}
	}
}

// rememberMember updates the address book after a change in shard 0.
func (n *Node) rememberMember(id uint64, addr string, remove bool) {
	n.bookMu.Lock()
	defer n.bookMu.Unlock()
	if remove != n.gone[id] {
		if remove {
			n.gone[id] = true
		} else {
			delete(n.gone, id)
		}
		if err := saveRemoved(n.cfg.Dir, n.gone); err != nil {
			n.log.Warn("the removed members could not be saved", "err", err)
		}
	}
	if remove {
		if _, ok := n.book[id]; !ok {
			return
		}
		delete(n.book, id)
	} else {
		if _, ok := n.book[id]; ok {
			return // known: this node's own address for it stays (see addPeer)
		}
		n.book[id] = addr
	}
	if err := saveMembers(n.cfg.Dir, n.book); err != nil {
		n.log.Warn("the member address book could not be saved", "err", err)
	}
}
