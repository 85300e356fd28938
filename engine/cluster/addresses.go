package cluster

// Learning a voter's address from the other members.
//
// A node knows its peers' Raft addresses from its flags, its address book
// and the membership changes it applies in shard 0. A shard caught up from
// a snapshot carries no addresses, so a node that joined (--join) while a
// member was down, with that member not in its --cluster-peers, held it as
// a voter of every shard with no address: it sent it nothing, and that
// member sent it nothing back on the shards this node led, so each such
// shard had one replica fewer than its member list said and stopped at the
// next failure (review G, 2026-12-06).
//
// Invariants:
//   - a node that holds a voter with no address, and has not seen that
//     voter removed, asks the members it reaches for it (addressEvery,
//     backing off to a minute while nobody knows it) and, once told,
//     dials it there and keeps it in its address book;
//   - an address this node has is replaced by another member's view of
//     it only when every dial at it failed for addressStale and the voter
//     completes the cluster's handshake at the other one, from here
//     (relearnFailing): a member's route may be its own;
//   - a member answers only for a voter or member of its shards that it
//     has not seen removed; a removed member taken back by an older build
//     ("Upgrading", voters_not_members) is learnt by nobody;
//   - a node of an older build closes such a request unanswered: the
//     asking node goes on to the next member.
//
// The request is a membership request (members.go, kind 4) with op
// memberAddress, the voter's id in the id field and an empty address; the
// answer is one byte, 1 with the address after it (u16 length, bytes) or
// 0 for none.
//
// A node being added cannot ask: it holds no voter yet, and may know no
// member it can reach (started with --join naming only a member that was
// down, or only itself; the cluster reached it, and it could answer no
// one: every shard lost its quorum, members audit F3, 2026-12-06). So the
// member that adds it first tells it every member's address it has (op
// memberTell, one request per member, answered with one byte), which the
// node takes for the members it has no address for.

import (
	"errors"
	"io"
	"net"
	"slices"
	"time"
)

const (
	addressEvery  = 2 * time.Second
	addressAtMost = time.Minute
)

// addressStale: a voter every dial of which failed this long is asked
// about too (relearnFailing). A variable for the tests alone.
var addressStale = 10 * time.Second

// unlistedAfter: a node that served no shard this long asks whether the
// members still list it (checkListed). A variable for the tests alone.
var unlistedAfter = 30 * time.Second

// addressLoop asks the other members for the addresses of the voters this
// node has none for, or cannot reach at the one it has, until the node
// closes.
func (n *Node) addressLoop() {
	defer n.wg.Done()
	wait := addressEvery
	var unhealthy time.Time
	for {
		select {
		case <-n.stop:
			return
		case <-time.After(wait):
		}
		n.checkListed(&unhealthy)
		missing := n.votersWithoutAddress()
		failing := n.tr.failingPeers(addressStale)
		learnt := len(missing) > 0 && n.learnAddresses(missing)
		learnt = n.relearnFailing(failing) || learnt
		switch {
		case learnt || len(missing)+len(failing) == 0:
			wait = addressEvery
		default:
			wait = min(2*wait, addressAtMost)
		}
	}
}

