package engine

// Online backup and restore of a durable broker.
//
// A backup is what a start-up would need to come up where the broker was:
// the index as of one instant (every key and value), then the log's
// bytes up to a position E taken after that instant, every live segment
// byte for byte, and the files of the data directory the caller names (a
// server's credentials). It is written as an engine/archive stream while
// the broker goes on serving. Restore writes such a stream into a new
// data directory; opening a broker there recovers as after a clean stop
// at E: it replays the log from the index copy's checkpoint position to E.
//
// Invariants:
//  1. Every segment the index copy may point into is in the copy: from
//     before the index is read until the log is copied, compaction removes
//     no segment (Broker.backups; taking compactMu once waits out a pass
//     that started before).
//  2. The log copy holds every record the index copy reflects: E is taken
//     after the index is copied and after a Sync, and the index never
//     reflects a record that is not synced (durable.go invariant 1).
//  3. Everything acknowledged before Backup was called is in the copy, in
//     every sync mode: its records lie before E (the Sync also covers what
//     the interval mode acknowledged unsynced).
//  4. Restore fills a new directory beside its target (absent or empty)
//     and renames it into place only once all of it is written and synced:
//     the target never holds part of a backup, after a failure or a crash.
//     It checks every frame of the archive (archive.ErrDamaged) before
//     using it and removes what it wrote if it fails.
//  5. Neither copies a damaged log record on: Backup verifies every record
//     it copies (header, checksum, padding: wal.RawChecker) and fails at
//     the first that does not verify, so that no backup is made that a
//     start would cut or refuse; Restore verifies them again (a backup
//     made before backups verified them) and fails with archive.ErrDamaged.
//
// Not a cluster node's: a shard's replicated broker refuses (a cluster's
// copies are its replicas; docs/operations.md, "Backups").

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/smqd/smqd/engine/archive"
	"github.com/smqd/smqd/index"
	"github.com/smqd/smqd/wal"
)

// BackupFormat is the format of what a backup's files hold (the
// manifest's Format); Restore refuses any other.
const BackupFormat = 1

// ErrBackupUnsupported is returned by Backup on a broker that has no data
// directory to copy (in memory) or is a shard's replica (engine/cluster).
var ErrBackupUnsupported = errors.New("engine: backup is not supported by this broker")

// The archive's names for the index stream and the log's files.
const (
	backupIndexName = "index.kv"
	// backupIndexNameBadger: the index of the first backups, Badger's own
	// backup stream (restored with its Load).
	backupIndexNameBadger = "index.badger"
	backupWALDir          = "wal/"
)

// BackupOptions are the options of Backup.
type BackupOptions struct {
	// Files names more files of the data directory (Options.Dir) to
	// include, relative to it with '/' separators, for example the
	// credentials a server keeps there. A missing one is skipped. The
	// index, the log and the LOCK file are not files one may name.
	Files []string
	// BytesPerSecond caps the rate the backup writes at, so that the
	// disk and CPUs it shares with the traffic are not taken over for its
	// duration; 0 is no cap.
	BytesPerSecond int64
	// Cancel, if not nil, ends the backup with an error once it
	// is closed; a capped backup's sleeps look at it. A server closes it
	// when the client hangs up: a capped backup's writes reach the
	// connection only once its buffers fill (about 16 KiB: 4.5 hours at
	// a rate of 1), and meanwhile it held the one backup slot and every
	// log segment (backup audit, stop 62).
	Cancel <-chan struct{}
}

// errBackupCanceled ends a backup whose BackupOptions.Cancel was closed.
var errBackupCanceled = errors.New("engine: backup canceled (its client hung up)")

// BackupInfo says what a backup copied.
type BackupInfo struct {
	// Checkpoint is the index's checkpoint position when the backup
	// started, LogStart the first position of the log copied and LogEnd
	// the position the copy ends at (E).
	Checkpoint, LogStart, LogEnd uint64
	Segments                     int   // log segments copied
	Files                        int   // files of BackupOptions.Files copied
	IndexBytes                   int64 // bytes of the index stream
	Bytes                        int64 // data bytes of the archive, all files
}

