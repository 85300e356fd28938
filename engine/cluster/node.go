package cluster

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/wal"
)

// Config configures a node.
type Config struct {
	NodeID     uint64 // this node's id, 1..; unique in the cluster
	RaftListen string // address the other nodes reach this one at
	// RaftListener, if set, is the listener of RaftListen, bound by the
	// caller (socket activation, or a test that holds its port); the node
	// closes it when it closes. Otherwise Start listens on RaftListen.
	RaftListener net.Listener
	Peers        map[uint64]string // raft addresses of the cluster's members, this node's included; for a new cluster they are its first members
	// Join: this node is not among the first members; it waits until a
	// member adds it (AddNode) and then catches up from a snapshot.
	Join    bool
	APIAddr string // this node's client API address, told to the others (forwarding)
	// Version names the build this node runs, for GET /cluster (a rolling
	// upgrade shows which member runs what); "" leaves it out.
	Version string
	Shards  int    // shards of the cluster; fixed when it is created (default 8)
	Dir     string // the node's data directory
	Key     []byte // the cluster key (at least 16 bytes): authenticates nodes to each other
	// AcceptKeys are other cluster keys (at least 16 bytes each) this node
	// accepts from its peers and in receipt handles, and never uses
	// itself: for rotating the key with no downtime (keys.go).
	AcceptKeys [][]byte
	// TLS, if set, runs every connection between nodes (Raft, forwarded
	// requests, snapshots, membership) over mutual TLS, with the key
	// handshake inside it: the accepting node is the TLS server, the
	// dialing one the client, with ServerName the dialed address's host
	// unless the configuration names one. It must present this node's
	// certificate (Certificates, or GetCertificate and
	// GetClientCertificate) and verify the other's: ClientAuth
	// tls.RequireAndVerifyClientCert with ClientCAs, and RootCAs. Nil:
	// plain TCP, authenticated by the key but not encrypted.
	TLS *tls.Config
	// Engine is the template of every shard's broker options (Dir,
	// Replica, HandleSecret and Logger are set per shard).
	Engine engine.Options
	// SyncAlways makes an entry's acknowledgement wait for its fsync (the
	// broker's --sync always); otherwise the log's own sync mode applies.
	SyncAlways bool
	// FileFlush makes each shard's log flush its own files (fdatasync), as
	// a single broker does. By default, with SyncAlways on linux and the OS
	// file system, the node's logs share one flush of the file system
	// holding Dir (syncfs; wal.SharedSyncFS): the flushes its shards ask
	// for at the same time are one.
	FileFlush bool
	// ProposalHold is how long a leader may hold a proposal nobody waits
	// for (a receive's records, an expiry) so that it goes to Raft with the
	// next one (hold.go); default DefaultProposalHold, negative: none.
	ProposalHold time.Duration
	// ReadLeaseTicks is how many ticks of time a member helps nobody else
	// lead after it last heard from its leader, and so, by two thirds of
	// it, how long a confirmed lead answers receives without a new round
	// (lease.go); default DefaultReadLeaseTicks, negative: no leases (a
	// round before every receive), at most ElectionTicks/2.
	ReadLeaseTicks int
	Tick           time.Duration // Raft tick; default 50 ms
	ElectionTicks  int           // ticks without a leader before an election; default 10
	Logger         *slog.Logger

	// bootID, if set (tests), stands for the machine's boot id
	// (votehold.go, invariant 5).
	bootID func() string
}

// ErrNoLeader: the queue's shard has no leader this node knows of right
// now (an election is running). Retryable.
var ErrNoLeader = errors.New("cluster: the shard has no leader yet") // also /healthz's, where no queue is involved (console2 audit)