// checkListed: once this node has served no shard for unlistedAfter
// (unhealthy holds since when), it asks the members it reaches for its own
// address. If every one that answers gives none, they no longer hold it:
// it was removed while it was away, and never saw its removal (the
// leaders stop sending to a member once its removal commits). Health says
// so from then on, until the node is healthy or a member lists it. It sat
// "no leader" for good, listing itself and the old members, with nothing
// in its log (members audit L2, 2026-12-06).
func (n *Node) checkListed(unhealthy *time.Time) {
	switch {
	case n.health(false) == nil, !slices.Contains(n.Members(), n.cfg.NodeID):
		// Healthy; or started with --join and not added yet: nobody lists
		// it, and it was never removed (it was told so, review I). A member
		// removed while it was away still holds itself in its shards.
		*unhealthy = time.Time{}
		n.unlisted.Store(false)
		return
	case unhealthy.IsZero():
		*unhealthy = time.Now()
		return
	case time.Since(*unhealthy) < unlistedAfter:
		return
	}
	answered, listed := 0, false
	for from, at := range n.askable(nil) {
		got, err := n.tr.askAddress(from, at, n.cfg.NodeID)
		if err != nil {
			continue
		}
		answered++
		if got != "" {
			listed = true
			break
		}
	}
	unlisted := answered > 0 && !listed
	if unlisted && !n.unlisted.Load() {
		n.log.Warn("the members this node reaches do not list it: it was removed while it was away (smqctl cluster rm); stop it, or add it back on an empty directory with --join", "asked", answered)
	}
	n.unlisted.Store(unlisted)
}

// askable returns the members this node may ask, with their addresses:
// those of its address book but itself and except.
func (n *Node) askable(except []uint64) map[uint64]string {
	n.bookMu.Lock()
	defer n.bookMu.Unlock()
	out := make(map[uint64]string, len(n.book))
	for id, addr := range n.book {
		if id != n.cfg.NodeID && addr != "" && !slices.Contains(except, id) {
			out[id] = addr
		}
	}
	return out
}

// relearnFailing asks the other members about each voter of failing
// (every dial at the address this node has failed for addressStale) and,
// when one gives another address at which that voter completes the
// cluster's handshake, dials it there and records it. A member re-added at
// a new address was dialled at its old one by a node restarted with its
// usual flags (the flags win over the address book), and a node that
// learnt an address from a member in that state kept it for good: a
// shard each led kept a replica that got nothing (members audit F1, F5,
// 2026-12-06). It reports whether it moved any.
func (n *Node) relearnFailing(failing map[uint64]string) bool {
	members := n.Members()
	moved := false
	for id, at := range failing {
		if !slices.Contains(members, id) {
			continue
		}
		for from, addr := range n.askable([]uint64{id}) {
			got, err := n.tr.askAddress(from, addr, id)
			if err != nil || got == "" || got == at {
				continue
			}
			c, _, err := n.tr.dial(got, kindMember, id)
			if err != nil {
				n.log.Debug("a member's address from another member does not answer either", "member", id, "addr", got, "from", from, "err", err)
				continue
			}
			c.Close()
			if n.tr.movePeer(id, at, got) {
				n.log.Warn("a member did not answer at its raft address for a while, and answers at the one another member has: dialled there (give it in --cluster-peers too)", "member", id, "was", at, "now", got, "from", from)
				n.bookMu.Lock()
				n.book[id] = got
				err := saveMembers(n.cfg.Dir, n.book)
				n.bookMu.Unlock()
				if err != nil {
					n.log.Warn("the member address book could not be saved", "err", err)
				}
				moved = true
			}
			break
		}
	}
	return moved
}

// votersWithoutAddress returns the voters of any shard, other than this
// node and those it saw removed, that it has no address for.
func (n *Node) votersWithoutAddress() []uint64 {
	var out []uint64
	for _, id := range n.Members() {
		if id == n.cfg.NodeID || n.tr.peerAddr(id) != "" {
			continue
		}
		n.bookMu.Lock()
		gone := n.gone[id]
		n.bookMu.Unlock()
		if !gone {
			out = append(out, id)
		}
	}
	return out
}

// learnAddresses asks every member this node reaches for each voter of
// missing, and dials those it learns. It reports whether it learnt any.
func (n *Node) learnAddresses(missing []uint64) bool {
	asked := n.askable(missing)
	learnt := false
	for _, id := range missing {
		for from, at := range asked {
			addr, err := n.tr.askAddress(from, at, id)
			if err != nil {
				n.log.Debug("asking a member for a voter's address", "member", from, "voter", id, "err", err)
				continue
			}
			if addr == "" {
				continue
			}
			n.log.Info("learnt a voter's raft address from another member", "voter", id, "addr", addr, "from", from)
			n.tr.addPeer(id, addr)
			n.rememberMember(id, addr, false)
			learnt = true
			break
		}
		select {
		case <-n.stop:
			return learnt
		default:
		}
	}
	return learnt
}

