package cluster

// One shard of a node: a Raft group member (an etcd raft RawNode) and the
// shard's broker, driven by one goroutine (run).
//
// The loop, for every Ready (etcd raft's asynchronous storage writes; no
// Advance):
//  1. a snapshot from the leader is stepped only once its state has been
//     fetched and installed off the loop (snapshot.go);
//  2. the entries and the hard state to persist go to the shard's append
//     worker (append.go) with the messages that vouch for them (an
//     acknowledgement, a vote, the leader's own acknowledgement) as its
//     responses: those leave once the worker's batch is synced (--sync
//     always) or written to the log's files (interval, none);
//  3. the other messages leave at once (a leader sends its appends before
//     its own fsync), less those bump.go drops;
//  4. the committed entries are applied (the broker's records; conf
//     changes) and the apply thread's responses stepped.
//
// Roles. When this member becomes the leader of term T, its broker starts
// taking changes only once every entry before its term's first has been
// applied (ready), so that nothing a previous leader committed is missed.
// When it stops being the leader after taking changes, its broker may hold
// changes that were never committed: a proposal that failed at the
// step-down, or an operation under way then whose records were refused
// (engine.Broker.Diverged). Only then the loop persists the hard state,
// closes the broker without a checkpoint and opens it again (rebuild),
// which folds only committed records (engine/replica.go); it checks again
// on every round while it follows, and before it leads. A broker whose
// every change was committed goes on as a follower: a rebuild loads the
// whole state again (seconds with a large backlog), during which the
// shard's loop answers nobody, and under load that made the leadership
// flap (docs/cluster-benchmarks.md, "Catch-up with 1 KiB bodies").
//
// Owner: run owns the RawNode, the broker pointer's writes and the
// storage's writes; b is also read by request handlers (an atomic pointer).

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/wal"
)

// testHookTick, when set (tests), lets a node's shards tick only while it
// reports true for the node: a node whose time stands still.
var testHookTick atomic.Pointer[func(node uint64) bool]