// Node is one node of a cluster: a member of every shard's Raft group.
type Node struct {
	cfg    Config
	log    *slog.Logger
	tr     *transport
	shards []*shard
	ticks  []chan struct{}
	stop   chan struct{}
	wg     sync.WaitGroup

	refused   atomic.Int64 // handshakes refused (wrong or missing key)
	holdUntil atomic.Int64 // Unix ns: moves between queues are held until then (holdmoves.go)
	zeroSince atomic.Int64 // Unix ns: shard 0's voters here unchanged since (start, or its last change; memberorder.go)
	holds     holds        // the holds behind holdUntil
	snapshots atomic.Int64 // snapshots installed on this node
	forwarded atomic.Int64 // requests forwarded to a leader and answered

	// otherCount: a member spoke of a shard this node does not have, or
	// asked with another shard count (shardCountDiffers); the last such
	// error, for Health.
	otherCount     atomic.Pointer[error]
	otherCountAt   atomic.Int64 // Unix ns of its last log line
	otherCountSeen atomic.Int64 // Unix ns it was last seen
	// Dead-letter hops this node's leaders made to other shards
	// (deadletter.go): batches stored, and batches the hop gave up on.
	hopsStored, hopsFailed     atomic.Int64
	relaysStored, relaysFailed atomic.Int64 // topic deliveries (deadletter.go Move)
	relaysDropped              atomic.Int64 // topic deliveries to a deleted queue (Move)

	// Faults the tests inject into dead-letter moves served here
	// (deadletter.go): so many requests are dropped unread, or stored and
	// then left unanswered.
	testDropMoves, testMuteMoves atomic.Int32
	moveDials                    atomic.Int64 // move connections dialed (deadletter.go), for tests

	fwd        fwdPool
	fwdActive  atomic.Int64 // forwarded requests running here, answer not yet written (serveForward; Close waits)
	moves      movePool     // idle move connections (deadletter.go)
	fwdWatch   fwdWatch     // forwards under way, cut short when their shard's lead moves (forward_moved.go)
	fwdHandler atomic.Pointer[fwdHandler]

	ackMu    sync.Mutex
	acked    map[ackKey]uint64 // guarded by ackMu: the highest index each member acknowledged, per shard (rejoin.go)
	ackDirty bool              // guarded by ackMu
	// replacing (guarded by ackMu): per shard and member, how far a
	// replacement went here: replaceRemoved once its removal applied,
	// replaceReadded once the member was added back (rejoin.go).
	replacing     map[ackKey]replaceMark
	peerDowns     map[uint64]uint64    // guarded by ackMu: each member's Raft connections that ended here (peerDown; rejoin.go replaceMark)
	replaceLogged map[uint64]time.Time // guarded by ackMu: when a replacement of a member last logged at Warn (rejoin.go)
	acks          atomic.Uint64        // entries members acknowledged to this node's leaders, summed (Activity)
	unlisted      atomic.Bool          // the members reached do not list this node (addresses.go, checkListed)

	bookMu sync.Mutex
	book   map[uint64]string // guarded by bookMu: the members' raft addresses (members.go)
	gone   map[uint64]bool   // guarded by bookMu: members this node saw removed, not added back (members.go)
	// guarded by bookMu: removals seen while some shard here had no
	// configuration yet, settled once every shard has one (settleRemovals)
	maybeGone map[uint64]bool

	diskFull atomic.Bool // this node's disk is full (handoff.go)
	leaving  atomic.Bool // this node hands its leads over to shut down (transfer.go); never cleared
	// removing: when this node was last asked to remove itself from a
	// shard it led (unix ns; members.go): for removingFor after it, its
	// forwards are not cut for a silent leader (forward_moved.go)
	removing atomic.Int64
	// rejoinLeaving: this node hands its leads over to be replaced
	// (rejoin.go, rejoinLater) since rejoinSince (unix ns); cleared when
	// its question ends, or rejoinLeavingFor on.
	rejoinLeaving atomic.Bool
	rejoinSince   atomic.Int64
	voteHeld      atomic.Bool  // this node grants no vote until it is replaced or the cluster is new (votehold.go)
	rejoinRefused atomic.Bool  // every member refused to replace this node, which holds its vote: it asks again slowly (rejoin.go)
	rejoinPasses  atomic.Int64 // rejoin questions asked, to start each at another member (rejoin.go)
	replacedTimes atomic.Int64 // answers that this node was replaced in every shard (rejoin.go)
	handoffs      atomic.Int64
	stateMu       sync.Mutex
	peerStates    map[uint64]peerState // guarded by stateMu: what peers last said of their disks (handoff.go)
	// lostPower: this node started after its machine restarted under a
	// run with --sync interval or none, and was not replaced since
	// (votehold.go, invariant 5).
	lostPower atomic.Bool
	// powerLostPeers (guarded by ackMu): when each member last answered
	// that it lost power too (rejoinPowerLost; votehold.go, invariant 5).
	powerLostPeers map[uint64]time.Time
	// powerLostLed: this node voted again with lostPower set and has
	// known a leader of every shard since (notePowerLostLed).
	powerLostLed atomic.Bool

	flushFS *wal.SharedSyncFS // the shards' logs' shared flush, or nil (Config.FileFlush)
}

