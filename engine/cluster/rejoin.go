package cluster

// A member that lost its data (its directory was wiped) must not take part
// as if nothing happened: Raft assumes a member never loses what it
// acknowledged or its vote, and the leaders still count it as holding
// their entries. Such a node starts like a new one (its shards bootstrap a
// fresh log) and, before its shards run, asks the other members whether it
// lost anything; if so it is replaced in every shard — removed and added
// back, which gives it a fresh place in each group — and catches up from
// snapshots.
//
// Telling a wiped member from a new one. Every node remembers, per shard
// and member, the highest log index the member acknowledged to it as a
// leader (noteAck; written to <dir>/acked every few seconds). The asking
// node sends the last index of each of its shards; a member that once
// acknowledged more than it now holds lost data. A member of a new cluster
// that merely starts later than the others has acknowledged nothing it
// does not hold, so it is not replaced (it catches up from the log).
//
// Requests (kind 2): shards u32 | last index u64 per shard; answered with
// one byte, 1 replaced.

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

type ackKey struct {
	shard  int
	member uint64
}

// noteAck records that member acknowledged index in shard (the transport's
// reader, for every accepted MsgAppResp).
func (n *Node) noteAck(shard int, member, index uint64) {
	k := ackKey{shard, member}
	n.ackMu.Lock()
	if index > n.acked[k] {
		n.acked[k] = index
		n.ackDirty = true
	}
	n.ackMu.Unlock()
}

// ackSaver writes the acknowledgement table every 2 s while it changes.
func (n *Node) ackSaver() {
	defer n.wg.Done()
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			n.saveAcked()
			return
		case <-t.C:
			n.saveAcked()
		}
	}
}

func (n *Node) saveAcked() {
	n.ackMu.Lock()
	if !n.ackDirty {
		n.ackMu.Unlock()
		return
	}
	var b strings.Builder
	for k, v := range n.acked {
		fmt.Fprintf(&b, "%d %d %d\n", k.shard, k.member, v)
	}
	n.ackDirty = false
	n.ackMu.Unlock()
	path := n.cfg.Dir + "/acked"
	if err := os.WriteFile(path+".tmp", []byte(b.String()), 0o600); err == nil {
		err = os.Rename(path+".tmp", path)
		if err != nil {
			n.log.Warn("acknowledgement table not saved", "err", err)
		}
	}
}

// loadAcked reads the acknowledgement table.
func loadAcked(dir string) (map[ackKey]uint64, error) {
	out := map[ackKey]uint64{}
	f, err := os.Open(dir + "/acked")
	if os.IsNotExist(err) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 3 {
			continue
		}
		sh, e1 := strconv.Atoi(fs[0])
		m, e2 := strconv.ParseUint(fs[1], 10, 64)
		v, e3 := strconv.ParseUint(fs[2], 10, 64)
		if e1 != nil || e2 != nil || e3 != nil {
			continue // a torn line of a crash mid-write: the rest still counts
		}
		out[ackKey{sh, m}] = v
	}
	return out, sc.Err()
}

// askRejoinAll asks every other member once; true when all answered (or
// one replaced this node), so nothing is left to ask.
func (n *Node) askRejoinAll() bool {
	lasts := make([]uint64, len(n.shards))
	for i, s := range n.shards {
		lasts[i] = s.st.lastIndexNow()
	}
	answered := 0
	for id, addr := range n.cfg.Peers {
		if id == n.cfg.NodeID {
			continue
		}
		done, err := n.tr.askRejoin(addr, lasts)
		if err != nil {
			continue
		}
		if done {
			n.log.Warn("this node holds less than it once acknowledged (its data was lost): it asked to be replaced in every shard and will catch up from snapshots", "by", id)
			return true
		}
		answered++
	}
	return answered == len(n.cfg.Peers)-1
}

// rejoinLoop asks again the members that did not answer at start.
func (n *Node) rejoinLoop() {
	defer n.wg.Done()
	backoff := 100 * time.Millisecond
	for !n.askRejoinAll() {
		select {
		case <-n.stop:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// replaceMember replaces member id in every shard (see the file comment)
// if it holds less, in some shard, than it acknowledged here; it reports
// whether it did.
func (n *Node) replaceMember(id uint64, lasts []uint64) bool {
	if id == n.cfg.NodeID || len(lasts) != len(n.shards) {
		return false
	}
	lost := -1
	n.ackMu.Lock()
	for i, last := range lasts {
		if n.acked[ackKey{i, id}] > last {
			lost = i
			break
		}
	}
	n.ackMu.Unlock()
	if lost < 0 {
		return false
	}
	addr := n.tr.peerAddr(id)
	for _, s := range n.shards {
		s.do(func() {
			// Removed first, then added back by the leader that applies the
			// removal (applyConfChange): only a new member's progress starts
			// from nothing; a joint remove-and-add would keep the old one.
			cc := &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: pb.ConfChangeRemoveNode.Enum(), NodeId: proto.Uint64(id)}},
				Context: []byte(replacePrefix + addr)}
			if !slices.Contains(s.st.votersNow(), id) {
				cc = addMember(id, addr)
			}
			if err := s.rn.ProposeConfChange(cc); err != nil {
				s.log.Warn("replace member: proposal dropped", "member", id, "err", err)
			}
		})
	}
	n.ackMu.Lock()
	for i := range lasts {
		delete(n.acked, ackKey{i, id}) // its new incarnation starts over
	}
	n.ackDirty = true
	n.ackMu.Unlock()
	n.log.Warn("a member holds less than it acknowledged (its data was lost): replacing it in every shard", "member", id, "shard", lost)
	return true
}

// askRejoin asks the node at addr whether this one lost data (and so is
// replaced); lasts are this node's last log index per shard.
func (t *transport) askRejoin(addr string, lasts []uint64) (bool, error) {
	c, _, err := t.dial(addr, kindRejoin)
	if err != nil {
		return false, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(lasts)))
	for _, l := range lasts {
		b = binary.LittleEndian.AppendUint64(b, l)
	}
	if _, err := c.Write(b); err != nil {
		return false, err
	}
	var r [1]byte
	if _, err := io.ReadFull(c, r[:]); err != nil {
		return false, err
	}
	return r[0] == 1, nil
}

// readLasts reads a rejoin request's last indexes.
func readLasts(r io.Reader) ([]uint64, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	k := binary.LittleEndian.Uint32(h[:])
	if k > 1024 {
		return nil, fmt.Errorf("rejoin request for %d shards", k)
	}
	b := make([]byte, 8*k)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	out := make([]uint64, k)
	for i := range out {
		out[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return out, nil
}