type shard struct {
	bootstrapped bool // start made a new log (a new cluster's first start)

	n   *Node
	id  int
	dir string
	log *slog.Logger

	b  atomic.Pointer[engine.Broker] // the broker requests use
	rn *raft.RawNode                 // owned by run
	st *raftStorage

	// Proposals queued by the broker (Propose, under a stripe lock) for run.
	pmu      sync.Mutex
	props    [][]byte
	control  []func()      // run these in the loop (peer down, conf changes)
	selfMsgs []*pb.Message // responses of the append worker to this member (append.go)
	held     holding       // guarded by pmu: props held for company (hold.go)
	app      *appender
	wake     chan struct{}
	inbox    chan *pb.Message

	lead      atomic.Uint64 // the leader this member knows (0: none)
	term      atomic.Uint64
	ready     atomic.Bool                 // this member leads and its broker takes changes
	starved   bool                        // the loop: the disk is too full for replicated entries (diskCritical)
	leaderOf  uint64                      // run: the term this member leads, 0 if it does not
	firstOurs uint64                      // run: index of the first entry of leaderOf's term, once seen
	elections atomic.Int64                // elections this member saw won (leader changes)
	lastLead  uint64                      // run
	leadTerm  uint64                      // run: the term lastLead was seen leading in
	proposals atomic.Int64                // proposals handed to Raft (metrics)
	rebuilds  atomic.Int64                // broker reopened from the log (diverged at a step-down)
	restarts  atomic.Int64                // restarts after the log failed (restart.go)
	damage    error                       // owned by run: the failed broker met a damaged body (damaged.go)
	failure   atomic.Pointer[failedShard] // the log failed: the shard waits to restart

	// caughtup.go: whether this member caught up with the leader since its
	// start or its last snapshot install, and the round finding out.
	caughtUp, catching, catchRearm atomic.Bool
	catchTarget                    atomic.Uint64

	installs sync.WaitGroup // snapshots being prepared off the loop
	// run: the last restart (restart.go), for its backoff
	restartedAt  time.Time
	restartDelay time.Duration
	// rebuildsSkipped: step-downs of a ready leader whose every change was
	// committed, so that its broker went on as a follower.
	rebuildsSkipped atomic.Int64
	// giveUp: an export for a member's snapshot found this leader's
	// proposals unsettled (exported); givenUp: the times the loop gave
	// them up for it (giveUpIfAsked).
	giveUp  atomic.Bool
	givenUp atomic.Int64

	// The replication counters of the brokers this shard replaced
	// (retire), so that the metrics stay monotonic across rebuilds.
	statsMu        sync.Mutex
	retiredFailed  uint64        // guarded by statsMu
	retiredDrops   uint64        // guarded by statsMu: ReplicaStats.UnloggedDropped
	retiredLat     wal.Histogram // guarded by statsMu
	installing     *install      // run: a snapshot being prepared off the loop (snapshot.go)
	appendsRefused atomic.Int64  // appends not taken: an install under way, or a disk too full (step)
	readSeq        atomic.Uint64 // read barrier ids (read.go)
	readMu         sync.Mutex
	reads          map[uint64]chan uint64 // guarded by readMu: the read barriers waiting for Raft's answer
	balanceOK      int                    // run: consecutive checks the preferred leader was ready (balance.go)
	handing        *handing               // run: a hand-over of the lead under way (transfer.go)
	noHeir         atomic.Bool            // the last hand-over for a shutdown found no member to hand to (transfer.go)
	heard          map[uint64]time.Time   // run: when each other member last sent this member a message (balance.go)
	activeSince    map[uint64]time.Time   // run: when each other member began to be heard after a silence (balance.go electable)
	snapSent       map[uint64]bool        // run: members sent a snapshot, until they leave the snapshot state (node.go, snapshotOutrun)
	watch          stuckWatch             // run: followers whose acknowledgements stopped (stuck.go)
	snapDeclined   uint64                 // run: the leader whose snapshot a critically full disk dropped, told once there is room (declinedSnapTick)
	// While this member leads: when the loop last stepped a message of
	// any follower (run), and for the metrics how often it went over
	// half the election timeout without one and the longest it went
	// (ns). A leader steps down after a whole election timeout of that.
	quietSince time.Time
	silences   atomic.Int64
	silenceMax atomic.Int64

	fast          fastElect    // run: campaigns while leaderless after a leader's loss (failover.go)
	fastCampaigns atomic.Int64 // campaigns fast made
	ticks         atomic.Int64 // Raft ticks so far
	preVotes      atomic.Int64 // pre-vote requests stepped (tests)

	confirmMu      sync.Mutex
	conf           confirms     // guarded by confirmMu: receives waiting for their lead's confirmation (confirm.go)
	confirmRounds  atomic.Int64 // confirmation rounds begun
	confirmsFailed atomic.Int64 // confirmations that failed (answers withheld)
	leaseReads     atomic.Int64 // confirmations the read lease answered (lease.go)

	heardLead     int64                // run: mono when the loop last stepped a leader's message, or the shard started (lease.go)
	deferred      []*pb.Message        // run: vote requests held while quiet (lease.go)
	votesDeferred atomic.Int64         // vote requests held while quiet
	votesHeld     atomic.Int64         // vote requests dropped while the node holds its vote (votehold.go)
	repaired      atomic.Bool          // this process started the shard on a damaged copy with --wal-repair (damaged.go)
	repairedPeer  atomic.Uint64        // a member whose copy --wal-repair started: a held vote goes to it (votehold.go)
	repairUpTo    uint64               // the loop's: where the repaired copy's log was when it first led (votehold.go)
	bumpsDropped  atomic.Int64         // empty appends that only bumped a follower's commit index, not sent (bump.go)
	beatsDropped  atomic.Int64         // heartbeats to a follower sent an append within the tick, not sent (bump.go)
	appSent       map[uint64]time.Time // run: when an append last left for each follower (bump.go)
	marks         []appendMark         // run: when this term's entries were made (lease.go)
	markTerm      uint64               // run: the term of marks
	ackedAt       map[uint64]int64     // run: per follower, the newest mark it acknowledged (lease.go)
}

// Propose implements engine.Replica: it only queues, and the loop hands
// the proposal to Raft at once or, held, with the next (hold.go).
func (s *shard) Propose(data []byte) error {
	s.pmu.Lock()
	s.props = append(s.props, data)
	wake := s.holdLocked()
	s.pmu.Unlock()
	if wake {
		s.wakeLoop()
	}
	return nil
}

