package index

// perm.go owns the modes of the index's files. The index holds queue
// metadata (and the receipt-handle key in its metadata), so its directory
// and files are for the owner only.
//
// Badger creates its files itself, with these modes (v4.9.6): MANIFEST and
// KEYREGISTRY 0600 (y.OpenSyncedFile, y.OpenTruncFile); tables (.sst),
// memtable WALs (.mem), value logs (.vlog) and DISCARD 0666 (ristretto's
// z.OpenMmapFile); the LOCK pid file 0666; a missing directory 0700. The
// 0666 files are therefore as private as the process's umask makes them,
// and Badger creates them all the time (every flush and compaction). So:
//
//   - Open creates a missing directory 0700 and tightens an existing one to
//     0700: nobody else can reach any file inside, whatever its mode.
//   - Open tightens every file in the directory to 0600 after Badger has
//     opened it (files of an older version, and those Badger just created).
//   - The daemon runs with umask 077 (cmd/smqd), so files Badger creates
//     later are 0600 too; a library must not change the process's umask.

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Modes of the index's directory and files.
const (
	dirPerm  fs.FileMode = 0o700
	filePerm fs.FileMode = 0o600
)

// makeDir creates dir (and missing parents) 0700, or tightens an existing
// dir to 0700.
func makeDir(dir string) error {
	if err := os.MkdirAll(dir, dirPerm); err != nil {
		return fmt.Errorf("index: create %s: %w", dir, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("index: stat %s: %w", dir, err)
	}
	if fi.Mode().Perm()&^dirPerm != 0 {
		if err := os.Chmod(dir, dirPerm); err != nil {
			return fmt.Errorf("index: make %s private: %w", dir, err)
		}
	}
	return nil
}

// privateFiles tightens every regular file in dir to 0600 and returns how
// many it changed. Files that vanish meanwhile (Badger deleting a table)
// are skipped.
func privateFiles(dir string) (int, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("index: list %s: %w", dir, err)
	}
	n := 0
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if err != nil || fi.Mode().Perm()&^filePerm == 0 {
			continue
		}
		if err := os.Chmod(filepath.Join(dir, e.Name()), filePerm); err != nil && !os.IsNotExist(err) {
			return n, fmt.Errorf("index: make %s private: %w", e.Name(), err)
		}
		n++
	}
	return n, nil
}
