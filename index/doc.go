// Package index stores the broker's checkpointed state in Badger.
//
// It is the only package of smqd that imports Badger. It stores opaque
// values under typed keys; the engine decides what the values mean. The
// engine's checkpointer folds the write-ahead log into the index in large
// batches (Batch, Store.Commit) and records the WAL position the index
// reflects; on start-up the engine loads everything (Store.Queues,
// Store.Messages) and replays the WAL from that position. The index knows
// nothing about messages, HTTP or the WAL format.
//
// # Key layout
//
// Part of the on-disk format; never change. Integers are big-endian, so
// byte order is numeric order: the messages of one queue are contiguous and
// ordered by seq, and Messages returns queue by queue, seq by seq.
//
//	key                                  value
//	'm' + name                           broker metadata (opaque), e.g. the receipt-handle key, id high-water marks
//	'p'                                  checkpoint position: uint64, 8 bytes; every WAL record before it is reflected
//	'q' + queueID (8)                    queue (opaque)
//	's' + queueID (8) + seq (8)          message (opaque, typically ~60 bytes)
//	't' + topicID (8)                    topic (opaque)
//	'u' + subscriptionID (8)             subscription of a topic (opaque)
//	'c' + topicID (8)                    a topic's publish counts (opaque; not idempotent to
//	                                     replay: the engine's value says which log it covers)
//
// # Invariants
//
//  1. Keys have exactly the layout above. A 'q', 's', 't', 'u' or 'c' key of another
//     length, or a 'p' value that is not 8 bytes, is reported as ErrCorrupt,
//     never skipped.
//  2. The position is written last. Commit writes a batch in two parts: the
//     data (every operation, through a Badger WriteBatch split into as many
//     transactions as needed), then the position in a transaction of its
//     own, started only after the data part is durable. So every WAL record
//     the stored position claims is in the index; the index may hold data
//     newer than its position (the engine's replay is idempotent).
//  3. Every Badger write transaction is synced before it is acknowledged
//     (SyncWrites: msync of the memtable WAL), and after the data part the
//     directory is synced too, so a memtable WAL created during it cannot
//     vanish while a later one holding the position survives. Hence after a
//     crash only the newest memtable WAL can end torn; every older one ends
//     at a transaction boundary.
//  4. Commits are serialized. Within a batch, operations apply in order and
//     the last one on a key wins. DeleteQueue deletes the queue key, every
//     message of the queue stored at commit time, and the queue's messages
//     put earlier in the batch; messages put later in the batch stay.
//  5. Every value is smaller than Badger's ValueThreshold, so all data lives
//     in the LSM tree and the value log never holds any (Commit rejects
//     larger values with ErrValueTooLarge).
//  6. Badger never opens a directory that the checks in check.go have not
//     passed: MANIFEST present if any other Badger file is; MANIFEST
//     readable; every table it lists present, with the checksums of its
//     index and of every block right; every memtable WAL but the newest
//     intact up to its end; every table the MANIFEST does not list holding
//     nothing newer than the listed tables unless a memtable WAL holds the
//     same data.
//
// # Concurrency
//
// A Store is safe for concurrent use. Every call holds Store.mu for reading
// while it runs; Close takes it for writing, so it waits for running calls
// and nothing touches Badger after it. Commit additionally holds
// Store.commitMu (invariant 4). A Batch belongs to one goroutine. Badger
// runs its own goroutines (writer, memtable flusher, compactors); Close
// stops them.
//
// # Damaged directories
//
// Open checks the directory before Badger reads it (invariant 6), because
// Badger repairs some damage by dropping data (it deletes tables its
// MANIFEST does not list, cuts every memtable WAL at its first bad entry and
// replays the newer ones, starts empty without a MANIFEST) and ends the
// process (log.Fatalf) or panics in its own goroutines on other damage (a
// malformed table footer or block). Table verification reads every table
// with plain reads, so it costs one pass over the data at start-up (0.25 to
// 0.35 s for 10,000,000 messages, 790 MiB, from the page cache) and leaves
// the pages cached for the scan that follows. What happens in each case, as
// crash_test.go shows:
//
//	damage                                    outcome
//	MANIFEST removed                          ErrCorrupt ("MANIFEST is missing but N tables ... exist")
//	MANIFEST truncated to 0 or a flipped byte ErrCorrupt (Badger's reader: bad magic, checksum mismatch)
//	MANIFEST cut (mid-record, at a record     ErrCorrupt: a table not in the MANIFEST holds data newer than
//	  boundary, or to its bare header)          all listed tables and no memtable WAL has it ("lost records")
//	table (.sst) removed                      ErrCorrupt ("listed in the MANIFEST but missing")
//	table byte flipped, truncated, emptied,   ErrCorrupt naming the table and the block or footer field
//	  footer overwritten
//	newest memtable WAL (.mem) cut or a byte  Badger recovers the transactions before the damage: the
//	  flipped at any offset                     store holds commits 1..k with position k, plus possibly part
//	                                            of commit k+1's data (never more than the position claims)
//	  ... cut inside its 20-byte header       ErrCorrupt; a flipped key-id byte fails Open (unknown key)
//	  ... emptied (0 bytes)                   removed with a warning (a crash between creating and sizing
//	                                            it leaves that; it holds nothing)
//	older memtable WAL damaged (flipped       ErrCorrupt ("damaged after offset N ... but newer WALs follow")
//	  byte, cut mid-entry, header cut)
//	value log (.vlog) removed or emptied      opens intact (it never holds data, invariant 5); an empty one
//	                                            is removed first, since Badger refuses it
//	value log cut inside its header           ErrCorrupt
//	KEYREGISTRY removed                       opens intact (no encryption; Badger writes a new one)
//	KEYREGISTRY truncated                     Badger's error ("Error while reading sanity text")
//	DISCARD removed or truncated              opens intact (value-log statistics only)
//	table not in the MANIFEST, its data in    opens intact; Badger deletes the table and replays the WAL
//	  a memtable WAL (crash during a flush)     (a crash between a flush and its MANIFEST record)
//
// Not detected: an older memtable WAL cut exactly at a transaction boundary
// (that is what Badger's own recovery leaves, so it is indistinguishable
// from a previous crash), an older memtable WAL or a table removed together
// with every trace of it (its MANIFEST record), and damage that happens
// while the store is open (tables are verified at Open only; Badger's block
// checksums are off because a failure inside an iterator would silently end
// the scan or a compaction's input early).
//
// # Tuning
//
// Badger options (Options.badgerOptions) and why:
//
//   - ValueThreshold 1 MiB and values limited below it: everything inline in
//     the LSM tree (invariant 5); the value log is 1 MiB and stays empty.
//   - SyncWrites: the durability of invariant 3. Each write transaction
//     costs one msync; the WriteBatch makes transactions of up to 15% of a
//     memtable, so that is a few syncs per 100,000 entries.
//   - NumVersionsToKeep 1, DetectConflicts off (blind writes only).
//   - MemTableSize 16 MiB (Options.MemTableBytes), 3 memtables, level 0
//     compacted at 8 tables (stall at 24), 2 MiB tables, 16 MiB base level,
//     2 compactors, CompactL0OnClose: small memory, few large L0 merges.
//   - No compression and no block cache: blocks are read in place from the
//     memory-mapped tables. With 1,000,000 messages, Snappy and zstd made
//     the tables about 40% and 60% smaller but scanned slower (3.7 and 3.1
//     M keys/s against 5.7) and needed 60-90 MiB more anonymous memory for
//     decompressed blocks.
//   - Badger's checksum verification off (see above), metrics off (they are
//     process-global expvars), Badger's Info logged at slog Debug.
//
// Memory. Badger reads tables through shared file mappings, so a full scan
// makes every table page resident and counts it in the process's RSS. Scans
// and commits therefore release those pages every Options.ScanReleaseBytes
// and Options.CommitReleaseInterval (release.go: MADV_DONTNEED on tables an
// iterator holds, so the mapping cannot go away meanwhile; the pages stay in
// the page cache). The Go heap is mostly Badger's: the memtable arena (about
// 1.3 × MemTableBytes), and during flushes and compactions table builders
// that each hold a whole table, kept in a pool of up to 8. Under a steady
// checkpoint load that is 100-200 MiB of live heap plus garbage; a process
// memory limit (GOMEMLIMIT) keeps the garbage in check.
//
// Modes. The directory is 0700 and every file in it 0600 when Open returns
// (perm.go: Open creates or tightens the directory and tightens the files,
// since Badger creates tables, memtable WALs, value logs, DISCARD and its
// LOCK file 0666); files Badger creates later follow the process's umask,
// which the daemon sets to 077, and are unreachable for others anyway
// behind the 0700 directory.
//
// Free space. Badger writes memtable WALs and new tables through shared
// mappings of sparse files, so a full disk kills the process with SIGBUS
// instead of failing a write. The engine's free-space guard must therefore
// stop new sends while Store.FreeBytes is still above
// Options.ReserveBytes (space.go lists the Badger sizes that make it up).
//
// Disk. Deleted keys and overwritten versions go away when compaction
// merges them into the bottom level; Close merges level 0 down
// (CompactL0OnClose) and Store.Compact flattens the tree. DiskBytes counts
// allocated blocks, since memtable WALs and value logs are sparse files.
package index