// Start opens the node's shards and joins the cluster.
func Start(cfg Config) (*Node, error) {
	if cfg.NodeID == 0 {
		return nil, errors.New("cluster: node id must be at least 1")
	}
	if cfg.TLS != nil {
		if cfg.TLS.ClientAuth != tls.RequireAndVerifyClientCert {
			return nil, errors.New("cluster: TLS between nodes must verify both ends: ClientAuth must be tls.RequireAndVerifyClientCert")
		}
		cfg.TLS = cfg.TLS.Clone()
		// Connections live long and are never resumed; a ticket sent
		// after the handshake would also sit unread on an idle forward
		// connection, which alive takes for a peer out of step.
		cfg.TLS.SessionTicketsDisabled = true
		cfg.TLS.MinVersion = max(cfg.TLS.MinVersion, tls.VersionTLS13)
	}
	if len(cfg.Key) < 16 {
		return nil, errors.New("cluster: the cluster key must be at least 16 bytes")
	}
	for _, k := range cfg.AcceptKeys {
		if len(k) < 16 {
			return nil, errors.New("cluster: an accepted cluster key must be at least 16 bytes")
		}
	}
	if cfg.Shards <= 0 {
		cfg.Shards = 8
	}
	if cfg.Shards > 1024 {
		return nil, errors.New("cluster: at most 1024 shards")
	}
	if cfg.ProposalHold == 0 {
		cfg.ProposalHold = DefaultProposalHold
	}
	if cfg.Tick <= 0 {
		cfg.Tick = 50 * time.Millisecond
	}
	cfg.Peers = maps.Clone(cfg.Peers) // the caller may change its map
	if cfg.ElectionTicks <= 0 {
		cfg.ElectionTicks = 10
	}
	if cfg.ReadLeaseTicks == 0 {
		cfg.ReadLeaseTicks = min(DefaultReadLeaseTicks, cfg.ElectionTicks/2)
	}
	if cfg.ReadLeaseTicks > cfg.ElectionTicks/2 {
		// A natural election comes after ElectionTicks-1 ticks at the
		// soonest; the quiet must end well before.
		return nil, fmt.Errorf("cluster: a read lease of %d ticks is more than half the election timeout (%d ticks)", cfg.ReadLeaseTicks, cfg.ElectionTicks)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if !cfg.Join {
		if _, ok := cfg.Peers[cfg.NodeID]; !ok {
			return nil, fmt.Errorf("cluster: the members (%v) do not include this node (%d)", keys(cfg.Peers), cfg.NodeID)
		}
	}
	if err := checkShardCount(cfg.Dir, cfg.Shards); err != nil {
		return nil, err
	}
	if err := checkNodeID(cfg.Dir, cfg.NodeID); err != nil {
		return nil, err
	}
	ln := cfg.RaftListener
	var err error
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.RaftListen); err != nil {
			return nil, fmt.Errorf("cluster: listen %s: %w", cfg.RaftListen, err)
		}
	}
	cfg.RaftListener = nil // the node owns it now
	n := &Node{cfg: cfg, log: cfg.Logger.With("node", cfg.NodeID), stop: make(chan struct{})}
	n.zeroSince.Store(time.Now().UnixNano())
	n.tr = newTransport(cfg.NodeID, cfg.Key, cfg.APIAddr, ln, n.log.With("component", "transport"))
	n.tr.acceptKeys = cfg.AcceptKeys
	n.tr.tls = cfg.TLS
	n.tr.deliver = n.deliver
	n.tr.peerDown = n.peerDown
	n.tr.serveSnap = n.serveSnapshot
	n.tr.acked = n.ackedBy
	n.tr.flags = n.rejoinFlags
	n.tr.rejoin = n.replaceMember
	if n.acked, err = loadAcked(cfg.Dir); err != nil {
		ln.Close()
		return nil, err
	}
	n.tr.refused = func() { n.refused.Add(1) }
	n.tr.forward = n.serveForward
	n.tr.member = n.serveMember
	n.tr.move = n.serveMove
	n.fwd.idle, n.fwd.open, n.fwd.polls = map[uint64][]net.Conn{}, map[uint64]int{}, map[uint64]int{}
	if n.book, err = loadMembers(cfg.Dir); err != nil {
		ln.Close()
		return nil, err
	}
	if n.gone, err = loadRemoved(cfg.Dir); err != nil {
		ln.Close()
		return nil, err
	}
	// The flags name the first members' addresses as this node reaches
	// them; they win over the book, so that a member moved to a new
	// address is reached there once each node is restarted with it (the
	// book learns other members from configuration changes).
	moved := false
	for id, addr := range cfg.Peers {
		if old, ok := n.book[id]; ok && old != addr && id != cfg.NodeID {
			n.log.Warn("a member's raft address changed (--cluster-peers)", "member", id, "was", old, "now", addr)
			moved = true
		}
		n.book[id] = addr
	}
	if moved {
		if err := saveMembers(cfg.Dir, n.book); err != nil {
			ln.Close()
			return nil, err
		}
	}
	if cfg.SyncAlways && !cfg.FileFlush && cfg.Engine.WAL.FS == nil {
		if n.flushFS, err = wal.NewSharedSyncFS(cfg.Dir); err != nil {
			n.log.Info("the shards' logs flush their own files", "why", err)
			n.flushFS = nil
		}
	}
	var voters []uint64
	if !cfg.Join {
		voters = keys(cfg.Peers)
	}
	for i := 0; i < cfg.Shards; i++ {
		s := &shard{n: n, id: i, dir: shardDir(cfg.Dir, i), log: n.log.With("shard", i),
			wake: make(chan struct{}, 1), inbox: make(chan *pb.Message, 4096)}
		if err := s.start(voters); err != nil {
			for _, o := range n.shards {
				o.close()
			}
			if n.flushFS != nil {
				n.flushFS.Close()
			}
			ln.Close()
			return nil, err
		}
		n.shards = append(n.shards, s)
		n.ticks = append(n.ticks, make(chan struct{}, 1))
	}
	n.forgetRemoved() // members.go
	if err := n.holdVoteAtStart(); err != nil {
		for _, s := range n.shards {
			s.close()
		}
		if n.flushFS != nil {
			n.flushFS.Close()
		}
		ln.Close()
		return nil, err
	}
	for id, addr := range n.book {
		n.tr.addPeer(id, addr)
	}
	fresh := true
	for _, s := range n.shards {
		fresh = fresh && s.bootstrapped
	}
	n.tr.start()
	// Whether it lost what it acknowledged (rejoin.go): before the shards
	// run when it starts empty or holds its vote (votehold.go: a --join
	// node added before its first question ended was a voter that held
	// its vote: review R), beside them otherwise, whatever --join says (a
	// node added with --join keeps the flag; an older copy of it went
	// undetected: review, 2026-12-06).
	if !fresh && !n.voteHeld.Load() || !n.askRejoinAll() {
		n.wg.Add(1)
		go n.rejoinLoop()
	}
	n.wg.Add(3)
	go n.ackSaver()
	go n.balanceLoop()
	go n.addressLoop() // addresses.go
	n.wg.Add(1)
	go n.tickLoop()
	for i, s := range n.shards {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			s.run(n.ticks[i], n.stop)
		}()
		s.armCatchUp() // caughtup.go
	}
	n.log.Info("cluster node started", "raft", cfg.RaftListen, "api", cfg.APIAddr, "shards", cfg.Shards, "members", n.Members(), "join", cfg.Join)
	return n, nil
}