// Backup writes a copy of the broker's durable state to w, as an
// engine/archive stream, while the broker goes on. Everything acknowledged
// before the call is in it (the file comment of backup.go). It fails with
// ErrBackupUnsupported on a broker in memory or a shard's replica, with
// ErrClosed if the broker is closed meanwhile, and with w's error. w may
// be slow: the broker does not wait for it, but no log segment is removed
// until Backup returns.
func (b *Broker) Backup(w io.Writer, opts BackupOptions) (BackupInfo, error) {
	var info BackupInfo
	if err := b.CanBackup(); err != nil {
		return info, err
	}
	d := b.store.(*durableStore)
	for _, name := range opts.Files {
		if !archive.ValidName(name) || name == backupIndexName || name == "LOCK" ||
			strings.HasPrefix(name, backupWALDir) || strings.HasPrefix(name, "index/") {
			return info, fmt.Errorf("%w: a backup cannot name the file %q", ErrInvalidArgument, name)
		}
	}
	if opts.BytesPerSecond < 0 {
		return info, fmt.Errorf("%w: BytesPerSecond %d is negative", ErrInvalidArgument, opts.BytesPerSecond)
	}
	// Invariant 1: no segment goes from here on.
	b.backups.Add(1)
	defer func() {
		b.backups.Add(-1)
		b.compactor.kick() // what was kept may go now
	}()
	b.compactMu.Lock()
	//lint:ignore SA2001 an empty section waits out a compaction pass in flight
	b.compactMu.Unlock()
	info.Checkpoint = d.cpPos.Load()

	cw := &backupWriter{w: w, closed: &b.closed, cancel: opts.Cancel, rate: opts.BytesPerSecond, now: time.Now, sleep: time.Sleep}
	if b.testBackup.now != nil {
		cw.now, cw.sleep = b.testBackup.now, b.testBackup.sleep
	}
	cw.start = cw.now()
	aw, err := archive.NewWriter(cw, archive.Manifest{
		Format:  BackupFormat,
		Created: b.clock.Now().UTC(),
		Fields:  map[string]string{"checkpoint": strconv.FormatUint(info.Checkpoint, 10)},
	})
	if err != nil {
		return info, err
	}
	if h := b.testBackup.beforeIndex; h != nil {
		h()
	}
	if err := aw.Create(archive.FileHeader{Name: backupIndexName, Mode: 0o600}); err != nil {
		return info, err
	}
	iw := &backupWriter{w: aw, closed: &b.closed, cancel: opts.Cancel}
	if err := d.idx.Backup(iw); err != nil {
		return info, mapErr(err)
	}
	info.IndexBytes = iw.n
	if h := b.testBackup.beforeLog; h != nil {
		h()
	}
	// Invariant 2: E after the index copy, and synced. (A full disk does
	// not stop a backup: the flush writes nothing new.)
	if err := d.sync(); err != nil {
		b.storageFailed(err) // as Sync: a failed fsync is the log's end
		return info, err
	}
	e := d.wal.SyncedEnd()
	info.LogEnd = uint64(e)
	if err := b.backupLog(d.wal, aw, e, &info); err != nil {
		return info, err
	}
	if info.Files, err = BackupFiles(aw, b.opts.Dir, opts.Files); err != nil {
		return info, err
	}
	if err := aw.Close(); err != nil {
		return info, err
	}
	info.Bytes = cw.n
	b.log.Info("backup written", "checkpoint", info.Checkpoint, "log_start", info.LogStart, "log_end", info.LogEnd,
		"segments", info.Segments, "files", info.Files, "bytes", info.Bytes)
	return info, nil
}

