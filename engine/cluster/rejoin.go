package cluster

// A member that lost its data (its directory was wiped, or put back from an
// older copy: a volume snapshot rolled back, a backup of the directory)
// must not take part as if nothing happened: Raft assumes a member never
// loses what it acknowledged or its vote, and the leaders still count it
// as holding their entries. A leader's progress for it never goes below
// what it acknowledged, so an older copy was not even sent those entries
// again: it stayed behind until the lead moved. So every node, at every
// start, asks the other members whether it lost anything; if so it is
// replaced in every shard — removed and added back, which gives it a
// fresh place in each group — and catches up (from snapshots, or from the
// log where the leader still has it).
//
// A wiped node starts like a new one (its shards bootstrap a fresh log)
// and asks before its shards run. A node with data asks beside them, so
// that a restart does not wait for a member that is down; until the answer
// comes, an older copy may still vote with its older vote. With --sync
// always a follower acknowledges only what it flushed, so only a node
// that lost its files is replaced. With interval or none it acknowledges
// what it has written to its log's files, maybe not flushed (append.go,
// invariant 4): a power loss or a kernel crash can lose acknowledged
// entries too (a kill -9 cannot), and such a node holds its vote at its
// next start and is replaced (votehold.go, invariant 5), as Raft
// requires. What can replace a node needlessly is an acknowledged tail
// that a later leader overwrote with a shorter log (entries a majority
// never held; the table keeps indexes, not terms): it then catches up
// from a snapshot.
//
// Telling a wiped member from a new one. Every node remembers, per shard
// and member, the highest log index the member acknowledged to it as a
// leader (noteAck; written to <dir>/acked every few seconds). The asked
// node answers with what the asking node acknowledged to it; a member that
// once acknowledged more than it now holds lost data. A member of a new
// cluster that merely starts later than the others has acknowledged
// nothing it does not hold, so it is not replaced (it catches up from the
// log).
//
// The asking node compares, not the asked one: its shards run while it
// asks (a member that does not answer is asked again later), so it keeps
// acknowledging entries, and an acknowledgement sent after its last index
// was read but counted before the question was answered made a new member
// look as if it had lost data (seen in TestClusterPowerLoss: a member of
// a new cluster replaced at its first start). The asking node reads its
// last indexes after the answer came, so every acknowledgement of its own
// run that the answer counts lies within them.
//
// Requests (kind 2): shards u32; answered with the acknowledged index u64
// per shard; then the asking node's verdict u32 (0: nothing lost, i+1: it
// lost data in shard i, replace it), answered with one byte: rejoinNot,
// rejoinReplaced, or rejoinLater (a node before 2026-12-06 never answers
// that, and its askers read it as not replaced).
//
// A member is not replaced while it leads a shard (rejoinLater). The
// replacement's removal is applied by the shard's leader, which then adds
// the member back; a member that led the shard stepped down at its own
// removal, and no one added it back: the shard kept one voter less, with
// no word of it (review, 2026-12-06: 2 runs of 5 when the member asked
// while it led). An asker told rejoinLater hands its leads over (and takes
// none until its question is answered), then asks again.

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
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
		n.acks.Add(index - n.acked[k])
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
// one replaced this node), so nothing is left to ask. The members are
// those of the shards' configurations as this node knows them and those
// --cluster-peers names (a wiped node knows no others), less this node and
// those removed. It counted the answers against --cluster-peers less one
// for itself, which a --join node's flags do not name: its question never
// ended (review, 2026-12-06).
func (n *Node) askRejoinAll() bool {
	lasts := func() []uint64 {
		out := make([]uint64, len(n.shards))
		for i, s := range n.shards {
			out[i] = s.st.lastIndexNow()
		}
		return out
	}
	answered, asked := 0, 0
	held := n.voteHeld.Load()
	// For the vote hold (votehold.go): answers from copies without
	// history, itself counted; whether any had history (its own too: a
	// held node that received entries since is in no new cluster);
	// whether any member has this node as a voter.
	fresh, history, voter := 1, false, false
	if slices.ContainsFunc(n.shards, func(s *shard) bool { return s.st.hasHistory() }) {
		fresh, history = 0, true
	}
	n.bookMu.Lock()
	gone := maps.Clone(n.gone)
	n.bookMu.Unlock()
	ids := n.Members()
	for id := range n.cfg.Peers {
		if !slices.Contains(ids, id) {
			ids = append(ids, id) // a wiped node's shards know no members yet
		}
	}
	// Each question starts at the next member: a held node stops at the
	// first "later" (below), and one member that cannot get it replaced
	// (it reaches no leader) must not be the only one asked.
	k := int(n.rejoinPasses.Add(1)) % max(len(ids), 1)
	ids = slices.Concat(ids[k:], ids[:k])
	members := len(ids)
	if !slices.Contains(ids, n.cfg.NodeID) {
		members++
	}
	for _, id := range ids {
		addr := cmp.Or(n.tr.peerAddr(id), n.cfg.Peers[id])
		if id == n.cfg.NodeID || gone[id] || addr == "" {
			continue
		}
		asked++
		decide := func(acked []uint64, flags []byte) uint32 {
			// A majority lost power (votehold.go, invariant 5): before
			// the verdict, which would ask to be replaced.
			if n.notePowerLost(id, anyFlag(flags, rejoinPowerLost) >= 0, members) && held {
				n.releaseVote(powerLostMajorityWhy)
				held = false
			}
			for i, f := range flags {
				switch {
				case i >= len(n.shards):
				case f&rejoinRepaired != 0:
					n.shards[i].repairedPeer.Store(id) // votehold.go, invariant 4
				default:
					n.shards[i].repairedPeer.CompareAndSwap(id, 0) // its exception ended
				}
			}
			return n.rejoinVerdict(held, acked, lasts(), flags)
		}
		answer, flags, err := n.tr.askRejoin(id, addr, len(n.shards), decide)
		if err != nil {
			continue
		}
		if flags == nil || anyFlag(flags, rejoinHistory) >= 0 {
			history = true // a member of an earlier build: taken to have it
		} else {
			fresh++
		}
		voter = voter || anyFlag(flags, rejoinVoter) >= 0
		switch answer {
		case rejoinReplaced:
			n.replacedTimes.Add(1)
			n.log.Warn("this node holds less than it once acknowledged, or may (it started empty in a cluster with history): it asked to be replaced in every shard and will catch up from snapshots", "by", id)
			n.releaseVote(replacedWhy)
			n.rejoinDone()
			return true
		case rejoinLater:
			// It leads a shard: hand every lead over first, then ask again.
			if !n.rejoinLeaving.Swap(true) {
				n.rejoinSince.Store(time.Now().UnixNano())
				if held {
					n.log.Warn("this node holds its vote (it started empty, or may have lost data): it is replaced once the shards have leaders", "by", id)
				} else {
					n.log.Warn("this node holds less than it once acknowledged (its data was lost): handing its leads over before it is replaced", "by", id)
				}
				n.sendState()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			n.handOverAll(ctx)
			cancel()
			if held {
				// Its replacement waits for the shards' leaders: every
				// other member would wait for them too, 3 s each (a held
				// node's start took that long per member: review Q).
				return false
			}
			continue
		}
		answered++
	}
	switch {
	case !held:
	case n.powerLostMajority(members): // a cluster of one
		n.releaseVote(powerLostMajorityWhy)
	case !n.cfg.Join && !history && 2*fresh > members:
		n.releaseVote("a majority of the members answered, none with history: a new cluster")
	case n.cfg.Join && answered == asked && !voter:
		n.releaseVote("every member answered, none with this node in a shard's configuration: a new member")
	}
	if answered == asked {
		if n.voteHeld.Load() {
			// Refused (a removed member): it may be added back while it
			// runs (smqctl cluster add), a voter then, which must be
			// replaced to vote: it asks again, slowly (rejoinLoop). Its
			// question ended here, and it stayed a voter that never voted
			// until its next start (review Q,
			// TestClusterRemovedMemberAddedBackVotes).
			if !n.rejoinRefused.Swap(true) {
				n.log.Warn("this node's replacement was refused: no member has it as a voter (removed, or a replacement cut short while it was down): it keeps holding its vote and asks again every 10 s; if it should be a member, add it back (smqctl cluster add)", "members", ids)
			}
			return false
		}
		n.rejoinRefused.Store(false)
		n.rejoinDone()
		return true
	}
	n.rejoinRefused.Store(false)
	return false
}

// rejoinRefusedEvery is how often a node that holds its vote asks again
// once every member refused to replace it (a removed member).
const rejoinRefusedEvery = 10 * time.Second

// rejoinVerdict is the verdict on an answer (the file comment): i+1 if
// this node holds less in shard i than it acknowledged there (lasts, read
// after the answer), else, while it holds its vote (votehold.go,
// invariant 2), a request to be replaced if the member's copy has history
// (a node started with --join: if it is a voter there), else 0. To a
// member of an earlier build (flags nil) a node without --join names
// shard 0 as lost, which that build replaces it for; one with --join asks
// nothing (such a build would add a node it does not know).
func (n *Node) rejoinVerdict(held bool, acked, lasts []uint64, flags []byte) uint32 {
	if i := lostShard(acked, lasts); i >= 0 || !held {
		return uint32(i + 1)
	}
	switch {
	case flags == nil && !n.cfg.Join:
		return 1
	case flags == nil:
		return 0
	case n.cfg.Join && anyFlag(flags, rejoinVoter) >= 0, !n.cfg.Join && anyFlag(flags, rejoinHistory) >= 0:
		return rejoinReplaceMe
	}
	return 0
}

// releaseVote's reasons: this node was replaced; a majority lost power
// (votehold.go, invariant 5).
const (
	replacedWhy          = "replaced in every shard"
	powerLostMajorityWhy = "a majority of the members lost power under --sync interval or none: what they acknowledged and had not flushed may be lost (docs/operations.md), and holding on would stop the shards for good"
)

// rejoinDone ends what a question left: a node that gave its leads away
// to be replaced (rejoinLater) may lead again.
func (n *Node) rejoinDone() {
	if n.rejoinLeaving.Swap(false) {
		n.sendState()
	}
}

// rejoinLeavingFor is how long a node waits to be replaced without leading:
// a member that answered rejoinLater and then went for good would
// otherwise keep it from ever leading again (review, 2026-12-06). The
// question goes on; the next rejoinLater starts another wait.
const rejoinLeavingFor = time.Minute

// The answers to a rejoin question.
const (
	rejoinNot      byte = 0 // nothing lost, or not replaced (a removed member)
	rejoinReplaced byte = 1
	rejoinLater    byte = 2 // it leads a shard here: hand the leads over, then ask again
)

// rejoinLoop asks again the members that did not answer at start.
func (n *Node) rejoinLoop() {
	defer n.wg.Done()
	backoff := 100 * time.Millisecond
	for !n.askRejoinAll() {
		if n.rejoinLeaving.Load() && time.Since(time.Unix(0, n.rejoinSince.Load())) > rejoinLeavingFor {
			if !n.voteHeld.Load() { // a held node leads nothing anyway (votehold.go)
				n.log.Warn("this node waited a minute to be replaced without an answer: it may lead again meanwhile")
			}
			n.rejoinDone()
		}
		select {
		case <-n.stop:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
		if n.rejoinRefused.Load() {
			backoff = rejoinRefusedEvery
		}
	}
}

// ackedBy returns, per shard, the highest index member id acknowledged
// here (zeros for a request of another shard count: nothing to compare).
func (n *Node) ackedBy(id uint64, shards int) []uint64 {
	out := make([]uint64, shards)
	if shards != len(n.shards) {
		n.shardCountDiffers(id, shards, 0, false)
		return out
	}
	n.ackMu.Lock()
	for i := range out {
		out[i] = n.acked[ackKey{i, id}]
	}
	n.ackMu.Unlock()
	return out
}

// lostShard returns the first shard in which a member holds less (lasts)
// than it acknowledged (acked), or -1.
func lostShard(acked, lasts []uint64) int {
	for i := range min(len(acked), len(lasts)) {
		if acked[i] > lasts[i] {
			return i
		}
	}
	return -1
}

// replaceMember replaces member id, which found that it holds less in
// shard lost than it acknowledged here, in every shard (see the file
// comment); it answers rejoinReplaced if it did.
func (n *Node) replaceMember(id uint64, lost int) byte {
	if id == n.cfg.NodeID || lost < replaceAsked || lost >= len(n.shards) {
		return rejoinNot
	}
	for _, s := range n.shards {
		if s.lead.Load() == id {
			n.log.Info("a member that lost data leads a shard: it is replaced once it has handed its leads over", "member", id, "shard", s.id)
			return rejoinLater
		}
	}
	n.bookMu.Lock()
	gone := n.gone[id]
	n.bookMu.Unlock()
	// Asked by a node that holds its vote (replaceAsked), it is replaced
	// only in the shards it is a voter of (or whose replacement is under
	// way): an add cut short is the operator's to finish, not this one's.
	in := func(s *shard) bool {
		return lost != replaceAsked || n.replaceState(s.id, id) != 0 || slices.Contains(s.st.votersNow(), id)
	}
	if !slices.ContainsFunc(n.shards, in) {
		// Asked by a node that holds its vote and is no member here (one
		// started with --join and not added yet, or removed): replacing
		// it would add it.
		return rejoinNot
	}
	if gone {
		// Removed by the operator and started again: replacing it would
		// add it back (below). Only AddMember does that.
		n.log.Log(context.Background(), n.replaceLevel(id), "a removed member asked to be replaced: refused (add it back with smqctl cluster add, on an empty directory)", "member", id)
		return rejoinNot
	}
	addr := n.tr.peerAddr(id)
	level := n.replaceLevel(id)
	// Proposed in every shard whose replacement has not been seen through
	// here, then answered "replaced" only once it has been in every shard.
	// A proposal can be lost (no leader known here, a leader handing its
	// lead over, a leader that fails before it commits, a re-add dropped):
	// the member was told it was replaced, asked no more, and stayed
	// unreplaced in that shard, its leader's progress for it above its
	// empty log, so it never caught up there (audit "rejoin", 2026-12-06).
	// Until then it is told to ask again (rejoinLater), and the
	// acknowledgements it lost stay counted, so that the next question
	// finds it again.
	propose := func() {
		for _, s := range n.shards {
			if !in(s) || n.replaceState(s.id, id) == replaceReadded && slices.Contains(s.st.votersNow(), id) {
				continue
			}
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
					s.log.Log(context.Background(), level, "replace member: proposal dropped", "member", id, "err", err)
				}
			})
		}
	}
	done := func() bool {
		for _, s := range n.shards {
			if in(s) && (n.replaceState(s.id, id) != replaceReadded || !slices.Contains(s.st.votersNow(), id)) {
				return false
			}
		}
		return true
	}
	n.ackMu.Lock()
	stale := lost >= 0 && n.replacing[ackKey{lost, id}].state == replaceReadded
	if lost == replaceAsked {
		// A replacement seen through here before the member's Raft
		// connections last ended may be an earlier run's: it was told
		// "replaced", voted, and was emptied again (within replaceStale;
		// a crash-looping node on an empty volume). Every member but the
		// one that answered keeps its mark, and one taken as this
		// question's answered "replaced" at once, proposing nothing: the
		// node voted with an empty log (survive audit, 2026-12-07: with
		// the leader then lost, 160 of 320 acknowledged messages;
		// TestClusterNodeWipedTwiceHoldsItsVoteAgain). A replacement of
		// this run stays, under way or done: the process asking is the
		// one whose connections the mark saw, so a question asked again
		// (the first answer waited 3 s) does not start it over; a
		// connection lost meanwhile costs one replacement more.
		for i := range n.shards {
			if m, ok := n.replacing[ackKey{i, id}]; ok && m.state == replaceReadded && m.downs < n.peerDowns[id] {
				delete(n.replacing, ackKey{i, id})
			}
		}
	}
	for i := range n.shards {
		if m, ok := n.replacing[ackKey{i, id}]; ok && time.Since(m.at) > replaceStale {
			stale = true
		}
	}
	if stale {
		// Its acknowledgements in that shard were forgotten when it was
		// added back, so it lost data again since; or what this node saw
		// of a replacement is old (it may have missed some of it, caught
		// up by a snapshot): a new replacement, from the start.
		for i := range n.shards {
			delete(n.replacing, ackKey{i, id})
		}
	}
	n.ackMu.Unlock()
	if lost == replaceAsked {
		n.log.Log(context.Background(), level, "a member holds its vote (it started empty in a cluster with history, or its machine restarted under --sync interval or none): replacing it in every shard", "member", id)
	} else {
		n.log.Log(context.Background(), level, "a member holds less than it acknowledged (its data was lost): replacing it in every shard", "member", id, "shard", lost)
	}
	propose()
	for deadline := time.Now().Add(3 * time.Second); !done(); {
		if time.Now().After(deadline) {
			n.log.Log(context.Background(), level, "a member that lost data is not replaced in every shard yet: it is told to ask again", "member", id)
			return rejoinLater
		}
		select {
		case <-n.stop: // this node stops: the member asks another
			return rejoinLater
		case <-time.After(20 * time.Millisecond):
		}
	}
	n.ackMu.Lock()
	for i := range n.shards {
		delete(n.replacing, ackKey{i, id})
	}
	n.ackMu.Unlock()
	n.forgetAcks(id) // its new incarnation starts over
	return rejoinReplaced
}