func keys(m map[uint64]string) []uint64 {
	out := make([]uint64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// tickLoop ticks every shard at once (their heartbeats go out together).
func (n *Node) tickLoop() {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.Tick)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
			n.notePowerLostLed() // votehold.go
			for _, c := range n.ticks {
				select {
				case c <- struct{}{}:
				default:
				}
			}
		}
	}
}

func (n *Node) deliver(shard int, m *pb.Message) {
	if shard == nodeStateShard {
		n.noteState(m)
		return
	}
	if shard < 0 || shard >= len(n.shards) {
		// A leader's message: the others run a shard this node lacks,
		// so this node is the one that differs (a vote request may come
		// from a node with too many shards, which elects no one there).
		t := m.GetType()
		n.shardCountDiffers(m.GetFrom(), 0, shard, t == pb.MsgApp || t == pb.MsgHeartbeat || t == pb.MsgSnap)
		return
	}
	if m.GetType() == pb.MsgAppResp && !m.GetReject() {
		n.noteAck(shard, m.GetFrom(), m.GetIndex())
	}
	select {
	case n.shards[shard].inbox <- m:
	default: // a shard that cannot keep up drops messages; Raft resends
	}
}

// peerDown: a connection to or from peer ended. A shard whose leader it
// was forgets that leader at once, and the lowest surviving member calls
// an election: a closed connection is a faster signal than missed
// heartbeats (the leader was killed, or its host went away).
// If no leader follows at once, the survivors campaign again in turn
// (failover.go).
func (n *Node) peerDown(peer uint64) {
	if h := testHookPeerDown.Load(); h != nil {
		(*h)(n.cfg.NodeID, peer)
	}
	n.ackMu.Lock()
	if n.peerDowns == nil {
		n.peerDowns = map[uint64]uint64{}
	}
	n.peerDowns[peer]++
	n.ackMu.Unlock()
	for _, s := range n.shards {
		s.do(func() {
			s.rn.ReportUnreachable(peer)
			s.snapshotLost(peer, "the connection to a member installing a snapshot ended")
			st := s.rn.BasicStatus()
			if st.Lead != peer || st.RaftState == raft.StateLeader {
				return
			}
			// What peer sent before its connection ended is in the inbox
			// already (its reader delivers, then calls this); stepped after
			// the forget, its last append or heartbeat would make it this
			// member's leader again, and the shard would wait a whole
			// election timeout for a dead leader (failover.go).
			for k := len(s.inbox); k > 0; k-- {
				s.step(<-s.inbox)
			}
			if st := s.rn.BasicStatus(); st.Lead != peer || st.RaftState == raft.StateLeader {
				return
			}
			s.rn.ForgetLeader()
			s.leaderLost(peer)
		})
	}
}

