package cluster

// Backups of a cluster. A cluster's copies are its replicas, which ride
// out the loss of a minority; a backup is for the rest: the loss of a
// majority, or an operator's mistake (a queue deleted). Node.Backup writes
// each shard's state, as its leader exports it to a member catching up
// (engine.ExportState: every queue, topic, subscription and message of
// the shard, and the topics' counts), into one engine/archive stream.
// Restore writes such a backup into a new data directory, as a member of
// a new cluster: every member of that cluster restores the same backup,
// and the cluster starts where the backup was taken, as if each of its
// members had installed the same snapshot of every shard.
//
// Invariants:
//  1. Everything acknowledged before Backup was called is in the copy.
//     Each shard's state comes from a member that leads the shard and has
//     confirmed it after the call (engine.ExportStateLeading): its state
//     holds every change committed before (a leader serves only once it
//     has applied its predecessors' entries), and the export holds
//     committed changes only (its fence).
//  2. A shard's state is written whole or the backup fails: an attempt
//     that fails before any of its bytes reached the archive is tried
//     again (another leader), one that fails later fails the backup, and
//     a reader refuses an archive without its end frame.
//  3. A restored shard starts in a term past every term its messages'
//     sequence numbers carry (engine.ImportedTerm) and past the term the
//     backup saw, so that its new leaders never hand out one of them
//     again (engine/replica.go invariant 5); and engine.RestoreIDStep past
//     them, so that they do not hand out the ids the old cluster's leaders
//     gave in the terms it went on to after the backup either, nor those
//     of another cluster restored from the same backup.
//  4. Restore fills a directory beside its target and renames it into
//     place only once every shard is imported and the archive is checked
//     whole: the target never holds part of a backup.
//
// What it is not: one instant of the whole cluster. Each shard is read at
// its own moment, one after the other, as independent queues are.

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/engine/archive"
)

// BackupFormat is the archive's Manifest.Format of a cluster's backup
// (engine.BackupFormat is a single broker's). Part of the on-disk format.
const BackupFormat = 2

// backupLeaderWait bounds how long Backup looks for a shard's leader.
const backupLeaderWait = 30 * time.Second

// BackupOptions are the options of Node.Backup.
type BackupOptions struct {
	// Files names files of the node's data directory (Config.Dir) to
	// include, relative to it with '/' separators: the server's
	// credentials. A missing one is skipped.
	Files []string
	// BytesPerSecond caps the rate the backup writes at; 0 is no cap.
	BytesPerSecond int64
	// Cancel, if not nil, ends the backup once it is closed
	// (engine.BackupOptions.Cancel): a capped backup's waits look at it.
	Cancel <-chan struct{}
}

// BackupInfo says what a backup copied.
type BackupInfo struct {
	Shards int   // shards copied (all of them)
	Files  int   // files of BackupOptions.Files copied
	Bytes  int64 // bytes written
}

func shardStateName(i int) string { return "shards/" + strconv.Itoa(i) + ".state" }

// Backup writes every shard's state to w as an engine/archive stream
// (the file comment). It fails if a shard has no leader within
// backupLeaderWait, if the node stops, and with w's error.
func (n *Node) Backup(w io.Writer, opts BackupOptions) (BackupInfo, error) {
	var info BackupInfo
	for _, name := range opts.Files {
		if !archive.ValidName(name) || strings.HasPrefix(name, "shards/") {
			return info, fmt.Errorf("%w: a backup cannot name the file %q", engine.ErrInvalidArgument, name)
		}
	}
	if opts.BytesPerSecond < 0 {
		return info, fmt.Errorf("%w: BytesPerSecond %d is negative", engine.ErrInvalidArgument, opts.BytesPerSecond)
	}
	fields := map[string]string{"shards": strconv.Itoa(len(n.shards))}
	for _, s := range n.shards {
		fields["term."+strconv.Itoa(s.id)] = strconv.FormatUint(s.term.Load(), 10)
	}
	defer n.holdMovesEverywhere()() // holdmoves.go
	rw := &rateWriter{w: w, rate: opts.BytesPerSecond, start: time.Now(), stop: n.stop, cancel: opts.Cancel}
	aw, err := archive.NewWriter(rw, archive.Manifest{Format: BackupFormat, Created: time.Now().UTC(), Fields: fields})
	if err != nil {
		return info, err
	}
	for _, s := range n.shards {
		if err := aw.Create(archive.FileHeader{Name: shardStateName(s.id), Mode: 0o600}); err != nil {
			return info, err
		}
		if err := n.backupShard(s, aw, opts.Cancel); err != nil {
			return info, fmt.Errorf("cluster: backup of shard %d: %w", s.id, err)
		}
		info.Shards++
	}
	if info.Files, err = engine.BackupFiles(aw, n.cfg.Dir, opts.Files); err != nil {
		return info, err
	}
	if err := aw.Close(); err != nil {
		return info, err
	}
	info.Bytes = rw.n
	n.log.Info("backup written", "shards", info.Shards, "files", info.Files, "bytes", info.Bytes, "took", time.Since(rw.start))
	return info, nil
}