// CanBackup returns the error Backup would fail with at once: nil on an
// open durable broker, ErrBackupUnsupported in memory or on a shard's
// replica, ErrClosed once closed.
func (b *Broker) CanBackup() error {
	if err := b.readable(); err != nil {
		return err
	}
	if d, ok := b.store.(*durableStore); !ok || d.repl != nil {
		return ErrBackupUnsupported
	}
	return nil
}

// backupLog copies the log's segments up to e (invariants 1 and 2), each
// as its bytes with the file's length to extend it to, and a hole marker
// where a removed segment's positions lie between two of them (wal's doc,
// "Segment files").
func (b *Broker) backupLog(l *wal.Log, aw *archive.Writer, e wal.Pos, info *BackupInfo) error {
	segs := l.Segments()
	buf := make([]byte, archive.MaxData)
	for i, s := range segs {
		if i == 0 {
			info.LogStart = uint64(s.Start)
		} else if s.Start >= e {
			break // began at or after E: nothing of it is copied
		}
		end := max(min(s.End, e), s.Start)
		if err := aw.Create(archive.FileHeader{Name: fmt.Sprintf("%s%016x.wal", backupWALDir, uint64(s.Start)),
			Mode: 0o600, ExtendTo: s.FileBytes}); err != nil {
			return err
		}
		chk := wal.NewRawChecker(s.Start, s.Start)
		for p := s.Start; p < end; {
			n, err := l.ReadRaw(p, buf[:min(int64(len(buf)), int64(end-p))])
			if err == nil && n == 0 {
				err = fmt.Errorf("the log ends at %d, before %d", p, end)
			}
			if err == nil {
				err = chk.Write(buf[:n]) // invariant 5
			}
			if err != nil {
				return fmt.Errorf("engine: backup: segment %016x: %w", uint64(s.Start), mapErr(err))
			}
			if _, err := aw.Write(buf[:n]); err != nil {
				return err
			}
			p += wal.Pos(n)
		}
		if err := chk.Close(); err != nil {
			return fmt.Errorf("engine: backup: segment %016x: %w", uint64(s.Start), mapErr(err))
		}
		info.Segments++
		if i+1 < len(segs) && s.End < segs[i+1].Start && segs[i+1].Start < e {
			if err := aw.Create(archive.FileHeader{Name: fmt.Sprintf("%s%016x.hole", backupWALDir, uint64(s.End)), Mode: 0o600}); err != nil {
				return err
			}
		}
	}
	return nil
}

// backupWriter counts what a backup wrote, keeps it at or under rate
// bytes a second (if rate > 0) by sleeping before a write that would
// exceed it, and stops it once the broker is closed.
type backupWriter struct {
	w      io.Writer
	n      int64
	closed interface{ Load() bool }
	cancel <-chan struct{} // BackupOptions.Cancel
	rate   int64
	start  time.Time
	now    func() time.Time
	sleep  func(time.Duration)
}

// Write paces a capped backup evenly: pieces of about a quarter second's
// worth (512 B to 64 KiB), each sent when the rate allows, with sleeps of
// at most backupSleep that look at closed. It wrote a 1 MiB frame at once
// and then slept its whole debt in one sleep, inside the index's read
// transaction: 17 minutes at --rate 1K, through which Close (and so a
// SIGTERM), every other backup and compaction waited, and a client's 30 s
// idle timeout ended any backup capped below 35 KB/s (backup audit).
func (cw *backupWriter) Write(p []byte) (int, error) {
	if cw.rate <= 0 {
		if err := cw.stopped(); err != nil {
			return 0, err
		}
		n, err := cw.w.Write(p)
		cw.n += int64(n)
		return n, err
	}
	piece := int(min(max(cw.rate/4, 512), 64<<10))
	done := 0
	for len(p) > 0 {
		due := cw.start.Add(time.Duration(float64(cw.n) / float64(cw.rate) * float64(time.Second)))
		for d := due.Sub(cw.now()); d > 0; d = due.Sub(cw.now()) {
			if err := cw.stopped(); err != nil {
				return done, err
			}
			cw.sleep(min(d, backupSleep))
		}
		if err := cw.stopped(); err != nil {
			return done, err
		}
		n, err := cw.w.Write(p[:min(len(p), piece)])
		cw.n += int64(n)
		done += n
		if err != nil {
			return done, err
		}
		p = p[n:]
	}
	return done, nil
}