// confChanged follows membership: the transport learns added members'
// addresses (shard 0's change carries them in its context) and forgets a
// removed member once no shard here holds it. Shards commit a removal one
// at a time, and one that has not yet still needs the member's votes:
// forgotten at shard 0's removal, a live member removed while another was
// down (4 voters, 3 up) took every shard whose removal was still to come
// below its quorum, and they stayed without a leader until the down member
// came back (console2 audit, 2026-12-06).
func (n *Node) confChanged(shard int, e *pb.Entry) {
	if e.GetType() != pb.EntryConfChangeV2 {
		return
	}
	var cc pb.ConfChangeV2
	if proto.Unmarshal(e.GetData(), &cc) != nil {
		return
	}
	for _, c := range cc.GetChanges() {
		switch c.GetType() {
		case pb.ConfChangeAddNode, pb.ConfChangeAddLearnerNode:
			n.replaceStep(shard, c.GetNodeId(), false)
			n.bookMu.Lock()
			delete(n.maybeGone, c.GetNodeId())
			n.bookMu.Unlock()
			if shard == 0 && len(cc.GetContext()) > 0 {
				n.tr.addPeer(c.GetNodeId(), string(cc.GetContext()))
				n.rememberMember(c.GetNodeId(), string(cc.GetContext()), false)
			} else {
				// Added back in any shard: no longer removed. Only shard
				// 0's add cleared the mark, and a node catching up may get
				// that add inside a snapshot (unmarkGone there too).
				n.unmarkGone(c.GetNodeId())
			}
		case pb.ConfChangeRemoveNode:
			if strings.HasPrefix(string(cc.GetContext()), replacePrefix) {
				n.replaceStep(shard, c.GetNodeId(), true)
			}
			if c.GetNodeId() != n.cfg.NodeID && !strings.HasPrefix(string(cc.GetContext()), replacePrefix) {
				n.bookMu.Lock()
				if n.maybeGone == nil {
					n.maybeGone = map[uint64]bool{}
				}
				n.maybeGone[c.GetNodeId()] = true
				n.bookMu.Unlock()
			}
		}
	}
	n.settleRemovals()
}