// do runs f in the shard's loop.
func (s *shard) do(f func()) {
	s.pmu.Lock()
	s.control = append(s.control, f)
	s.pmu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// broker returns the shard's broker (nil while it is rebuilt).
func (s *shard) broker() *engine.Broker { return s.b.Load() }

// openBroker opens the shard's broker on its directory.
func (s *shard) openBroker() (*engine.Broker, error) { return s.openBrokerAt(s.dir) }

// openBrokerAt opens a broker of this shard in dir.
func (s *shard) openBrokerAt(dir string) (*engine.Broker, error) {
	// The configured count: the node opens its shards one after another,
	// so len(s.n.shards) is not it yet.
	o := shardShare(s.n.cfg.Engine, s.n.cfg.Shards)
	o.Dir = dir
	// A leader's records are written with the entry header its append
	// worker writes and syncs: one write per round, not two.
	o.WAL.DeferWrites = true
	o.Replica = s
	o.HandleSecret, o.AcceptHandleSecrets = s.n.handleSecret(s.id), s.n.acceptedHandleSecrets(s.id)
	o.DeadLetterRouter = deadLetterRouter{s.n, s.id}
	o.MovesHeld = s.n.movesHeld         // holdmoves.go
	o.MessageIDSpace = uint16(s.id + 1) // ids unique over the shards
	o.Logger = s.log
	if s.n.flushFS != nil {
		o.WAL.FS = s.n.flushFS
	}
	return engine.Open(o)
}

// start opens the broker and the Raft member.
func (s *shard) start(voters []uint64) error {
	s.heardLead = mono() // lease.go: quiet after a (re)start
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return err
	}
	if err := s.recoverInterruptedInstall(); err != nil {
		return err
	}
	b, err := s.openChecked() // damaged.go
	if err != nil {
		return fmt.Errorf("shard %d: %w", s.id, err)
	}
	rs, err := b.ReplicaState()
	if err != nil {
		b.Close()
		return err
	}
	cs := &pb.ConfState{}
	if rs.ConfState != nil {
		if err := proto.Unmarshal(rs.ConfState, cs); err != nil {
			b.Close()
			return fmt.Errorf("shard %d: configuration: %w", s.id, err)
		}
	} else if rs.SnapIndex == 0 && len(rs.Entries) == 0 && len(voters) > 0 {
		// A new cluster: the log begins with the members the flags name.
		if rs, err = bootstrap(b, voters); err != nil {
			b.Close()
			return fmt.Errorf("shard %d: bootstrap: %w", s.id, err)
		}
		s.bootstrapped = true
	}
	if st := newRaftStorage(b, rs, cs); s.st == nil {
		s.st = st
		st.log = s.log
	} else {
		s.st.reload(st) // a restart (restart.go): others hold s.st
	}
	cfg := &raft.Config{
		ID:              s.n.cfg.NodeID,
		ElectionTick:    s.n.cfg.ElectionTicks,
		HeartbeatTick:   1,
		Storage:         s.st,
		Applied:         rs.Applied,
		MaxSizePerMsg:   1 << 20,
		MaxInflightMsgs: 256,
		// What a follower catching up is sent ahead of its
		// acknowledgements (entries read back from the log): 8 MiB, not
		// 256 messages of up to 1 MiB.
		MaxInflightBytes:          maxInflightBytes,
		MaxUncommittedEntriesSize: 1 << 30,
		CheckQuorum:               true,
		StepDownOnRemoval:         true, // members.go: a removed leader goes at once
		PreVote:                   true,
		AsyncStorageWrites:        true, // append.go
		Logger:                    raftLogger{s.log},
	}
	rn, err := raft.NewRawNode(cfg)
	if err != nil {
		b.Close()
		return fmt.Errorf("shard %d: %w", s.id, err)
	}
	s.rn = rn
	s.b.Store(b)
	s.app = newAppender(s)
	go s.app.run()
	return nil
}

// wakeLoop wakes the shard's loop.
func (s *shard) wakeLoop() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

var errNoBroker = errors.New("cluster: the shard has no broker")