// replaceAsked, as replaceMember's lost shard: the member holds its vote
// and asks to be replaced though no acknowledgement shows a loss
// (votehold.go, invariant 2).
const replaceAsked = -1

// replaceLevel is the level of a replacement's log lines about member id:
// Warn once a minute, Debug between. A member that holds its vote while
// the shards have no leader asks every few seconds, for as long as a
// member is down (votehold.go); each question logged a few Warn lines per
// shard.
func (n *Node) replaceLevel(id uint64) slog.Level {
	n.ackMu.Lock()
	defer n.ackMu.Unlock()
	if time.Since(n.replaceLogged[id]) < time.Minute {
		return slog.LevelDebug
	}
	if n.replaceLogged == nil {
		n.replaceLogged = map[uint64]time.Time{}
	}
	n.replaceLogged[id] = time.Now()
	return slog.LevelWarn
}

// How far a replacement went in a shard, as this node applied it.
const (
	replaceRemoved byte = 1
	replaceReadded byte = 2
)

// replaceMark is a replacement's state in a shard and when it was reached.
type replaceMark struct {
	state byte
	at    time.Time
	downs uint64 // the member's Raft connections ended here when the mark was made (peerDowns)
}

// replaceStale: a replacement this node saw longer ago is taken as over;
// one takes seconds, and a member that missed part of it (it caught up by
// a snapshot, which applies no configuration change) must not take a
// later one for done in the shards where it saw the earlier one through.
const replaceStale = 2 * time.Minute

