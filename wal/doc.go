// Package wal is smqd's write-ahead log: one append-only log per broker,
// split into preallocated segment files, written by a single writer goroutine
// that does group commit.
//
// The package stores typed, opaque records. It knows nothing of messages,
// queues or the index; the engine gives it bytes and gets back positions.
//
// # Positions
//
// A Pos is the logical byte position of a record in the log (a log sequence
// number). The first record ever written is at Pos 0. Positions only grow and
// a record's Pos never changes. The position space is dense: the record after
// a record at p with framed size n is at p+n, even across a segment roll.
//
// # Segment files (part of the on-disk format; never change)
//
// A segment file is named by the Pos of its first byte, "%016x.wal" (16
// lower-case hex digits), in the log directory. Segment i covers
// [Start_i, Start_{i+1}); the last (active) segment covers [Start_last, End).
// The byte for Pos p lives at file offset p-Start_i. Files are preallocated to
// Options.SegmentBytes and zero-filled: when a record does not fit into what
// is left of the active segment, the segment is closed at the current end and
// a new one starts at exactly that Pos. The unused tail of the old file stays
// zero and is not part of any range. An empty file "%016x.hole" marks the
// start of a removed segment that had an older live segment before it, so
// that the older one's end stays known; live segments and holes tile the
// positions from the oldest live segment to End. A marker no older live
// segment needs any more is deleted after each removal; Open deletes only
// the leading ones (and those a segment shadows), and the first removal
// after it the rest. Files named "*.spare" are
// preallocated spare segments not yet in use; Open deletes leftovers. Any
// other file in the directory is ignored with a warning.
//
// # Record framing (part of the on-disk format; never change)
//
// Every record starts at a 4-byte aligned Pos. Its framed size is
// align4(12 + len(stored payload)); the 0..3 pad bytes are zero.
//
//	offset size field
//	0      4    stored payload length, uint32 little-endian
//	4      1    record type, 1..255 (0 is invalid: "no record here")
//	5      1    flags: bit 0 = payload is s2 block-compressed; bit 1 = skip
//	            record (see below); bits 2..7 are 0
//	6      2    magic 0x5153 ("SQ"), little-endian: bytes 0x53 0x51
//	8      4    checksum, uint32 little-endian
//	12     n    stored payload
//	12+n   pad  zero bytes up to the next multiple of 4
//
// checksum = low 32 bits of xxhash64(Pos as 8 LE bytes || header[0:8] ||
// stored payload). Seeding with the Pos means that a stale but intact record
// read at the wrong position (an old file, a misdirected write) never
// validates. The end of a segment's data is the first position holding no
// valid record; in a cleanly written segment that is a zero header (type 0,
// length 0) followed by zeros to the end of the file.
//
// The payload is head||body as given to Append; the log does not interpret
// it. A payload is at most 16 MiB and at most SegmentBytes-12 bytes.
//
// # Skip records (part of the on-disk format; never change)
//
// A skip record marks bytes that hold no record: a damaged range that
// Options.Repair skipped, or positions SkipTo jumped over. It is a record as
// above with type 0xff and flags exactly 0x02 (bit 1 alone; a skip record is
// never compressed), so its 12-byte header is
//
//	n (uint32 LE) | 0xff | 0x02 | 0x53 0x51 | checksum (uint32 LE)
//
// where n+12 is the size of the range it covers (a multiple of 4, padding
// 0) and the checksum is computed as for any record over the payload bytes
// as they are. Repair writes only this header, over the first 12 bytes of
// the damaged range [a, b): n = b-a-12, and the payload is the damaged
// bytes left in place (for inspection). A range longer than 16 MiB + 12 is
// covered by a chain of skip records, none shorter than 12 bytes. SkipTo's
// skip records have zero payloads. Readers never serve a skip record: a
// Reader passes over it; ReadAt and ReadRun at its position return a
// *CorruptionError with Skipped set (ErrRepaired). Versions before skip
// records reject bit 1 as "unknown flags", so they refuse a repaired log
// instead of misreading it.
//
// # Compression
//
// If Options.CompressMinBytes >= 0 and a payload has at least that many bytes
// (default 4096), Append compresses it with the s2 block format (s2.Encode)
// and keeps the compressed form only if it saves at least 1/8 of the size;
// then flag bit 0 is set and readers decompress transparently. Why this rule:
// queue bodies are mostly small (framing and syscalls dominate, compression
// would only add latency) or already compressed by the producer (JSON gzip,
// images), where trying costs CPU for nothing. s2 is cheap enough (several
// GB/s on incompressible input, since it skips ahead quickly) to try on large
// payloads, where a saving shrinks the write and the fsync; the 1/8 threshold
// keeps records that barely shrink uncompressed so that reading them back
// costs no decode. Compression runs in Append outside the log's lock.
//
// # Invariants
//
//  1. Records never span segments; segments are contiguous: the Start of
//     segment i+1 is the End of segment i.
//  2. Every record starts at a 4-byte aligned Pos and its checksum is seeded
//     with that Pos.
//  3. Positions are assigned in Append order under Log.mu; the log bytes are
//     dense in Pos space.
//  4. SyncedEnd <= WrittenEnd <= End, and each only grows.
//  5. Unwritten bytes [WrittenEnd, End) are always in the ring and are never
//     overwritten: End - WrittenEnd <= BufferBytes.
//  6. Before the writer writes the first byte of a segment, every earlier
//     segment has been fdatasync'ed (a later segment never holds acknowledged
//     data while an earlier one lacks it).
//  7. Nothing that fails its checksum, and nothing after it that only a
//     guess could locate, is ever served: readers return *CorruptionError
//     and a Reader stops there; Open cuts only a torn tail (no valid record
//     after the bad one in the last segment) and otherwise fails, unless
//     Options.Repair, which locates the next valid record and records the
//     range durably first (invariant 11).
//  8. A failed write or fsync is sticky: no later write or fsync is tried;
//     every waiter not yet covered and every later Append, WaitDurable and
//     Sync fails with an error wrapping the cause and ErrFailed.
//  9. A segment's file stays open while a read holds a reference to it;
//     removal unlinks it at once but closes it only after the last reader.
//  10. A segment file that cannot be prepared (create, preallocate or sync
//     of a spare fails) never makes the log sticky-failed: the failure is
//     retried with a bounded backoff and clears by itself once a file can
//     be made, without a reopen and without losing an appended record.
//  11. Options.Repair loses exactly the damaged records: each damaged range
//     [a, b) (a record boundary up to the next valid record or the
//     segment's end) is covered by skip records before anything is served,
//     every record outside the ranges keeps its position and payload, each
//     range is reported in RecoveryInfo.Repairs, and nothing in a range is
//     ever served as a record. Repair never moves the end of the log except
//     by cutting a torn tail, and a reopen after a repair finds no damage.
//  12. An Append's records are back to back in the log, no other record
//     between them, also for a batch larger than the ring: it is framed
//     one record at a time, each once the writer has made room for it
//     (invariant 5), and every other appender waits until its last record
//     is framed (Log.mu.large). Each record must fit in the ring
//     (ErrRecordTooLarge). A failure or a stall between two of its
//     records leaves the ones framed so far in the log, as a crash in the
//     middle of a write leaves a prefix of one: Append returns the error,
//     resets their Pos and Size and takes back the live bytes they added;
//     the caller treats the batch as not appended (a reader of the log
//     finds a group cut short, which the engine aborts: engine/fold.go).
//
// # Failures: sticky or self-clearing
//
// Sticky (the log refuses every later append, WaitDurable and Sync with an
// error wrapping ErrFailed and the cause; reads keep working; Close returns
// it; only a reopen clears it): a failed write or fsync of a segment file
// (invariant 8; an fsync is never retried), and a failed rename, open or
// directory fsync while rolling to a new segment.
//
// Self-clearing (errors wrap ErrSpareFailed, plus ErrNoSpace for ENOSPC or
// EDQUOT, plus the cause): failing to prepare a spare segment file. The
// spare goroutine retries after 10 ms, doubling up to 2 s, forever; it logs
// at Error once per failure streak and at Info when it succeeds again.
// Health reports the failure meanwhile. A roll that finds no spare makes
// one itself; if that fails too the writer stalls: records before the new
// segment are written and synced as usual; WaitDurable and Sync for later
// records return the retryable error (those records stay queued in order
// and are written when a spare arrives, so their outcome is unknown, not
// failed); Append keeps queueing while the ring has room and then returns
// the retryable error instead of blocking. The next spare ends the stall.
// Stats counts SpareFailures, RollStalls and StickyFailures.
//
// Open fails (nothing to clear) when the directory cannot be listed or the
// first segment or the tail cannot be prepared.
//
// # Damage and repair
//
// repair.go describes what Open does with a damaged record: a torn tail is
// cut (with or without Repair) and reported; mid-log damage fails Open with
// a *CorruptionError naming Options.Repair, or with Repair every segment is
// scanned and each damaged range is covered by skip records and reported in
// RecoveryInfo.Repairs with what is left of the lost records (headers and
// payload prefixes, unverified, for the engine to name them). The log never
// refuses to open because of where the engine's checkpoint lies: for a
// checkpoint inside a skipped range ReplayStart gives the first record
// after it, and for one beyond a cut tail SkipTo moves the end past it.
//
// # Disk space
//
// Every segment file is preallocated when its spare is made, so writes into
// segments never need space; only preparing the next spare does (ENOSPC
// there is retried, see above). Options.ReserveBytes says how much free
// space (Log.FreeBytes, the FS's statfs) the log needs to keep writing
// receives and deletes after the engine stops accepting sends.
//
// # Who touches what
//
// Log.mu (an RWMutex) guards the position counter, the ring bytes at and after
// the unwritten span, the closed flag and mutations of the segment list;
// appenders hold it exclusively while they copy, ring readers hold it shared.
// The writer goroutine owns every write and fsync on segment files and is the
// only one to advance WrittenEnd and SyncedEnd (atomics, announced to waiters
// under Log.ack) and to set or clear the stall. The spare goroutine owns the
// spare file until it hands it to the writer through a channel, and its
// failure state (Log.spareErr). The segment list is copy-on-write behind
// an atomic.Pointer, so AddLive and readers never take a lock.
//
// No lock that appenders, readers or the writer take is held across I/O
// (Log.mu and Log.ack are released before every write, fsync and read).
// Two locks exist only to serialise file operations with each other and are
// held across them: Log.removeMu, taken by RemoveSegment around its hole
// marker, unlink or rename and the directory fsyncs, so that those reach
// the directory in order; and Log.recycled, the pool of recycled segment
// files, held across the rename into the pool and its directory fsync
// (RemoveSegment) and taken briefly by the spare goroutine to pick a file.
// Neither is ever taken by an append or a read.
//
// Lock order: Log.removeMu before Log.recycled (a removal recycles its
// file); Log.mu and Log.ack are never held with any other lock. In MemFS,
// MemFS.mu is taken before a file's mutex.
//
// # Test tools
//
// MemFS (an in-memory FS that simulates power loss with CrashClone and a
// full disk with SetCapacity) and FaultFS (an FS wrapper that injects
// errors) are exported for the tests of this package and of the engine;
// production code uses OSFS.
package wal
