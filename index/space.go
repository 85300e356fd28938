package index

// space.go owns what the engine's free-space guard needs from the index:
// the free bytes of the file system holding it, and the reserve Badger
// needs to keep writing once new sends are refused.

// FreeBytes returns the bytes an unprivileged writer may still allocate on
// the file system holding the store's directory (statfs f_bavail × f_bsize
// on linux; elsewhere an error wrapping errors.ErrUnsupported). It works
// after Close too.
func (s *Store) FreeBytes() (int64, error) { return freeBytes(s.dir) }

// ReserveBytes is the free space Badger needs to go on writing (the
// checkpoints of receives and deletes, their flushes and compactions)
// after the engine stops accepting sends. It matters more than for the
// WAL: Badger writes memtable WALs and tables through shared memory
// mappings of sparse files (ristretto z.OpenMmapFile truncates a new file
// to its full size without allocating it), so running out of space there
// is a SIGBUS that kills the process, not an error. From Badger v4.9.6's
// source, with B = the Badger options of o:
//
//   - memtable WALs: each .mem file is created 2 × MemTableSize long
//     (memtable.go, openMemTable) and written up to that through its
//     mapping; one is active and up to NumMemtables + 1 wait to be or are
//     being flushed (flushChan holds NumMemtables): (NumMemtables + 2) ×
//     2 × MemTableSize;
//   - a flush: the level-0 table of a memtable (table.CreateTable, also a
//     mapping), written before the memtable's WAL is deleted: MemTableSize;
//   - a level-0 compaction: its output is written before its input goes,
//     NumLevelZeroTables tables of about MemTableSize each plus the
//     overlapping base level: NumLevelZeroTables × MemTableSize +
//     BaseLevelSize;
//   - the other compactors (NumCompactors - 1), each one table and its
//     overlap in the next level: BaseTableSize × (1 + LevelSizeMultiplier);
//   - the value log and DISCARD files, mapped at Open (2 × ValueLogFileSize
//     and 1 MiB; values are inline, so they hold no data).
//
// About 177 MiB with the defaults. If level 0 backs up to
// NumLevelZeroTablesStall tables, its compaction needs more; the engine's
// checkpoints are small enough that it does not in practice.
func (o Options) ReserveBytes() int64 {
	b := o.withDefaults().badgerOptions("")
	mem := b.MemTableSize
	return int64(b.NumMemtables+2)*2*mem +
		mem +
		int64(b.NumLevelZeroTables)*mem + b.BaseLevelSize +
		int64(max(b.NumCompactors-1, 0))*b.BaseTableSize*int64(1+b.LevelSizeMultiplier) +
		2*b.ValueLogFileSize + discardFileBytes
}

// discardFileBytes is the size Badger maps its DISCARD file with (discard.go).
const discardFileBytes = 1 << 20