func (n *Node) replaceState(shard int, id uint64) byte {
	n.ackMu.Lock()
	defer n.ackMu.Unlock()
	if m := n.replacing[ackKey{shard, id}]; time.Since(m.at) <= replaceStale {
		return m.state
	}
	return 0
}

// replaceStep follows a replacement of member id in shard (confChanged):
// its removal applied (removed), or the member added back. Once added
// back, what its former self acknowledged in that shard is forgotten.
func (n *Node) replaceStep(shard int, id uint64, removed bool) {
	k := ackKey{shard, id}
	n.ackMu.Lock()
	defer n.ackMu.Unlock()
	if n.replacing == nil {
		n.replacing = map[ackKey]replaceMark{}
	}
	switch {
	case removed:
		n.replacing[k] = replaceMark{replaceRemoved, time.Now(), n.peerDowns[id]}
	case n.replacing[k].state == replaceRemoved:
		n.replacing[k] = replaceMark{replaceReadded, time.Now(), n.peerDowns[id]}
		delete(n.acked, k)
		n.ackDirty = true
	}
}

// forgetAcks forgets what member id acknowledged here: it was replaced, or
// removed by the operator (added back later on an empty directory, it was
// found to have "lost" what its former self acknowledged and replaced
// again: review, 2026-12-06).
func (n *Node) forgetAcks(id uint64) {
	n.ackMu.Lock()
	for i := range n.shards {
		delete(n.acked, ackKey{i, id})
	}
	n.ackDirty = true
	n.ackMu.Unlock()
}