// bootstrap writes a new cluster's first entries into an empty log: one
// committed configuration change per first member (term 1, indexes 1..n),
// the same bytes on every member. A member that joins later replays the
// log from index 1 and so learns the configuration from the log itself,
// whatever changes followed.
func bootstrap(b *engine.Broker, voters []uint64) (engine.ReplicaState, error) {
	ents := make([]engine.ReplicaEntry, len(voters))
	for i, id := range voters {
		data, err := proto.Marshal(&pb.ConfChange{Type: pb.ConfChangeAddNode.Enum(), NodeId: proto.Uint64(id)})
		if err != nil {
			return engine.ReplicaState{}, err
		}
		ents[i] = fromPB(&pb.Entry{Type: pb.EntryConfChange.Enum(), Term: proto.Uint64(1), Index: proto.Uint64(uint64(i + 1)), Data: data})
	}
	if err := b.PersistEntries(ents); err != nil {
		return engine.ReplicaState{}, err
	}
	if err := b.PersistHardState(engine.ReplicaHardState{Term: 1, Commit: uint64(len(ents))}); err != nil {
		return engine.ReplicaState{}, err
	}
	if err := b.SyncLog(); err != nil {
		return engine.ReplicaState{}, err
	}
	st, err := b.ReplicaState() // what Open found, and the entries since
	st.HardState = engine.ReplicaHardState{Term: 1, Commit: uint64(len(ents))}
	return st, err
}

// declinedSnapTick (the loop, every tick): a snapshot dropped while the
// disk was critically full (step) is reported to its sender once there is
// room again, so that it sends another. Its leader waits for that
// snapshot's report and sends no other while the connection between them
// stays up (snapshot.go, installFailed): the member stayed behind in that
// shard for good, its /healthz 200 (survive audit, 2026-12-07:
// TestClusterCriticallyFullFollowerCatchesUpFromASnapshot).
func (s *shard) declinedSnapTick() {
	if s.snapDeclined == 0 || s.diskCritical() {
		return
	}
	leader := s.snapDeclined
	s.snapDeclined = 0
	s.installFailed(leader, errors.New("this member's disk was critically full when the snapshot came"))
}

// run is the shard's loop.
func (s *shard) run(tick <-chan struct{}, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-tick:
			if h := testHookTick.Load(); h != nil && !(*h)(s.n.cfg.NodeID) {
				continue
			}
			s.rn.Tick()
			s.ticks.Add(1)
			s.fastElectTick() // failover.go
			s.confirmTick()   // confirm.go
			s.stuckTick()     // stuck.go
			s.repairTick()    // votehold.go
			s.declinedSnapTick()
		case m := <-s.inbox:
			s.step(m)
			// A few more, then the Ready: every step may queue appends (entries
			// read back from the log for a follower catching up), held until
			// the Ready sends them. Draining 4096 held up to 1.4 GB of them on
			// a leader of 3 shards (measured).
		drain:
			for i := 0; i < inboxBatch; i++ {
				select {
				case m := <-s.inbox:
					s.step(m)
				default:
					break drain
				}
			}
		case <-s.wake:
		}
		s.pmu.Lock()
		ctl, self := s.control, s.selfMsgs
		s.control, s.selfMsgs = nil, nil
		var props [][]byte
		if s.releaseLocked() { // hold.go
			props, s.props = s.props, nil
		}
		s.pmu.Unlock()
		for _, m := range self {
			s.step(m)
		}
		for _, f := range ctl {
			f()
		}
		if len(props) > 0 {
			switch st := s.rn.BasicStatus(); {
			case st.RaftState != raft.StateLeader:
				// No longer the leader: the broker's pending proposals fail
				// when it learns that (handleSoftState). Not proposed: Raft
				// would forward them to the new leader, where they could
				// commit although their clients are told they failed.
				// (Conf changes are still forwarded: rejoin.go.)
				s.log.Debug("proposals dropped: not the leader", "n", len(props))
				props = nil
			case st.LeadTransferee != raft.None:
				// Handing the lead over (balance.go): Raft drops proposals
				// until the transfer ends, and one that fails leaves this
				// leader leading with changes the log never gets. Held, in
				// order, until it ends (a tick wakes the loop); if the lead
				// went, handleSoftState drops them with their broker.
				s.pmu.Lock()
				s.props = append(props, s.props...)
				s.pmu.Unlock()
				props = nil
			}
		}
		for _, p := range props {
			if err := s.rn.Propose(p); err != nil {
				s.log.Debug("proposal dropped", "err", err)
			}
			s.proposals.Add(1)
		}
		s.afterQuiet()    // lease.go
		s.beginConfirms() // confirm.go
		err := s.app.failed()
		if b := s.broker(); err == nil && b != nil {
			// A failure the broker met on its own (a checkpoint's fsync)
			// makes it refuse every change, and an idle leader proposes
			// nothing, so the append worker never sees one: the shard kept
			// the lead and answered 500 to every request until the process
			// restarted (disk-full audit, 2026-12-06).
			err = b.NeedsReopen()
		}
		if err == nil {
			err = s.rebuildIfDiverged()
		}
		if err == nil {
			err = s.giveUpIfAsked()
		}
		for err == nil && s.rn.HasReady() {
			err = s.handleReady(s.rn.Ready())
		}
		if err == nil {
			s.stepTransfer() // transfer.go
		}
		if err != nil && !s.restartAfterFailure(err, tick, stop) {
			return
		}
	}
}