// settleRemovals forgets the members removed (confChanged) that no shard
// here holds, once every shard has a configuration; before, a shard that
// has none yet may hold them. A removal seen while a shard had none was
// left unsettled for good when that shard's configuration came in a
// snapshot: the removed member was dialled forever (review J,
// 2026-12-06). The snapshot path calls it too (append.go).
func (n *Node) settleRemovals() {
	n.bookMu.Lock()
	ids := make([]uint64, 0, len(n.maybeGone))
	for id := range n.maybeGone {
		ids = append(ids, id)
	}
	n.bookMu.Unlock()
	for _, id := range ids {
		if n.inAnyShard(id) {
			continue // still a member somewhere, or a shard may hold it
		}
		n.bookMu.Lock()
		delete(n.maybeGone, id)
		n.bookMu.Unlock()
		n.tr.removePeer(id)
		n.forgetForwards(id) // after removePeer: fwdPut and movePut check it
		n.forgetMoves(id)
		n.rememberMember(id, "", true)
		n.forgetAcks(id)
	}
}

// inAnyShard reports whether some shard's configuration here holds id,
// or may: a shard with no configuration yet (catching up) may. A node
// that joined replayed an old removal in one shard while its others knew
// no members yet, took a live member for removed for good, and never
// sent it anything: every shard it led ran a voter short (churn audit,
// 2026-12-06).
func (n *Node) inAnyShard(id uint64) bool {
	for _, s := range n.shards {
		if m := s.st.membersNow(); len(m) == 0 || slices.Contains(m, id) {
			return true
		}
	}
	return false
}

// unmarkGone forgets that id was removed: it is a member again. The
// address loop (addresses.go) then finds its address.
func (n *Node) unmarkGone(id uint64) {
	n.bookMu.Lock()
	defer n.bookMu.Unlock()
	if !n.gone[id] {
		return
	}
	delete(n.gone, id)
	if err := saveRemoved(n.cfg.Dir, n.gone); err != nil {
		n.log.Warn("the removed members could not be saved", "err", err)
	}
}

// ShardOf returns the shard a queue lives in.
// It is the configured count, not the shards opened so far: a shard's
// broker asks while it opens (engine/topic_relay.go, relayed).
func (n *Node) ShardOf(queue string) int {
	return int(xxhash.Sum64String(queue) % uint64(n.cfg.Shards))
}

// Shards returns the number of shards.
func (n *Node) Shards() int { return n.cfg.Shards }

// Broker returns this node's broker of a shard (a replica: only the
// leader's takes changes). Nil while the shard is rebuilt.
func (n *Node) Broker(shard int) *engine.Broker { return n.shards[shard].broker() }

// Route says where a request for a queue goes: this node's broker when it
// leads the queue's shard and takes changes, else the leader's node id (to
// Forward to), or ErrNoLeader.
func (n *Node) Route(queue string) (b *engine.Broker, leader uint64, err error) {
	s := n.shards[n.ShardOf(queue)]
	if s.ready.Load() {
		if b := s.broker(); b != nil {
			return b, 0, nil
		}
	}
	lead := s.lead.Load()
	if lead == 0 || lead == n.cfg.NodeID {
		return nil, 0, ErrNoLeader
	}
	return nil, lead, nil
}

// ReleaseMemory gives back to the operating system what the shard brokers
// hold beyond their needs (the daemon calls it when idle).
func (n *Node) ReleaseMemory() {
	for _, s := range n.shards {
		if b := s.broker(); b != nil {
			b.ReleaseStorageMemory()
		}
	}
	debug.FreeOSMemory() // once for the node: it was once per shard, 8 full collections
}

// Activity is a number that changes while the node replicates: entries
// appended to its shards' logs, entries its followers acknowledged, and
// snapshots installed. A node catching a follower up, or catching up
// itself, serves no client request and is busy all the same (smqd's idle
// memory trim counts this as traffic).
func (n *Node) Activity() uint64 {
	v := n.acks.Load() + uint64(n.snapshots.Load())
	for _, s := range n.shards {
		last, _ := s.st.LastIndex()
		v += last
	}
	return v
}

// Leading reports whether this node leads a shard and takes its changes.
func (n *Node) Leading(shard int) bool { return n.shards[shard].ready.Load() }

// NodeID returns this node's id.
func (n *Node) NodeID() uint64 { return n.cfg.NodeID }

func (n *Node) closed() bool {
	select {
	case <-n.stop:
		return true
	default:
		return false
	}
}

// Health is nil while this node can serve every shard: each has a leader
// (this node or one it can forward to), this node caught up with each
// (caughtup.go), and no shard loop failed.
func (n *Node) Health() error { return n.healthOf(true) }

