package index

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// Badger's file names, part of its on-disk format.
const (
	manifestName    = "MANIFEST"
	keyRegistryName = "KEYREGISTRY"
	tableExt        = ".sst"
	memExt          = ".mem"
	vlogExt         = ".vlog"
)

// dirFiles is a classified listing of a Badger directory.
type dirFiles struct {
	manifest    bool
	keyRegistry bool
	tables      map[uint64]string // table id -> path
	mems        []fileID          // memtable WALs, ascending id
	vlogs       []fileID          // value log files, ascending id
}

// fileID is a numbered Badger file.
type fileID struct {
	id   uint64
	path string
}

// listDir classifies the files in dir by Badger's naming scheme.
func listDir(dir string) (dirFiles, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return dirFiles{}, err
	}
	d := dirFiles{tables: make(map[uint64]string)}
	for _, e := range ents {
		name := e.Name()
		path := filepath.Join(dir, name)
		switch {
		case name == manifestName:
			d.manifest = true
		case name == keyRegistryName:
			d.keyRegistry = true
		case strings.HasSuffix(name, tableExt):
			if id, err := strconv.ParseUint(strings.TrimSuffix(name, tableExt), 10, 64); err == nil {
				d.tables[id] = path
			}
		case strings.HasSuffix(name, memExt):
			if id, err := strconv.ParseUint(strings.TrimSuffix(name, memExt), 10, 64); err == nil {
				d.mems = append(d.mems, fileID{id, path})
			}
		case strings.HasSuffix(name, vlogExt):
			if id, err := strconv.ParseUint(strings.TrimSuffix(name, vlogExt), 10, 64); err == nil {
				d.vlogs = append(d.vlogs, fileID{id, path})
			}
		}
	}
	byID := func(a, b fileID) int {
		switch {
		case a.id < b.id:
			return -1
		case a.id > b.id:
			return 1
		}
		return 0
	}
	slices.SortFunc(d.mems, byID)
	slices.SortFunc(d.vlogs, byID)
	return d, nil
}

// corrupt returns an error wrapping ErrCorrupt about dir.
func corrupt(dir, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrCorrupt, dir, fmt.Sprintf(format, args...))
}

