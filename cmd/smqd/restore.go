package main

// smqd restore: writes a backup (GET /backup, smqctl backup) into a new
// data directory, then opens it once as the daemon would, so that a backup
// that does not recover fails here and not at the next start. A cluster's
// backup is restored on every member of a new cluster, each with its
// --node-id and the same --cluster-peers (engine/cluster/backup.go).

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/smqd/smqd/cmd/internal/envflag"
	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/engine/cluster"
)

// backupFiles are the daemon's files of the data directory that a backup
// copies besides the engine's (a missing one is skipped).
var backupFiles = []string{defaultCredentialsName, "push-signing.key", "push-signing.crt"}

// runRestore is "smqd restore"; it returns the exit status.
func runRestore(args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("smqd restore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	from := fs.String("from", "", "the backup file to restore (- reads standard input)")
	dir := fs.String("data-dir", "./smqd-data", "the data directory to create: it must not exist or be empty")
	check := fs.Bool("check", true, "open the restored directory once, as a start would, to check that it recovers")
	nodeID := fs.Uint64("node-id", 0, "a cluster's backup: this member's id in the new cluster")
	sizes := config{}
	fs.Int64Var(&sizes.walSegmentBytes, "wal-segment-bytes", 64<<20, "the check opens the directory with this segment size: give the value smqd will start with (its free-space minimum scales with it)")
	fs.Int64Var(&sizes.memtableBytes, "index-memtable-bytes", 8<<20, "the check opens the directory with this memtable size: give the value smqd will start with")
	fs.Int64Var(&sizes.freeReserve, "free-space-reserve", 0, "the check opens the directory with this free-space reserve: give the value smqd will start with")
	peers := fs.String("cluster-peers", "", "a cluster's backup: the new cluster's members, \"1=HOST:PORT,2=HOST:PORT,3=HOST:PORT\" (their Raft addresses), as every member will start with")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: smqd restore --from FILE --data-dir DIR [--node-id N --cluster-peers PEERS]\n\n"+
			"Writes a backup (smqctl backup, GET /backup) into a new data directory; start smqd on it afterwards.\n"+
			"A cluster's backup is restored on every member of a new cluster, each with its --node-id and the\n"+
			"same --cluster-peers; then each starts with those flags and the backup's --shards.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	// As the daemon's flags: SMQD_DATA_DIR and the sizes smqd starts with
	// count here too (they were ignored until 2026-12-06).
	onCmdline := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCmdline[f.Name] = true })
	set, err := envflag.Apply(fs, envPrefix, getenv)
	if err != nil {
		fmt.Fprintln(stderr, "smqd restore:", err)
		return 2
	}
	if *from == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	if err := sizes.validateSizes(); err != nil {
		fmt.Fprintln(stderr, "smqd restore:", namesVariable(err, fs, onCmdline, set))
		return 2
	}
	in := stdin
	if *from != "-" {
		f, err := os.Open(*from)
		if err != nil {
			fmt.Fprintln(stderr, "smqd restore:", err)
			return 1
		}
		defer f.Close()
		in = f
	}
	privateUmask() // the restored files are as private as the daemon's
	start := time.Now()
	if *peers != "" || *nodeID != 0 {
		// The shards' brokers are opened to import their state: with the
		// sizes the members will start with (their free-space minimum).
		eo := engine.Options{FreeSpaceReserve: sizes.freeReserve}
		eo.WAL.SegmentBytes, eo.Index.MemTableBytes = sizes.walSegmentBytes, sizes.memtableBytes
		return restoreCluster(in, *dir, *nodeID, *peers, eo, start, stdout, stderr)
	}
	_, statErr := os.Stat(*dir)
	existed := statErr == nil
	info, err := engine.Restore(in, *dir)
	if err != nil {
		if strings.Contains(err.Error(), fmt.Sprintf("format %d;", cluster.BackupFormat)) {
			// Not a version too old: a single node's restore meeting a
			// cluster's backup (docs audit, 2026-12-06).
			err = fmt.Errorf("this is a cluster's backup (format %d), not a single node's: restore it on each member of a new cluster with --node-id and --cluster-peers", cluster.BackupFormat)
		}
		fmt.Fprintln(stderr, "smqd restore:", err)
		return 1
	}
	fmt.Fprintf(stdout, "restored a backup of %s into %s: %d log segments, %d other files, %d bytes, in %s\n",
		info.Manifest.Created.Format(time.RFC3339), *dir, info.Segments, info.Files, info.Bytes, time.Since(start).Round(time.Millisecond))
	if !*check {
		return 0
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts := engine.Options{Dir: *dir, Logger: log, FreeSpaceReserve: sizes.freeReserve}
	opts.WAL.SegmentBytes, opts.Index.MemTableBytes = sizes.walSegmentBytes, sizes.memtableBytes
	b, err := engine.Open(opts)
	if err != nil {
		// As any failed restore: no directory that holds the backup is
		// left (a retry would find it not empty), and the backup is the
		// problem, not the directory.
		if rerr := unrestore(*dir, existed); rerr != nil {
			fmt.Fprintln(stderr, "smqd restore: removing what was restored:", rerr)
		}
		fmt.Fprintf(stderr, "smqd restore: the restored backup does not open, so it was removed from %s: %v\n", *dir, err)
		if errors.Is(err, engine.ErrDiskFull) {
			// The backup may be fine: the check's sizes did not fit (docs audit).
			fmt.Fprintln(stderr, "smqd restore: the check opens with --wal-segment-bytes, --index-memtable-bytes and --free-space-reserve: restore again with the values smqd will start with, or with --check=false")
		}
		return 1
	}
	rec := b.Recovery()
	queues := 0
	for marker := ""; ; {
		names, next, err := b.ListQueues("", marker, 0)
		if err != nil {
			break
		}
		queues += len(names)
		if next == "" {
			break
		}
		marker = next
	}
	if err := b.Close(); err != nil {
		fmt.Fprintln(stderr, "smqd restore: closing the restored broker:", err)
		return 1
	}
	fmt.Fprintf(stdout, "checked: %d queues, %d messages recovered\n", queues, rec.Messages)
	return 0
}