// LeadersReachable is Health without the wait for catch-up: each shard has
// a leader this node leads or forwards to. A cluster backup, which reads
// every shard from its leader, needs no more.
func (n *Node) LeadersReachable() error { return n.healthOf(false) }

func (n *Node) healthOf(caughtUp bool) error {
	err := n.health(caughtUp)
	if err != nil && n.unlisted.Load() {
		return fmt.Errorf("%w (%v)", ErrUnlisted, err)
	}
	return err
}

// ErrUnlisted: the members this node reaches no longer list it.
var ErrUnlisted = errors.New("cluster: the members this node reaches do not list it: it was removed (smqctl cluster rm) while it was away; stop it, or add it back on an empty directory with --join (smqctl cluster add)")

func (n *Node) health(caughtUp bool) error {
	if e := n.otherCount.Load(); e != nil && time.Since(time.Unix(0, n.otherCountSeen.Load())) < otherCountHealth {
		return *e
	}
	for _, s := range n.shards {
		if f := s.failure.Load(); f != nil {
			return f
		}
		if s.ready.Load() {
			continue
		}
		lead := s.lead.Load()
		if lead == 0 || lead == n.cfg.NodeID {
			return fmt.Errorf("shard %d: %w", s.id, ErrNoLeader)
		}
		// Forwarding dials the leader's raft address: one known from the
		// handshakes of its own connections alone (its API address) is not
		// enough. A node that joined knowing no member's address answered
		// /healthz 200 while it forwarded nothing (members audit,
		// 2026-12-06).
		if _, ok := n.tr.peerAPI(lead); !ok || n.tr.peerAddr(lead) == "" {
			return fmt.Errorf("shard %d: leader %d not reachable", s.id, lead)
		}
		if err := n.fwdReach(lead); err != nil {
			return fmt.Errorf("shard %d: leader %d not reachable: %w", s.id, lead, err)
		}
		if err := s.catchUpHealth(lead); err != nil && caughtUp {
			return err
		}
	}
	if n.voteHeld.Load() {
		return ErrVoteHeld // votehold.go
	}
	return nil
}

// Close stops the node: every shard's loop, the transport, the brokers.
func (n *Node) Close() error {
	select {
	case <-n.stop:
		return nil
	default:
	}
	close(n.stop)
	n.wg.Wait()
	// No loop commits anything now: fail the operations still waiting for
	// a commit or a confirmation (ErrNotLeader, retryable) and wake the long polls, so that
	// the requests other nodes forwarded here end, and with them the
	// transport's connections, which tr.close waits for.
	for _, s := range n.shards {
		s.failConfirms() // receives waiting for their lead's confirmation (confirm.go)
		if b := s.broker(); b != nil {
			b.SetLeader(false, 0)
		}
	}
	// Their answers first (after a hand-over, most say "not run here, send
	// it on"): the transport closed the connections at once, 3-20 ms
	// before those answers, and the forwarding nodes told their clients
	// "may or may not have run" for requests that had not (drain audit,
	// 2026-12-06). Bounded: a handler stuck in I/O does not hold the stop.
	for until := time.Now().Add(fwdAnswerWait); n.fwdActive.Load() > 0 && time.Now().Before(until); {
		time.Sleep(time.Millisecond)
	}
	n.closeForwards()
	n.closeMoves()
	n.tr.close()
	var errs []error
	flushed := true
	for _, s := range n.shards {
		// A shard without a broker is restarting after its storage
		// failed (restart.go): its failed log was retired, maybe never
		// made durable again (Resync), and s.close closes nothing.
		flushed = flushed && s.broker() != nil
		if err := s.close(); err != nil {
			flushed = false
			if !errors.Is(err, engine.ErrClosed) {
				errs = append(errs, err)
			}
		}
	}
	if n.flushFS != nil {
		errs = append(errs, n.flushFS.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if flushed {
		n.endUnsyncedRun() // every log flushed and closed (votehold.go, invariant 5)
	}
	return nil
}

// fwdAnswerWait bounds how long Close waits for the forwarded requests
// running here to write their answers.
const fwdAnswerWait = 2 * time.Second

// replacePrefix marks the context of a removal that is half of a
// replacement: the leader adds the member back once it is applied.
const replacePrefix = "replace:"

func addMember(id uint64, addr string) *pb.ConfChangeV2 {
	return &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: pb.ConfChangeAddNode.Enum(), NodeId: proto.Uint64(id)}},
		Context: []byte(addr)}
}
