package cluster

// Snapshots: a member too far behind (or new, or wiped) gets its shard's
// whole state from the leader (engine/snapshot.go) and then the log from
// the snapshot's index on.
//
// Raft's MsgSnap carries only the point (index, term, configuration). The
// follower's loop does not step it at once: a goroutine of its own
// (prepareInstall) fetches the state from the sender over a connection of
// its own (transport.go, kind 1) into <shard dir>.snap until its end mark
// (a stream cut short changes nothing here) and imports it into a new
// broker in <shard dir>.new. Meanwhile the loop goes on: it steps the
// leader's heartbeats (so the leader keeps counting this member as active,
// and does not step down for want of a quorum while the other follower is
// slow) and votes, but drops appends and further snapshots, so that the
// old log, which the swap throws away, takes nothing it would have to
// acknowledge. A 125,000-message shard took 24-59 s to fetch and import
// under load, all of it inside the loop before. Then, in the loop
// (finishInstall):
//
//  1. write <shard dir>.install holding the hard state (term, vote): the
//     swap replaces the directory, and term and vote must survive it;
//  2. close the old broker, put <shard dir>.new in the place of its
//     directory, open it, persist the hard state, sync;
//  3. remove the marker, and step the MsgSnap.
//
// A crash in between leaves the marker: the next start wipes the shard and
// writes the hard state back with an empty log (commit 0), and the leader
// sends the snapshot again. A leftover <shard dir>.new is removed at start.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"

	"github.com/smqd/smqd/engine"
)

func (s *shard) markerPath() string { return s.dir + ".install" }

// install is a snapshot being fetched and imported off the shard's loop.
type install struct {
	m     *pb.Message
	start time.Time
}

// startInstall (the loop) takes a MsgSnap: a snapshot of what Raft has
// committed already goes to Raft at once (it ignores it); another starts a
// background install (prepareInstall) unless one runs. The loop goes on
// meanwhile (stepping heartbeats and votes, not appends: see step), so
// the leader keeps hearing from this member, and finishInstall swaps the
// state in when it is ready.
func (s *shard) startInstall(m *pb.Message) {
	meta := m.GetSnapshot().GetMetadata()
	if s.installing != nil {
		return // one at a time; the leader sends it again if this one fails
	}
	s.app.barrier() // wouldRestore reads the storage
	if !s.wouldRestore(m) {
		s.stepRaft(m)
		return
	}
	addr := s.n.tr.peerAddr(m.GetFrom())
	if addr == "" {
		s.installFailed(m.GetFrom(), errors.New("no address"))
		return
	}
	in := &install{m: m, start: time.Now()}
	s.installing = in
	s.armCatchUp() // not healthy until it applied the leader's commit index (caughtup.go)
	s.n.wg.Add(1)
	s.installs.Add(1)
	go func() {
		defer s.n.wg.Done()
		err := s.prepareInstall(m.GetFrom(), addr, meta)
		s.installs.Done()
		s.do(func() { s.finishInstall(in, err) })
	}()
}

// testHookBeforeImport, when set (tests), runs in prepareInstall before
// the import; an error fails the install.
var testHookBeforeImport func(node uint64, shard int) error

// prepareInstall (a goroutine of its own) fetches the state into a spool
// file and imports it into a new broker in <shard dir>.new, then closes
// that broker cleanly: nothing the loop owns is touched. The node's stop
// cuts it short.
func (s *shard) prepareInstall(from uint64, addr string, meta *pb.SnapshotMetadata) error {
	done := make(chan struct{})
	defer close(done)
	var mu sync.Mutex
	var closers []io.Closer // closed by the node's stop: the fetch, the spool
	abort := func(c io.Closer) bool {
		mu.Lock()
		defer mu.Unlock()
		select {
		case <-s.n.stop:
			c.Close()
			return true
		default:
		}
		closers = append(closers, c)
		return false
	}
	go func() {
		select {
		case <-s.n.stop:
			mu.Lock()
			for _, c := range closers {
				c.Close()
			}
			mu.Unlock()
		case <-done:
		}
	}()
	spool, err := s.fetchWhole(from, addr, meta.GetIndex(), abort)
	if err != nil {
		return err
	}
	defer func() {
		spool.Close()
		os.Remove(spool.Name())
	}()
	if abort(spool) {
		return errors.New("the node is stopping")
	}
	dir := s.dir + ".new"
	if err := s.wipeDir(dir); err != nil {
		return err
	}
	b, err := s.openBrokerAt(dir)
	if err != nil {
		return err
	}
	conf, err := proto.Marshal(meta.GetConfState())
	if h := testHookBeforeImport; h != nil && err == nil {
		err = h(s.n.cfg.NodeID, s.id)
	}
	if err == nil {
		err = b.ImportState(spool, meta.GetIndex(), meta.GetTerm(), conf)
	}
	if cerr := b.Close(); err == nil {
		err = cerr
	}
	return err
}