// stopped returns ErrClosed once the broker is closed, errBackupCanceled
// once the backup's Cancel is.
func (cw *backupWriter) stopped() error {
	if cw.closed.Load() {
		return ErrClosed
	}
	select {
	case <-cw.cancel:
		return errBackupCanceled
	default:
		return nil
	}
}

// backupSleep is the longest sleep of a capped backup between two looks
// at whether the broker closes.
const backupSleep = 100 * time.Millisecond

// RestoreInfo says what Restore wrote.
type RestoreInfo struct {
	Manifest archive.Manifest
	Segments int    // log segments
	LogEnd   uint64 // the end of the log restored: a start recovers up to it
	Files    int    // other files (BackupOptions.Files of the backup)
	Bytes    int64  // data bytes restored
}

// Restore writes a backup read from r into dir, which must not exist or be
// empty (backup.go invariant 4). A broker opened on dir (Options.Dir) then
// recovers the state the backup copied. Restore writes into a new
// directory beside dir and renames it to dir only once all of it is
// written and synced, so that a failure, or a crash, never leaves a dir
// that holds part of a backup (a crash may leave the hidden
// ".NAME.restoring-*" directory, which no broker opens, and the next
// restore into dir removes). An archive that is not whole fails with an
// error wrapping archive.ErrDamaged.
func Restore(r io.Reader, dir string) (info RestoreInfo, err error) {
	err = RestoreDir(dir, func(tmp string) (err error) {
		info, err = restoreInto(r, tmp)
		return err
	})
	return info, err
}

