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
// positions from the oldest live segment to End. Files named "*.spare" are
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
//	5      1    flags: bit 0 = payload is s2 block-compressed; bits 1..7 are 0
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
//  7. Nothing at or after a record that fails its checksum is ever served:
//     readers return *CorruptionError, Open cuts only a torn tail (no valid
//     record after the bad one in the last segment) and otherwise fails
//     (unless Options.Repair).
//  8. A failed write or fsync is sticky: no later write or fsync is tried;
//     every waiter not yet covered and every later Append, WaitDurable and
//     Sync fails with an error wrapping the cause and ErrFailed.
//  9. A segment's file stays open while a read holds a reference to it;
//     removal unlinks it at once but closes it only after the last reader.
//  10. A segment file that cannot be prepared (create, preallocate or sync
//     of a spare fails) never makes the log sticky-failed: the failure is
//     retried with a bounded backoff and clears by itself once a file can
//     be made, without a reopen and without losing an appended record.
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
// an atomic.Pointer, so AddLive and readers never take a lock. No lock is
// held across I/O.
//
// Lock order: no two of the package's locks (Log.mu, Log.ack, Log.removeMu)
// are ever held together, so there is no order to respect. In MemFS,
// MemFS.mu is taken before a file's mutex.
//
// # Test tools
//
// MemFS (an in-memory FS that simulates power loss with CrashClone) and
// FaultFS (an FS wrapper that injects errors) are exported for the tests of
// this package and of the engine; production code uses OSFS.
package wal