// finishInstall (the loop) swaps a prepared state in:
//
//  1. write <shard dir>.install holding the hard state (term, vote): the
//     swap replaces the directory, and term and vote must survive it;
//  2. close the old broker, replace its directory with <shard dir>.new,
//     open it, persist the hard state (commit: the snapshot's index), sync;
//  3. remove the marker, and hand the MsgSnap to Raft.
//
// A snapshot Raft has committed past meanwhile is thrown away.
func (s *shard) finishInstall(in *install, err error) {
	if s.installing != in {
		return // prepared for a member the shard replaced since (restart.go)
	}
	s.installing = nil
	meta := in.m.GetSnapshot().GetMetadata()
	if err == nil {
		s.app.barrier() // the append worker must not write to the broker replaced below
		err = s.app.failed()
	}
	if err == nil && !s.wouldRestore(in.m) {
		s.wipeDir(s.dir + ".new")
		s.stepRaft(in.m)
		return
	}
	if err == nil {
		err = s.swapInstalled(meta)
	}
	if err != nil {
		s.wipeDir(s.dir + ".new")
		s.installFailed(in.m.GetFrom(), err)
		return
	}
	s.n.snapshots.Add(1)
	s.log.Info("snapshot installed", "index", meta.GetIndex(), "term", meta.GetTerm(), "from", in.m.GetFrom(), "took", time.Since(in.start))
	s.stepRaft(in.m)
}

// installFailed (the loop) tells the leader that sent a snapshot that it
// was not installed, so that it sends another: etcd raft leaves a member
// waiting for a snapshot until it is reported, and only the leader can
// report it (node.go, snapshotLost). The report is a MsgSnapStatus with
// Reject, which the leader's shard takes before Raft (shard.go, step).
func (s *shard) installFailed(leader uint64, err error) {
	s.log.Warn("snapshot not installed; the leader will send it again", "from", leader, "err", err)
	s.n.tr.send(s.id, []*pb.Message{{Type: pb.MsgSnapStatus.Enum(), From: proto.Uint64(s.n.cfg.NodeID),
		To: proto.Uint64(leader), Term: proto.Uint64(s.rn.BasicStatus().GetTerm()), Reject: proto.Bool(true)}})
}

// wouldRestore tells whether Raft, stepping the MsgSnap m now, would
// restore its snapshot, mirroring etcd raft 3.7's Step, stepFollower,
// stepCandidate, handleSnapshot and restore, so that the state is swapped
// in exactly when Raft takes the snapshot: the world may have moved on
// while it was prepared. Not if m's term is behind this member's
// (ignored), if this member leads (a leader ignores a MsgSnap of its own
// term), if Raft committed or compacted past the snapshot, if the
// snapshot's configuration leaves this member out, or if the log holds
// the snapshot's entry (Raft only moves its commit index then). The last
// check reads the storage, which holds every entry Raft appended only
// after the append worker's barrier: finishInstall asks after one.
func (s *shard) wouldRestore(m *pb.Message) bool {
	meta := m.GetSnapshot().GetMetadata()
	st := s.rn.BasicStatus()
	switch {
	case m.GetTerm() < st.GetTerm(),
		m.GetTerm() == st.GetTerm() && st.RaftState == raft.StateLeader,
		meta.GetIndex() <= s.st.snapIndexNow(),
		meta.GetIndex() <= st.GetCommit():
		return false
	}
	cs := meta.GetConfState()
	id := s.n.cfg.NodeID
	if !slices.Contains(cs.GetVoters(), id) && !slices.Contains(cs.GetLearners(), id) && !slices.Contains(cs.GetVotersOutgoing(), id) {
		return false
	}
	if t, err := s.st.Term(meta.GetIndex()); err == nil && t == meta.GetTerm() {
		return false
	}
	return true
}