// RestoreDir makes dir, which must be absent or empty, from fill, which
// writes into a new directory beside it: dir is replaced only once fill
// has succeeded, and never holds part of what it wrote (invariant 4).
// Restore uses it, and so does engine/cluster's.
//
// A dir that is a symbolic link is restored where it points, and the link
// is kept. A dir that is a mount point is refused before anything is
// written: the new directory could not be renamed onto it.
func RestoreDir(dir string, fill func(tmp string) error) (err error) {
	dir = filepath.Clean(dir)
	if fi, lerr := os.Lstat(dir); lerr == nil && fi.Mode()&os.ModeSymlink != 0 {
		target, err := filepath.EvalSymlinks(dir)
		if err != nil {
			return fmt.Errorf("%w: restore into %s, a symbolic link: %w (make the directory it points to first)", ErrInvalidArgument, dir, err)
		}
		dir = target
	}
	mountErr := func() error {
		return fmt.Errorf("%w: restore into %s: it is a mount point, which a restore cannot replace; restore into a directory inside it (%s) and start smqd there",
			ErrInvalidArgument, dir, filepath.Join(dir, "smqd"))
	}
	switch ents, rerr := os.ReadDir(dir); {
	case errors.Is(rerr, os.ErrNotExist):
	case rerr != nil:
		return fmt.Errorf("engine: restore: %w", rerr)
	case isMountPoint(dir):
		return mountErr() // before "not empty": a new volume holds lost+found
	case len(ents) > 0:
		return fmt.Errorf("%w: restore into %s: the directory is not empty", ErrInvalidArgument, dir)
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return fmt.Errorf("engine: restore: %w", err)
	}
	// What a restore into dir that crashed left (kill -9, or Badger's
	// SIGBUS on a volume that filled: backup audit, 2026-12-07, a tmpfs
	// left full by it) goes first, so that this one finds the room.
	// Names are compared, not globbed: dir or its parent may hold '*',
	// '?' or '[' (review U). A restore's directory is flock(2)ed while it
	// runs, and the look and the new directory are made under the
	// parent's, so that a restore into dir that is still running is not
	// taken for a crashed one.
	prefix := "." + filepath.Base(dir) + ".restoring-"
	unlockParent, _, err := lockPath(parent, true)
	if err != nil {
		return fmt.Errorf("engine: restore: %w", err)
	}
	tmp, unlockTmp, err := func() (string, func(), error) {
		defer unlockParent()
		ents, err := os.ReadDir(parent)
		if err != nil {
			return "", nil, fmt.Errorf("engine: restore: %w", err)
		}
		for _, e := range ents {
			if !e.IsDir() || !strings.HasPrefix(e.Name(), prefix) {
				continue
			}
			old := filepath.Join(parent, e.Name())
			unlock, running, err := lockPath(old, false)
			switch {
			case running:
				continue // a restore into dir that runs: it fails at its end ("not empty")
			case errors.Is(err, os.ErrNotExist):
				continue
			case err != nil:
				return "", nil, fmt.Errorf("engine: restore: %w", err)
			}
			err = os.RemoveAll(old)
			unlock()
			if err != nil {
				return "", nil, fmt.Errorf("engine: restore: removing %s, left by a restore that did not finish: %w", old, err)
			}
		}
		tmp, err := os.MkdirTemp(parent, prefix)
		if err != nil {
			return "", nil, fmt.Errorf("engine: restore: %w", err)
		}
		unlock, _, err := lockPath(tmp, true)
		if err != nil {
			_ = os.RemoveAll(tmp)
			return "", nil, fmt.Errorf("engine: restore: %w", err)
		}
		return tmp, unlock, nil
	}()
	if err != nil {
		return err
	}
	defer unlockTmp()
	defer func() {
		if err != nil {
			_ = os.RemoveAll(tmp)
		}
	}()
	if err := fill(tmp); err != nil {
		return err
	}
	// An empty dir gives way to the restored one; one that is no longer
	// empty is not touched.
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		if errors.Is(err, syscall.EBUSY) {
			return mountErr() // a bind mount of the same file system
		}
		return fmt.Errorf("engine: restore: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("engine: restore: %w", err)
	}
	if err := wal.OSFS().SyncDir(parent); err != nil {
		return fmt.Errorf("engine: restore: %w", err)
	}
	return nil
}

// BackupFiles adds the named files of dir (relative, with '/'
// separators) to an archive, a missing one skipped, and returns how many
// it added. Backup uses it, and so does engine/cluster's.
func BackupFiles(aw *archive.Writer, dir string, names []string) (int, error) {
	n := 0
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return n, fmt.Errorf("engine: backup: %w", err)
		}
		if err := aw.Create(archive.FileHeader{Name: name, Mode: 0o600}); err != nil {
			return n, err
		}
		if _, err := aw.Write(data); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// RestoreFile writes the archive's current file, r, to name under dir
// (its directories made as needed), synced. restoreInto uses it for the
// files a backup names, and so does engine/cluster's.
func RestoreFile(dir, name string, r io.Reader) (int64, error) {
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return 0, fmt.Errorf("engine: restore: %w", err)
	}
	return restoreFile(p, r, 0)
}