// unrestore empties dir after a restore whose check failed, and removes
// it if the restore made it.
func unrestore(dir string, existed bool) error {
	if !existed {
		return os.RemoveAll(dir)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// restoreCluster is "smqd restore" of a cluster's backup, as member id of
// a new cluster whose members are peers.
func restoreCluster(in io.Reader, dir string, id uint64, peers string, eo engine.Options, start time.Time, stdout, stderr io.Writer) int {
	members, err := parsePeers(peers)
	if err == nil && (id == 0 || members[id] == "") {
		err = fmt.Errorf("--node-id %d is not one of --cluster-peers %q", id, peers)
	}
	if err != nil {
		fmt.Fprintln(stderr, "smqd restore:", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	info, err := cluster.Restore(in, dir, cluster.Config{NodeID: id, Peers: members, Logger: log, Engine: eo})
	if err != nil {
		fmt.Fprintln(stderr, "smqd restore:", err)
		if errors.Is(err, engine.ErrDiskFull) {
			fmt.Fprintln(stderr, "smqd restore: the shards open with --wal-segment-bytes, --index-memtable-bytes and --free-space-reserve: restore again with the values smqd will start with")
		}
		return 1
	}
	fmt.Fprintf(stdout, "restored a cluster's backup of %s into %s as member %d of %d: %d shards, %d queues, %d messages, %d other files, in %s; start it with --node-id %d --cluster-peers %q --shards %d\n",
		info.Manifest.Created.Format(time.RFC3339), dir, id, len(members), info.Shards, info.Queues, info.Messages, info.Files, time.Since(start).Round(time.Millisecond), id, peers, info.Shards)
	return 0
}