// swapInstalled is steps 1 and 2 of finishInstall (after the append
// worker's barrier).
func (s *shard) swapInstalled(meta *pb.SnapshotMetadata) error {
	hs := s.rn.BasicStatus().HardState
	if err := writeMarker(s.markerPath(), hs.GetTerm(), hs.GetVote()); err != nil {
		return err
	}
	old := s.broker()
	s.b.Store(nil)
	if old != nil {
		s.retire(old)
		old.CloseForRebuild()
	}
	if err := s.moveDir(s.dir+".new", s.dir); err != nil {
		return err
	}
	b, err := s.openBroker()
	if err != nil {
		return err
	}
	if err := b.PersistHardState(engine.ReplicaHardState{Term: hs.GetTerm(), Vote: hs.GetVote(), Commit: meta.GetIndex()}); err != nil {
		b.Close()
		return err
	}
	if err := b.SyncLog(); err != nil {
		b.Close()
		return err
	}
	if err := os.Remove(s.markerPath()); err != nil {
		b.Close()
		return err
	}
	// The log storage follows when Raft hands the snapshot over in a Ready
	// (append.go): until then it must still show the old log, or Raft
	// would take the snapshot for entries it already has.
	s.st.setBroker(b)
	s.b.Store(b)
	return nil
}