// tellAddresses tells the node being added, id at addr, the raft address
// of every member this node has one for (this node's own as the flags
// name it). Best effort: a node that does not take them (an older build
// closes the request) has its flags.
func (n *Node) tellAddresses(id uint64, addr string) {
	for _, m := range n.Members() {
		at := n.tr.peerAddr(m)
		if m == n.cfg.NodeID {
			n.bookMu.Lock()
			at = n.book[m]
			n.bookMu.Unlock()
		}
		if m == id || at == "" {
			continue
		}
		if err := n.tr.tellAddress(id, addr, m, at); err != nil {
			n.log.Debug("telling a new member an address", "member", id, "of", m, "err", err)
		}
	}
}

// learnTold takes the address of member id that a member (from) told this
// node, unless it has one or saw id removed.
func (n *Node) learnTold(from, id uint64, addr string) {
	if id == n.cfg.NodeID || n.tr.peerAddr(id) != "" {
		return
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return
	}
	n.bookMu.Lock()
	gone := n.gone[id]
	n.bookMu.Unlock()
	if gone {
		return
	}
	n.log.Info("told a member's raft address by the member adding this node", "member", id, "addr", addr, "from", from)
	n.tr.addPeer(id, addr)
	n.rememberMember(id, addr, false)
}

// tellAddress tells node to, at addr, that member id is at at.
func (t *transport) tellAddress(to uint64, addr string, id uint64, at string) error {
	c, err := t.memberRequest(to, addr, 2*time.Second, memberTell, 0, id, at)
	if err != nil {
		return err
	}
	defer c.Close()
	var r [1]byte
	_, err = io.ReadFull(c, r[:])
	return err
}

// serveAddress answers a memberAddress request for voter id (serveMember).
func (n *Node) serveAddress(c net.Conn, id uint64) {
	addr := ""
	if slices.Contains(n.Members(), id) {
		n.bookMu.Lock()
		if !n.gone[id] {
			addr = n.book[id]
		}
		n.bookMu.Unlock()
		if addr == "" && id != n.cfg.NodeID {
			addr = n.tr.peerAddr(id)
		}
	}
	if addr == "" {
		c.Write([]byte{0})
		return
	}
	if _, err := c.Write([]byte{1}); err == nil {
		writeAddr(c, addr)
	}
}

// askAddress asks member to, at addr, for voter id's raft address ("" if
// it has none to give).
func (t *transport) askAddress(to uint64, addr string, id uint64) (string, error) {
	c, err := t.memberRequest(to, addr, 2*time.Second, memberAddress, 0, id, "")
	if err != nil {
		return "", err
	}
	defer c.Close()
	var r [1]byte
	if _, err := io.ReadFull(c, r[:]); err != nil {
		return "", err // an older build closes the request unanswered
	}
	if r[0] != 1 {
		return "", nil
	}
	got, err := readAddr(c)
	if err != nil {
		return "", err
	}
	if _, _, err := net.SplitHostPort(got); err != nil {
		return "", errors.New("cluster: a member answered a malformed address")
	}
	return got, nil
}

// knowsQuorum reports whether this node knows a raft address for a
// majority of the shard's voters, itself included. A node added by a
// member of an older build is told no addresses; asked to take a shard's
// lead (a balancer's transfer), it campaigned, could not win, and the
// shard had no leader for 3 s at each try, over and over (upgrade audit
// 3, 2026-12-06).
func (s *shard) knowsQuorum() bool {
	voters := s.st.votersNow()
	known := 0
	for _, v := range voters {
		if v == s.n.cfg.NodeID || s.n.tr.peerAddr(v) != "" {
			known++
		}
	}
	return known > len(voters)/2
}