// restoreInto writes the archive into dir, a new empty directory.
func restoreInto(r io.Reader, dir string) (info RestoreInfo, err error) {
	ar, err := archive.NewReader(r)
	if err != nil {
		return info, err
	}
	info.Manifest = ar.Manifest()
	if f := info.Manifest.Format; f != BackupFormat {
		return info, fmt.Errorf("engine: restore: a backup of format %d; this version reads format %d", f, BackupFormat)
	}
	seen := map[string]bool{}
	for {
		h, err := ar.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return info, err
		}
		if seen[h.Name] {
			return info, fmt.Errorf("%w: the file %s twice", archive.ErrDamaged, h.Name)
		}
		seen[h.Name] = true
		switch {
		case h.Name == backupIndexName:
			if err := index.Restore(filepath.Join(dir, "index"), ar, index.Options{}); err != nil {
				return info, err
			}
		case h.Name == backupIndexNameBadger: // backups of 2026-12-05 (fe342a7..994fd58^)
			if seen[backupIndexName] {
				return info, fmt.Errorf("%w: two indexes", archive.ErrDamaged)
			}
			if err := index.RestoreBadgerStream(filepath.Join(dir, "index"), ar, index.Options{}); err != nil {
				return info, err
			}
			seen[backupIndexName] = true
		case strings.HasPrefix(h.Name, backupWALDir):
			base := strings.TrimPrefix(h.Name, backupWALDir)
			if !isLogFileName(base) {
				return info, fmt.Errorf("%w: %s is not a log file's name", archive.ErrDamaged, h.Name)
			}
			if err := os.MkdirAll(filepath.Join(dir, "wal"), 0o700); err != nil {
				return info, fmt.Errorf("engine: restore: %w", err)
			}
			var src io.Reader = ar
			var chk *wal.RawChecker
			start, _ := strconv.ParseUint(base[:16], 16, 64)
			if strings.HasSuffix(base, ".wal") {
				chk = wal.NewRawChecker(wal.Pos(start), wal.Pos(start))
				src = io.TeeReader(ar, rawCheckWriter{chk})
			}
			n, err := restoreFile(filepath.Join(dir, "wal", base), src, h.ExtendTo)
			if err == nil && chk != nil {
				err = chk.Close()
			}
			if errors.Is(err, wal.ErrCorrupt) { // invariant 5
				err = fmt.Errorf("%w: %s: %w", archive.ErrDamaged, h.Name, err)
			}
			if err != nil {
				return info, err
			}
			info.Bytes += n
			if chk != nil {
				info.Segments++
				info.LogEnd = max(info.LogEnd, start+uint64(n))
			}
		case strings.HasPrefix(h.Name, "index/") || h.Name == "LOCK":
			return info, fmt.Errorf("%w: %s is not a file a backup holds", archive.ErrDamaged, h.Name)
		default:
			n, err := RestoreFile(dir, h.Name, ar)
			if err != nil {
				return info, err
			}
			info.Bytes += n
			info.Files++
		}
	}
	if !seen[backupIndexName] || info.Segments == 0 {
		return info, fmt.Errorf("%w: the archive holds no index or no log", archive.ErrDamaged)
	}
	if err := jumpRestoredBoot(dir); err != nil { // restore_ids.go
		return info, err
	}
	for _, d := range []string{filepath.Join(dir, "wal"), dir} {
		if err := wal.OSFS().SyncDir(d); err != nil {
			return info, fmt.Errorf("engine: restore: %w", err)
		}
	}
	return info, nil
}

// rawCheckWriter feeds a restored segment's bytes to its checker.
type rawCheckWriter struct{ c *wal.RawChecker }

func (w rawCheckWriter) Write(p []byte) (int, error) { return len(p), w.c.Write(p) }

// isLogFileName reports whether name is a segment's or a hole marker's.
func isLogFileName(name string) bool {
	hexPart, ok := strings.CutSuffix(name, ".wal")
	if !ok {
		hexPart, ok = strings.CutSuffix(name, ".hole")
	}
	if !ok || len(hexPart) != 16 {
		return false
	}
	_, err := strconv.ParseUint(hexPart, 16, 64)
	return err == nil && strings.ToLower(hexPart) == hexPart
}

// restoreFile writes the current file of an archive to p (a new file,
// 0600), extends it with zeros to extendTo, and syncs it.
func restoreFile(p string, r io.Reader, extendTo int64) (int64, error) {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, fmt.Errorf("engine: restore: %w", err)
	}
	n, err := io.Copy(f, r)
	if err == nil && extendTo > n {
		err = f.Truncate(extendTo)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		var fe *os.PathError
		if errors.As(err, &fe) || errors.Is(err, os.ErrNotExist) {
			return n, fmt.Errorf("engine: restore: %w", err)
		}
		return n, err // the archive's (ErrDamaged)
	}
	return n, nil
}