// askRejoin asks node to, at addr, whether this one lost data (and so is
// replaced); decide gives the verdict from the answer (see the file
// comment, and votehold.go). It asks for the member's flags per shard too
// (rejoinHistory, rejoinVoter); a member of an earlier build closes the
// connection at that question, and is asked again without it: flags is
// then nil.
func (t *transport) askRejoin(to uint64, addr string, shards int, decide func(acked []uint64, flags []byte) uint32) (answer byte, flags []byte, err error) {
	if h := testHookRejoinAsk.Load(); h != nil && !(*h)(t.self, to) {
		return rejoinNot, nil, errors.New("rejoin question dropped (test)")
	}
	for _, withFlags := range []bool{true, false} {
		c, _, err := t.dial(addr, kindRejoin, to)
		if err != nil {
			return rejoinNot, nil, err
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		answer, flags, err := askRejoinOn(c, shards, withFlags, decide)
		c.Close()
		if err != errOlderMember {
			return answer, flags, err
		}
	}
	return rejoinNot, nil, errOlderMember
}

// errOlderMember: the asked member closed the connection at the question
// for its flags (a build before them).
var errOlderMember = errors.New("the member does not answer with its flags")

// testHookRejoinAsk, when set (tests), drops the rejoin questions from a
// node to a member it reports false for.
var testHookRejoinAsk atomic.Pointer[func(from, to uint64) bool]

// The question's flag, the answer's flags and the verdict for the vote
// hold (votehold.go).
const (
	// rejoinWantsFlags, in the question's shard count: answer a byte of
	// flags per shard after the acknowledged indexes.
	rejoinWantsFlags = 1 << 31
	// rejoinHistory: the member's copy of the shard has history.
	rejoinHistory byte = 1
	// rejoinVoter: the asker is a voter of the shard there.
	rejoinVoter byte = 2
	// rejoinRepaired: that member's process started its copy of the
	// shard with --wal-repair, on a damaged log.
	rejoinRepaired byte = 4
	// rejoinPowerLost: that member started after its machine restarted
	// under a run with --sync interval or none, and was not replaced since,
	// nor knew a leader of every shard since it voted again (votehold.go,
	// invariant 5). Set in every shard.
	rejoinPowerLost byte = 8
	// rejoinReplaceMe, as the verdict: replace this node in every shard,
	// though no acknowledgement shows a loss (replaceAsked).
	rejoinReplaceMe = math.MaxUint32
)

// anyFlag returns the first shard whose flags have f, or -1.
func anyFlag(flags []byte, f byte) int {
	for i, v := range flags {
		if v&f != 0 {
			return i
		}
	}
	return -1
}

// askRejoinOn asks over an open connection (askRejoin).
func askRejoinOn(c io.ReadWriter, shards int, withFlags bool, decide func(acked []uint64, flags []byte) uint32) (answer byte, flags []byte, err error) {
	q := uint32(shards)
	if withFlags {
		q |= rejoinWantsFlags
	}
	if _, err := c.Write(binary.LittleEndian.AppendUint32(nil, q)); err != nil {
		return rejoinNot, nil, err
	}
	n := 8 * shards
	if withFlags {
		n += shards
	}
	got := make([]byte, n)
	if k, err := io.ReadFull(c, got); err != nil {
		if withFlags && k == 0 && errors.Is(err, io.EOF) {
			return rejoinNot, nil, errOlderMember
		}
		return rejoinNot, nil, err
	}
	vals := make([]uint64, shards)
	for i := range vals {
		vals[i] = binary.LittleEndian.Uint64(got[8*i:])
	}
	if withFlags {
		flags = got[8*shards:]
	}
	if _, err := c.Write(binary.LittleEndian.AppendUint32(nil, decide(vals, flags))); err != nil {
		return rejoinNot, flags, err
	}
	var r [1]byte
	if _, err := io.ReadFull(c, r[:]); err != nil {
		return rejoinNot, flags, err
	}
	return r[0], flags, nil
}

// serveRejoin answers a rejoin request (the asked side, see the file
// comment).
func (t *transport) serveRejoin(from uint64, c io.ReadWriter) {
	var h [4]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		return
	}
	k := binary.LittleEndian.Uint32(h[:])
	withFlags := k&rejoinWantsFlags != 0
	k &^= rejoinWantsFlags
	if k > 1024 {
		return
	}
	b := make([]byte, 0, 9*k)
	for _, v := range t.acked(from, int(k)) {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	if withFlags {
		b = append(b, t.flags(from, int(k))...)
	}
	if _, err := c.Write(b); err != nil {
		return
	}
	if _, err := io.ReadFull(c, h[:]); err != nil {
		return
	}
	answer := rejoinNot
	switch v := binary.LittleEndian.Uint32(h[:]); {
	case v == rejoinReplaceMe && withFlags:
		answer = t.rejoin(from, replaceAsked)
	case v > 0 && v <= k:
		answer = t.rejoin(from, int(v-1))
	}
	c.Write([]byte{answer})
}