// checkDir examines dir before Badger opens it and fails with ErrCorrupt on
// damage that Badger would either crash on or silently repair by dropping
// committed data. doc.go ("Damaged directories") lists the cases. Its only
// changes to the directory are removing empty (zero-byte) memtable WALs and
// value logs, which Badger refuses to open; Badger does any repair it
// considers safe afterwards.
func checkDir(dir string, bo badger.Options, log *slog.Logger) error {
	d, err := listDir(dir)
	if err != nil {
		return fmt.Errorf("index: list %s: %w", dir, err)
	}
	if !d.manifest {
		// Badger writes its MANIFEST before any other file. Without it,
		// Badger would start an empty store and delete every table.
		if len(d.tables) > 0 || len(d.mems) > 0 || len(d.vlogs) > 0 || d.keyRegistry {
			return corrupt(dir, "%s is missing but %d tables, %d memtable WALs and %d value logs exist",
				manifestName, len(d.tables), len(d.mems), len(d.vlogs))
		}
		return nil // a fresh directory
	}

	// 1. The MANIFEST must parse, and every table it lists must exist and
	// pass its checksums (Badger crashes the process on some malformed
	// tables and never checks the blocks of others).
	mf, err := readManifest(dir, bo)
	if err != nil {
		return err
	}
	v := newTableVerifier()
	var maxRef uint64 // highest version in any table of the MANIFEST
	for id, tm := range mf.Tables {
		path, ok := d.tables[id]
		if !ok {
			return corrupt(dir, "table %06d%s is listed in the %s but missing", id, tableExt, manifestName)
		}
		if tm.Compression != options.None || tm.KeyID != 0 {
			return corrupt(dir, "table %s is compressed (%d) or encrypted (key %d); this index writes neither",
				filepath.Base(path), tm.Compression, tm.KeyID)
		}
		info, err := v.verify(path)
		if err != nil {
			return corrupt(dir, "table %s: %v", filepath.Base(path), err)
		}
		maxRef = max(maxRef, info.maxVersion)
	}

	// 2. Memtable WALs. Badger replays every one and cuts each at its first
	// bad entry, then goes on with the next. Only the newest may
	// legitimately end torn (a crash mid-write; older ones were synced in
	// full before a newer one was started, invariant 3), so damage in an
	// older one would silently drop data the position already covers.
	mems := make([]memWAL, 0, len(d.mems))
	for i, m := range d.mems {
		newest := i == len(d.mems)-1
		w, err := scanMemWAL(m.path, !newest)
		if err != nil {
			return corrupt(dir, "memtable WAL %s: %v", filepath.Base(m.path), err)
		}
		if w.size == 0 {
			// A crash between creating the file and sizing it; it holds
			// nothing, and Badger refuses an empty WAL.
			log.Warn("index removes an empty memtable WAL", "file", filepath.Base(m.path))
			if err := os.Remove(m.path); err != nil {
				return fmt.Errorf("index: %w", err)
			}
			continue
		}
		if w.size < memHeaderBytes {
			return corrupt(dir, "memtable WAL %s is %d bytes, shorter than its header", filepath.Base(m.path), w.size)
		}
		if !newest && !w.cleanTail {
			return corrupt(dir, "memtable WAL %s is damaged after offset %d (%d transactions intact), but newer WALs follow it",
				filepath.Base(m.path), w.validEnd, w.txns)
		}
		if newest && w.validEnd < w.size {
			log.Debug("index memtable WAL ends with a torn or empty tail", "file", filepath.Base(m.path),
				"offset", w.validEnd, "transactions", w.txns)
		}
		mems = append(mems, w)
	}

	// 3. Tables the MANIFEST does not list. Badger deletes them at Open.
	// Legitimately they are the output of a flush or compaction that a
	// crash interrupted before its MANIFEST record was written; then their
	// data is also elsewhere: in the MANIFEST's tables (compaction) or in a
	// memtable WAL not yet deleted (flush). A table holding newer data than
	// both means the MANIFEST lost records.
	for id, path := range d.tables {
		if _, ok := mf.Tables[id]; ok {
			continue
		}
		info, err := v.footerOf(path)
		if err != nil {
			log.Warn("index found an incomplete table; Badger will delete it", "file", filepath.Base(path), "err", err)
			continue
		}
		covered := info.maxVersion <= maxRef
		for _, w := range mems {
			covered = covered || w.maxVersion == info.maxVersion
		}
		if !covered {
			return corrupt(dir, "table %s holds versions up to %d, newer than every table in the %s (up to %d) and found in no memtable WAL: the %s has lost records",
				filepath.Base(path), info.maxVersion, manifestName, maxRef, manifestName)
		}
		log.Warn("index found a table left by an interrupted flush or compaction; Badger will delete it",
			"file", filepath.Base(path))
	}

	// 4. Value logs hold nothing of ours (invariant 5) but Badger reads
	// their header at Open and refuses an empty file. A crash between
	// creating a value log and sizing it leaves one; it is removed. A file
	// with a partial header cannot come from a crash (the file is sized
	// before the header is written) and counts as damage.
	for _, v := range d.vlogs {
		fi, err := os.Stat(v.path)
		if err != nil {
			return fmt.Errorf("index: %w", err)
		}
		switch {
		case fi.Size() == 0:
			log.Warn("index removes an empty value log", "file", filepath.Base(v.path))
			if err := os.Remove(v.path); err != nil {
				return fmt.Errorf("index: %w", err)
			}
		case fi.Size() < memHeaderBytes:
			return corrupt(dir, "value log %s is %d bytes, shorter than its header", filepath.Base(v.path), fi.Size())
		}
	}
	return nil
}

// readManifest replays dir's MANIFEST with Badger's own reader.
func readManifest(dir string, bo badger.Options) (badger.Manifest, error) {
	f, err := os.Open(filepath.Join(dir, manifestName))
	if err != nil {
		return badger.Manifest{}, fmt.Errorf("index: %w", err)
	}
	defer f.Close()
	mf, _, err := badger.ReplayManifestFile(f, bo.ExternalMagicVersion, bo)
	if err != nil {
		return mf, corrupt(dir, "%s: %v", manifestName, err)
	}
	return mf, nil
}

// footerOf reads and verifies only the footer and index of a table.
func (v *tableVerifier) footerOf(path string) (tableInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return tableInfo{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return tableInfo{}, err
	}
	return v.footer(f, st.Size())
}