// step hands a message to Raft; a snapshot is installed first, off the
// loop (snapshot.go).
func (s *shard) step(m *pb.Message) {
	if s.malformedBeat(m) { // bump.go
		return
	}
	if from := m.GetFrom(); from != s.n.cfg.NodeID {
		if s.heard == nil {
			s.heard = map[uint64]time.Time{}
		}
		now := time.Now()
		if last, ok := s.heard[from]; !ok || now.Sub(last) >= 2*s.n.cfg.Tick*time.Duration(s.n.cfg.ElectionTicks) {
			if s.activeSince == nil {
				s.activeSince = map[uint64]time.Time{}
			}
			s.activeSince[from] = now // (again) active from now on: activeMember
		}
		s.heard[from] = now
		if s.leaderOf != 0 {
			s.noteSilence(now)
		}
	}
	if m.GetType() == pb.MsgHeartbeat {
		// A member whose data directory was wiped rejoins with its old id;
		// the leader still thinks it holds what it acknowledged before and
		// tells it a commit index beyond its (empty) log, at which etcd
		// raft would panic. Commit what we hold; the log then catches up
		// (a rejected append, then a snapshot).
		if last, _ := s.st.LastIndex(); m.GetCommit() > last {
			m.Commit = proto.Uint64(last)
		}
	}
	if t := m.GetType(); (t == pb.MsgVote || t == pb.MsgPreVote) && s.n.voteHeld.Load() && m.GetFrom() != s.n.cfg.NodeID && m.GetFrom() != s.repairedPeer.Load() {
		s.votesHeld.Add(1) // votehold.go: it may have lost what it acknowledged
		return
	}
	s.noteLeaderMessage(m) // lease.go
	s.noteAppendAck(m)     // lease.go
	if s.deferVote(m) {
		return
	}
	switch m.GetType() {
	case pb.MsgPreVote:
		s.preVotes.Add(1)
	case pb.MsgSnap:
		if s.diskCritical() {
			s.snapDeclined = m.GetFrom() // declinedSnapTick
			return
		}
		s.snapDeclined = 0
		s.startInstall(m) // snapshot.go: steps it once its state is in
		return
	case pb.MsgApp:
		if s.installing != nil {
			s.appendsRefused.Add(1)
			return // see snapshot.go: the log being replaced takes nothing
		}
		if s.diskCritical() {
			s.appendsRefused.Add(1)
			return
		}
	case pb.MsgTimeoutNow:
		if s.diskCritical() {
			return // a leadership transfer to a disk that takes no entries
		}
		if s.n.voteHeld.Load() {
			return // votehold.go: it would vote for itself
		}
		if !s.knowsQuorum() {
			return // a campaign it cannot win
		}
	case pb.MsgSnapStatus:
		// A member's report that its install failed (snapshot.go,
		// installFailed); a local message type to etcd raft, which
		// would refuse it from the network.
		if m.GetReject() && m.GetFrom() != s.n.cfg.NodeID {
			s.snapshotLost(m.GetFrom(), "a member could not install the snapshot it was sent") // node.go
		}
		return
	}
	s.stepRaft(m)
	if m.GetType() == pb.MsgAppResp && !m.GetReject() && s.snapSent[m.GetFrom()] {
		s.snapshotOutrun(m.GetFrom()) // node.go
	}
}

// stepRaft hands m to Raft.
func (s *shard) stepRaft(m *pb.Message) {
	if err := s.rn.Step(m); err != nil && !errors.Is(err, raft.ErrStepPeerNotFound) && !errors.Is(err, raft.ErrStepLocalMsg) {
		s.log.Debug("step", "err", err)
	}
}

