package cluster

// Snapshots: a member too far behind (or new, or wiped) gets its shard's
// whole state from the leader (engine/snapshot.go) and then the log from
// the snapshot's index on.
//
// Raft's MsgSnap carries only the point (index, term, configuration). The
// follower's loop, before stepping it, fetches the state from the sender
// over a connection of its own (transport.go, kind 1) into <shard dir>.snap
// until its end mark (a stream cut short changes nothing here) and
// installs it:
//
//  1. write <shard dir>.install holding the hard state (term, vote): the
//     install replaces the directory, and term and vote must survive it;
//  2. close the old broker, remove its directory, open an empty one,
//     ImportState, persist the hard state, sync;
//  3. remove the marker.
//
// A crash in between leaves the marker: the next start wipes the shard and
// writes the hard state back with an empty log (commit 0), and the leader
// sends the snapshot again.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/smqd/smqd/engine"
)

func (s *shard) markerPath() string { return s.dir + ".install" }

// installSnapshot installs the state a MsgSnap announces (see above).
func (s *shard) installSnapshot(m *pb.Message) error {
	meta := m.GetSnapshot().GetMetadata()
	if meta.GetIndex() <= s.st.snapIndexNow() || meta.GetIndex() <= s.rn.BasicStatus().GetCommit() {
		return nil // Raft ignores a snapshot of what it has committed already
	}
	addr := s.n.tr.peerAddr(m.GetFrom())
	if addr == "" {
		return fmt.Errorf("no address for node %d", m.GetFrom())
	}
	start := time.Now()
	spool, err := s.fetchWhole(addr)
	if err != nil {
		return err
	}
	defer func() {
		spool.Close()
		os.Remove(spool.Name())
	}()
	s.app.barrier() // the append worker must not write to the broker replaced below
	if err := s.app.failed(); err != nil {
		return err
	}
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
	if err := s.wipe(); err != nil {
		return err
	}
	b, err := s.openBroker()
	if err != nil {
		return err
	}
	conf, err := proto.Marshal(meta.GetConfState())
	if err != nil {
		b.Close()
		return err
	}
	if err := b.ImportState(spool, meta.GetIndex(), meta.GetTerm(), conf); err != nil {
		b.Close()
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
	// (shard.go): until then it must still show the old log, or Raft
	// would take the snapshot for entries it already has.
	s.st.setBroker(b)
	s.b.Store(b)
	s.n.snapshots.Add(1)
	s.log.Info("snapshot installed", "index", meta.GetIndex(), "term", meta.GetTerm(), "from", m.GetFrom(), "took", time.Since(start))
	return nil
}

// fetchWhole fetches the shard's state from the member at addr into a
// file beside the shard's directory, and returns it positioned at its
// start once it holds the whole stream (engine.CopyState): a transfer cut
// short, or an export that failed (engine.ExportState sends no end mark
// then), leaves the member's state as it was.
func (s *shard) fetchWhole(addr string) (*os.File, error) {
	rc, err := s.n.tr.fetchSnapshot(addr, s.id)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
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

// serveSnapshot streams the shard's state to a follower (transport.go)
// and tells Raft how it went.
func (n *Node) serveSnapshot(shardID int, w io.Writer) error {
	if shardID < 0 || shardID >= len(n.shards) {
		return fmt.Errorf("no shard %d", shardID)
	}
	s := n.shards[shardID]
	b := s.broker()
	if b == nil {
		return fmt.Errorf("shard %d is being rebuilt", shardID)
	}
	return b.ExportState(w)
}

// wipe empties the shard's directory, the log included where the engine
// keeps it on a file system of its own (Options.WAL.FS: fault tests).
func (s *shard) wipe() error {
	if fs := s.n.cfg.Engine.WAL.FS; fs != nil {
		dir := filepath.Join(s.dir, "wal")
		names, err := fs.ReadDir(dir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		for _, name := range names {
			if err := fs.Remove(filepath.Join(dir, name)); err != nil {
				return err
			}
		}
	}
	if err := os.RemoveAll(s.dir); err != nil {
		return err
	}
	return os.MkdirAll(s.dir, 0o700)
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