// backupShard writes shard s's state to w, exported by its confirmed
// leader: this node's broker, or the leader's over the transport
// (invariants 1 and 2). While the shard has no leader it waits up to
// backupLeaderWait, or until cancel is closed (a client that hung up held
// the backup slot for those 30 s).
func (n *Node) backupShard(s *shard, w io.Writer, cancel <-chan struct{}) error {
	deadline := time.Now().Add(backupLeaderWait)
	for {
		cw := &countWriter{w: w}
		err := n.exportLeading(s, cw)
		if err == nil || cw.n > 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no leader exported it within %v: %w", backupLeaderWait, err)
		}
		n.log.Info("backup: a shard's export failed before it began; trying again", "shard", s.id, "err", err)
		select {
		case <-n.stop:
			return errors.New("the node is stopping")
		case <-cancel:
			return errBackupCanceled
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// exportLeading writes shard s's state to w from the member that leads
// it, as far as this node knows.
func (n *Node) exportLeading(s *shard, w io.Writer) error {
	lead := s.lead.Load()
	switch {
	case lead == 0:
		return errors.New("no leader")
	case lead == n.cfg.NodeID:
		b := s.broker()
		if b == nil {
			return errNoBroker
		}
		err := b.ExportStateLeading(w)
		if err != nil && b.Damaged() != nil {
			err = fmt.Errorf("%w (only this member's copy is damaged: it stops leading the shard, and the backup taken again in a few seconds comes from another member)", err)
		}
		return err
	}
	addr := n.tr.peerAddr(lead)
	if addr == "" {
		return fmt.Errorf("no address for member %d", lead)
	}
	rc, err := n.tr.fetchState(lead, addr, snapRequest{shard: uint32(s.id), leading: true})
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = engine.CopyState(w, rc) // the whole stream, to its end mark
	return err
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	k, err := c.w.Write(p)
	c.n += int64(k)
	return k, err
}

// errBackupCanceled ends a backup whose BackupOptions.Cancel was closed.
var errBackupCanceled = errors.New("cluster: backup canceled (its client hung up)")

// rateWriter caps the rate of the writes through it (BytesPerSecond) and
// stops with the node. A capped write goes in pieces of about a quarter
// second's worth (512 B to 64 KiB), each sent once the rate allows, as a
// single node's backup paces (engine/backup.go). It wrote each 1 MiB
// frame of a shard's state at once and then slept its whole debt (100 s
// at 10 KB/s), through which the client got no byte: smqctl's 30 s
// --timeout ended every cluster backup capped below about 35 KB/s whose
// shard state filled a frame (backups audit, 2026-12-07).
type rateWriter struct {
	w      io.Writer
	rate   int64
	start  time.Time
	n      int64
	stop   <-chan struct{}
	cancel <-chan struct{} // BackupOptions.Cancel
}

func (r *rateWriter) Write(p []byte) (int, error) {
	piece := len(p)
	if r.rate > 0 {
		piece = int(min(max(r.rate/4, 512), 64<<10))
	}
	done := 0
	for {
		select {
		case <-r.stop:
			return done, errors.New("cluster: backup: the node is stopping")
		case <-r.cancel:
			return done, errBackupCanceled
		default:
		}
		if len(p) == 0 {
			return done, nil
		}
		if r.rate > 0 {
			due := time.Duration(float64(r.n) / float64(r.rate) * float64(time.Second))
			if wait := due - time.Since(r.start); wait > 0 {
				select {
				case <-r.stop:
					return done, errors.New("cluster: backup: the node is stopping")
				case <-r.cancel:
					return done, errBackupCanceled
				case <-time.After(wait):
				}
			}
		}
		k, err := r.w.Write(p[:min(len(p), piece)])
		r.n += int64(k)
		done += k
		if err != nil {
			return done, err
		}
		p = p[k:]
	}
}

// RestoreInfo says what Restore wrote.
type RestoreInfo struct {
	Manifest archive.Manifest
	Shards   int   // shards imported
	Files    int   // other files written
	Queues   int   // queues restored
	Messages int64 // messages restored (visible, received and delayed)
}

// Restore writes a cluster's backup (Node.Backup) into dir, the data
// directory of member cfg.NodeID of a new cluster whose members are
// cfg.Peers, with the backup's shard count (cfg.Shards, if set, must be
// it). Every member of the new cluster restores the same backup; then
// each starts on its directory with the flags it was restored with, and
// the cluster serves what the backup held. dir must not exist or be
// empty. cfg.Engine is the shards' broker template, as for Start.
func Restore(r io.Reader, dir string, cfg Config) (info RestoreInfo, err error) {
	if len(cfg.Peers) == 0 || cfg.Peers[cfg.NodeID] == "" {
		return info, fmt.Errorf("%w: restore: the members (%v) do not include this node (%d)", engine.ErrInvalidArgument, keys(cfg.Peers), cfg.NodeID)
	}
	err = engine.RestoreDir(dir, func(tmp string) (err error) {
		info, err = restoreInto(r, tmp, cfg)
		return err
	})
	return info, err
}

// restoreInto writes the backup into dir, a new empty directory.
func restoreInto(r io.Reader, dir string, cfg Config) (info RestoreInfo, err error) {
	ar, err := archive.NewReader(r)
	if err != nil {
		return info, err
	}
	m := ar.Manifest()
	info.Manifest = m
	if m.Format != BackupFormat {
		if m.Format == engine.BackupFormat {
			return info, fmt.Errorf("%w: restore: a single node's backup; restore it without --cluster-peers", engine.ErrInvalidArgument)
		}
		return info, fmt.Errorf("cluster: restore: a backup of format %d; this version reads format %d", m.Format, BackupFormat)
	}
	shards, err := strconv.Atoi(m.Fields["shards"])
	if err != nil || shards < 1 || shards > 1024 {
		return info, fmt.Errorf("%w: the manifest's shard count %q", archive.ErrDamaged, m.Fields["shards"])
	}
	if cfg.Shards != 0 && cfg.Shards != shards {
		return info, fmt.Errorf("%w: restore: the backup has %d shards, not %d (queues are placed by a hash modulo the count)", engine.ErrInvalidArgument, shards, cfg.Shards)
	}
	cfg.Shards, cfg.Dir = shards, dir
	if err := checkShardCount(dir, shards); err != nil {
		return info, err
	}
	if err := saveMembers(dir, cfg.Peers); err != nil {
		return info, err
	}
	voters := keys(cfg.Peers)
	conf, err := proto.Marshal(&pb.ConfState{Voters: voters})
	if err != nil {
		return info, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	n := &Node{cfg: cfg, log: cfg.Logger, shards: make([]*shard, shards)}
	done := make([]bool, shards)
	for {
		h, err := ar.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return info, err
		}
		if i, ok := shardOfState(h.Name); ok {
			if i >= shards || done[i] {
				return info, fmt.Errorf("%w: the file %s", archive.ErrDamaged, h.Name)
			}
			term, _ := strconv.ParseUint(m.Fields["term."+strconv.Itoa(i)], 10, 64)
			if err := n.restoreShard(i, ar, conf, term, &info); err != nil {
				return info, fmt.Errorf("cluster: restore shard %d: %w", i, err)
			}
			done[i] = true
			info.Shards++
			continue
		}
		if _, err := engine.RestoreFile(dir, h.Name, ar); err != nil {
			return info, err
		}
		info.Files++
	}
	if k := slices.Index(done, false); k >= 0 {
		return info, fmt.Errorf("%w: the backup lacks shard %d", archive.ErrDamaged, k)
	}
	return info, nil
}

// restoreShard imports shard i's state from rd into a new broker, as the
// snapshot of entry 1 with configuration conf, in a term past every term
// it carries (invariant 3), and counts its queues and messages in info.
func (n *Node) restoreShard(i int, rd io.Reader, conf []byte, term uint64, info *RestoreInfo) error {
	s := &shard{n: n, id: i, dir: shardDir(n.cfg.Dir, i), log: n.log.With("shard", i)}
	n.shards[i] = s
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return err
	}
	b, err := s.openBroker()
	if err != nil {
		return err
	}
	if err = b.ImportState(rd, 1, 1, conf); err == nil {
		hs := engine.ReplicaHardState{Term: max(term, b.ImportedTerm()) + engine.RestoreIDStep(), Commit: 1} // engine/restore_ids.go
		if err = b.PersistHardState(hs); err == nil {
			err = b.SyncLog()
		}
	}
	if err == nil {
		err = countRestored(b, info)
	}
	if cerr := b.Close(); err == nil {
		err = cerr
	}
	return err
}

// shardOfState returns the shard a backup's file name holds the state of.
func shardOfState(name string) (int, bool) {
	v, ok := strings.CutPrefix(name, "shards/")
	if !ok {
		return 0, false
	}
	v, ok = strings.CutSuffix(v, ".state")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(v)
	return i, err == nil && i >= 0 && strconv.Itoa(i) == v
}

// countRestored adds b's queues and their messages to info.
func countRestored(b *engine.Broker, info *RestoreInfo) error {
	for marker := ""; ; {
		names, next, err := b.ListQueues("", marker, 1000)
		if err != nil {
			return err
		}
		for _, name := range names {
			q, err := b.Queue(name)
			if err != nil {
				return err
			}
			a, err := q.Attributes()
			if err != nil {
				return err
			}
			info.Queues++
			info.Messages += a.Active + a.Inactive + a.Delayed
		}
		if next == "" {
			return nil
		}
		marker = next
	}
}