// handleReady takes one Ready (asynchronous storage writes, append.go):
// what must be persisted goes to the append worker, committed entries are
// applied here, and messages to other members leave at once (those that
// must wait for durability travel as the append's responses).
func (s *shard) handleReady(rd raft.Ready) error {
	if rd.SoftState != nil {
		if err := s.handleSoftState(rd.SoftState); err != nil {
			return err
		}
	}
	if len(rd.ReadStates) > 0 {
		s.deliverReads(rd.ReadStates) // read.go
	}
	var net []*pb.Message
	now := time.Now()
	for _, m := range rd.Messages {
		switch m.GetTo() {
		case raft.LocalAppendThread:
			for _, e := range m.Entries {
				if s.leaderOf != 0 && s.firstOurs == 0 && e.GetTerm() == s.leaderOf {
					s.firstOurs = e.GetIndex()
				}
			}
			if n := len(m.Entries); n > 0 && s.leaderOf != 0 && m.Entries[n-1].GetTerm() == s.leaderOf {
				s.markAppend(m.Entries[n-1].GetIndex()) // lease.go
			}
			s.app.push(m)
		case raft.LocalApplyThread:
			b := s.broker()
			if b == nil {
				return errNoBroker
			}
			if err := s.applyCommitted(b, m.Entries); err != nil {
				return err
			}
			for _, r := range m.Responses {
				s.step(r)
			}
			s.st.compact(s.rn.BasicStatus().Applied)
		default:
			switch m.GetType() {
			case pb.MsgTimeoutNow:
				s.endLease() // lease.go, invariant 2: before it leaves
			case pb.MsgSnap:
				if s.snapSent == nil {
					s.snapSent = map[uint64]bool{}
				}
				s.snapSent[m.GetTo()] = true // node.go, snapshotOutrun
			}
			if s.pureBump(m) || s.needlessBeat(m, now) { // bump.go
				continue
			}
			if t := m.GetType(); (t == pb.MsgPreVote || t == pb.MsgVote) && s.diskCritical() {
				// A member whose disk takes no entries must not lead: it
				// would append its term's first entry into the full disk
				// (a failed write takes the shard out, restart.go). It still votes.
				continue
			}
			if t := m.GetType(); (t == pb.MsgPreVote || t == pb.MsgVote) && s.n.voteHeld.Load() {
				// votehold.go: no campaign of its own (review Q,
				// TestClusterHeldNodeDoesNotElectItself). Its ticks go on:
				// skipped, a leader it had heard kept it "in lease" for
				// good, so that it ignored even the votes it may give.
				continue
			}
			net = append(net, m)
		}
	}
	s.n.tr.send(s.id, net)
	return nil
}

// applyCommitted applies committed entries: the broker's records, then
// configuration changes; a new leader starts taking changes once every
// entry before its term's first is applied.
func (s *shard) applyCommitted(b *engine.Broker, committed []*pb.Entry) error {
	if len(committed) == 0 {
		return nil
	}
	// Configuration changes are recorded before the entries are marked
	// applied: a checkpoint may fold the applied mark at once, and a
	// restart must not find a conf change applied whose configuration is
	// not recorded (Raft would never hand it over again).
	for _, e := range committed {
		if err := s.applyConfChange(b, e); err != nil {
			return err
		}
	}
	ents := make([]engine.ReplicaEntry, 0, len(committed))
	for _, e := range committed {
		ents = append(ents, fromPB(e))
	}
	if err := b.ApplyCommitted(ents); err != nil {
		return err
	}
	last := committed[len(committed)-1].GetIndex()
	if s.leaderOf != 0 && !s.ready.Load() && s.firstOurs != 0 && last >= s.firstOurs {
		err := b.SetLeader(true, s.leaderOf)
		if errors.Is(err, engine.ErrDiverged) {
			// An operation under way at an earlier step-down left a change
			// the log does not make: rebuild, then lead.
			if err = s.rebuild(); err == nil {
				b = s.broker()
				err = b.SetLeader(true, s.leaderOf)
			}
		}
		if err != nil {
			return err
		}
		s.ready.Store(true)
		s.log.Info("shard leader ready", "term", s.leaderOf, "index", last)
	}
	return nil
}