// fetchWhole fetches the shard's state from member from, at addr, into a
// file beside the shard's directory, and returns it positioned at its
// start once it holds the whole stream (engine.CopyState): a transfer cut
// short, or an export that failed (engine.ExportState sends no end mark
// then), leaves the member's state as it was.
func (s *shard) fetchWhole(from uint64, addr string, index uint64, abort func(io.Closer) bool) (*os.File, error) {
	rc, err := s.n.tr.fetchSnapshot(from, addr, s.id, index)
	if errors.Is(err, errNoSnapshotAt) {
		// Once more, then without the index: a leader of an earlier
		// version (a rolling upgrade) closes every such request, while
		// a connection lost at once seldom is lost twice.
		if rc, err = s.n.tr.fetchSnapshot(from, addr, s.id, index); errors.Is(err, errNoSnapshotAt) {
			s.log.Warn("the leader does not take a snapshot's index (a version before 2026-12-06): this member's topic counts may count a few publishes twice", "err", err)
			rc, err = s.n.tr.fetchSnapshot(from, addr, s.id, 0)
		}
	}
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if abort(rc) {
		return nil, errors.New("the node is stopping")
	}
	f, err := os.OpenFile(s.dir+".snap", os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if _, err = engine.CopyState(f, rc); err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return f, nil
}

// testHookServeSnapshot, when set (tests), is told of each snapshot
// served: its shard and the index the member asked for.
var testHookServeSnapshot func(shard int, at uint64)

// serveSnapshot streams the shard's state (transport.go): to a follower,
// with the topics' counts as of the snapshot's index req.at (0: a member
// of an earlier version, which does not say it: the live counts); or to
// a backup (req.leading), only as the shard's confirmed leader.
func (n *Node) serveSnapshot(req snapRequest, w io.Writer) error {
	shardID := int(req.shard)
	if shardID >= len(n.shards) {
		return fmt.Errorf("no shard %d", shardID)
	}
	s := n.shards[shardID]
	b := s.broker()
	if b == nil {
		return fmt.Errorf("shard %d is being rebuilt", shardID)
	}
	if h := testHookServeSnapshot; h != nil {
		h(shardID, req.at)
	}
	switch {
	case req.leading:
		return b.ExportStateLeading(w)
	case req.at == 0:
		return s.exported(b.ExportState(w))
	}
	return s.exported(b.ExportStateAt(w, req.at))
}

// wipe empties the shard's directory.
func (s *shard) wipe() error {
	if err := s.wipeDir(s.dir); err != nil {
		return err
	}
	return os.MkdirAll(s.dir, 0o700)
}

// wipeDir removes a broker's directory, the log included where the engine
// keeps it on a file system of its own (Options.WAL.FS: fault tests).
func (s *shard) wipeDir(dir string) error {
	if fs := s.n.cfg.Engine.WAL.FS; fs != nil {
		wdir := filepath.Join(dir, "wal")
		names, err := fs.ReadDir(wdir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		for _, name := range names {
			if err := fs.Remove(filepath.Join(wdir, name)); err != nil {
				return err
			}
		}
	}
	return os.RemoveAll(dir)
}

// moveDir replaces broker directory to with from (a closed broker's), the
// log's files included where Options.WAL.FS keeps them.
func (s *shard) moveDir(from, to string) error {
	if err := s.wipeDir(to); err != nil {
		return err
	}
	if fs := s.n.cfg.Engine.WAL.FS; fs != nil {
		src, dst := filepath.Join(from, "wal"), filepath.Join(to, "wal")
		names, err := fs.ReadDir(src)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if err := fs.MkdirAll(dst, 0o700); err != nil {
			return err
		}
		for _, name := range names {
			if err := fs.Rename(filepath.Join(src, name), filepath.Join(dst, name)); err != nil {
				return err
			}
		}
	}
	if err := os.Rename(from, to); err != nil {
		return err
	}
	return syncDir(filepath.Dir(to))
}

// syncDir fsyncs a directory (a rename in it).
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func writeMarker(path string, term, vote uint64) error {
	var v [16]byte
	binary.LittleEndian.PutUint64(v[:], term)
	binary.LittleEndian.PutUint64(v[8:], vote)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(v[:]); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// recoverInterruptedInstall finishes an install a crash interrupted (see
// the file comment).
func (s *shard) recoverInterruptedInstall() error {
	if err := os.Remove(s.dir + ".snap"); err != nil && !os.IsNotExist(err) {
		return err // a fetch the crash cut short
	}
	if err := s.wipeDir(s.dir + ".new"); err != nil {
		return err // a state prepared, or half prepared, and never swapped in
	}
	v, err := os.ReadFile(s.markerPath())
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(v) != 16 {
		return fmt.Errorf("shard %d: install marker of %d bytes", s.id, len(v))
	}
	s.log.Warn("a snapshot install was interrupted: the shard starts empty and will get the snapshot again")
	if err := s.wipe(); err != nil {
		return err
	}
	b, err := s.openBroker()
	if err != nil {
		return err
	}
	hs := engine.ReplicaHardState{Term: binary.LittleEndian.Uint64(v), Vote: binary.LittleEndian.Uint64(v[8:])}
	if err := b.PersistHardState(hs); err != nil {
		b.Close()
		return err
	}
	if err := b.SyncLog(); err != nil {
		b.Close()
		return err
	}
	if err := b.Close(); err != nil {
		return err
	}
	return os.Remove(s.markerPath())
}

// snapIndexNow returns the storage's snapshot index.
func (st *raftStorage) snapIndexNow() uint64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.snapIndex
}

var _ = raft.SnapshotFinish

// snapshotLost (the loop): a leader waiting for peer to install a
// snapshot takes it as failed when the connection to peer ends. The peer
// fetches and installs a snapshot on its own (snapshot.go), and etcd raft
// leaves the peer's progress waiting for it until it is reported: a peer
// restarted in the middle of an install was never sent another, and never
// caught up while that leader led (TestClusterStopDuringASnapshotInstall).
// Raft probes it again, and sends a new snapshot if it still needs one.
//
// The same when peer reports that it could not install the snapshot (a
// MsgSnapStatus with Reject, snapshot.go): its connection stays up then,
// and without the report this leader sent it no other snapshot while it
// led (seen with a member of an earlier version that refuses a newer
// snapshot's records, and the case of any failed install:
// TestClusterMemberRetriesAFailedInstall).
func (s *shard) snapshotLost(peer uint64, why string) {
	if s.rn.BasicStatus().RaftState != raft.StateLeader {
		return
	}
	if pr, ok := s.rn.Status().Progress[peer]; ok && pr.State == tracker.StateSnapshot {
		s.log.Info(why+": it will be probed again", "member", peer)
		s.rn.ReportSnapshot(peer, raft.SnapshotFailure)
	}
}

// snapshotOutrun (the loop, leading): a member that installed a snapshot
// and answered from its index, which this leader's log no longer holds
// (it compacted past it while the member installed it), stays waiting
// for a snapshot in etcd raft, which sends it none until the snapshot is
// reported. Reported failed here, Raft probes the member again and sends
// a newer snapshot. A 5-node chaos run left a wiped member 42,664 entries
// behind for 90 s (TestClusterMemberCatchesUpWhenItsSnapshotIsOutrun).
//
// It runs only for a member this replica sent a snapshot to (snapSent),
// until that member leaves the snapshot state, not on every append's
// answer.
func (s *shard) snapshotOutrun(peer uint64) {
	outrun, waiting := false, false
	s.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id != peer || pr.State != tracker.StateSnapshot {
			return
		}
		waiting = true
		if pr.Match >= pr.PendingSnapshot {
			if first, err := s.st.FirstIndex(); err == nil && pr.Match+1 < first {
				outrun = true
			}
		}
	})
	if !waiting || outrun {
		delete(s.snapSent, peer)
	}
	if outrun {
		s.log.Info("a member installed a snapshot this leader's log has moved past: it is sent a newer one", "member", peer)
		s.rn.ReportSnapshot(peer, raft.SnapshotFailure)
	}
}