// handleSoftState follows leadership.
func (s *shard) handleSoftState(ss *raft.SoftState) error {
	lead := ss.Lead
	// lastLead is the last leader known: a pre-vote's "none" and the same
	// leader back after it is no leader change.
	// A term of its own is an election, the same leader's or not.
	if term := s.rn.BasicStatus().GetTerm(); lead != raft.None && (lead != s.lastLead || term != s.leadTerm) {
		s.elections.Add(1)
		s.lastLead, s.leadTerm = lead, term
	}
	// forward_moved.go: a pre-candidate's "none" elects nobody; "none"
	// in any other state (its pre-vote won: a candidate) is a move.
	prevote := lead == raft.None && ss.RaftState == raft.StatePreCandidate
	if s.lead.Swap(lead) != lead || lead == raft.None && !prevote {
		s.n.leaderMoved(s.id, lead, s.silent, prevote)
	}
	s.term.Store(s.rn.BasicStatus().GetTerm())
	switch {
	case ss.RaftState == raft.StateLeader && s.leaderOf == 0:
		s.leaderOf, s.firstOurs = s.rn.BasicStatus().GetTerm(), 0
		s.quietSince = time.Now()
		s.log.Info("shard leader elected", "term", s.leaderOf)
	case ss.RaftState != raft.StateLeader && s.leaderOf != 0:
		wasReady := s.ready.Swap(false)
		s.noteSilence(time.Now()) // a step-down for a lost quorum ends one
		s.leaderOf, s.firstOurs = 0, 0
		s.failConfirms() // confirm.go
		b := s.broker()
		if err := b.SetLeader(false, 0); err != nil {
			return err
		}
		// Proposals still queued failed with SetLeader (it settles every
		// pending one), and the broker refuses new ones now: proposed
		// later, in a term this member might lead again, they would
		// commit changes whose clients were told they failed.
		s.pmu.Lock()
		s.props = nil
		s.pmu.Unlock()
		if b.Diverged() {
			return s.rebuild()
		}
		if wasReady {
			s.rebuildsSkipped.Add(1)
			s.log.Info("stepped down; every change this member made is committed: no rebuild")
		}
	}
	return nil
}

// retire adds the replication counters of a broker about to be replaced
// to the shard's.
func (s *shard) retire(b *engine.Broker) {
	rs, ok := b.ReplicaStats()
	if !ok {
		return
	}
	s.statsMu.Lock()
	s.retiredFailed += rs.ProposalsFailed
	s.retiredDrops += rs.UnloggedDropped
	s.retiredLat.Add(rs.ProposalSeconds)
	s.statsMu.Unlock()
}

// rebuildIfDiverged rebuilds the broker of a member that does not lead if
// an operation under way at its step-down changed its state after it
// (engine.Broker.Diverged).
func (s *shard) rebuildIfDiverged() error {
	if b := s.broker(); s.leaderOf == 0 && b != nil && b.Diverged() {
		return s.rebuild()
	}
	return nil
}

// rebuild reopens the broker from what is committed (see the file comment).
func (s *shard) rebuild() error {
	start := time.Now()
	s.app.barrier() // invariant 2 of append.go
	if err := s.app.failed(); err != nil {
		return err
	}
	old := s.broker()
	// The hard state persisted with every Ready already covers what was
	// applied (it is written before the entries it commits are applied).
	if err := old.SyncLog(); err != nil {
		return err
	}
	s.retire(old)
	s.b.Store(nil)
	old.CloseForRebuild()
	if d := old.Damaged(); d != nil {
		// Met since the loop last looked (review M): the copy must not be
		// opened again as it is (damaged.go). The loop's restart refuses it.
		return s.refuseBody(d)
	}
	b, err := s.openBroker()
	if err != nil {
		return fmt.Errorf("rebuild: %w", err)
	}
	s.st.setBroker(b)
	s.b.Store(b)
	s.rebuilds.Add(1)
	s.log.Info("shard state rebuilt from the committed log", "took", time.Since(start))
	return nil
}

// close stops the append worker and closes the broker (the loop has
// stopped).
func (s *shard) close() error {
	if s.app != nil {
		s.app.close()
	}
	if b := s.broker(); b != nil {
		return b.Close()
	}
	return nil
}

// shardDir is the directory of shard i under the node's.
func shardDir(dir string, i int) string { return filepath.Join(dir, "shards", fmt.Sprint(i)) }
