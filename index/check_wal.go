package index

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"strconv"
)

// Badger memtable WAL (.mem) layout, as written by badger/v4 logFile:
//
//	keyID u64 | baseIV [12]byte | entry | entry | ... | zeros
//
// Each entry is
//
//	meta u8 | userMeta u8 | uvarint keyLen | uvarint valueLen | uvarint expiresAt | key | value | crc32c u32 (BE)
//
// where the CRC covers header, key and value, and key ends with the entry's
// version (commit timestamp) as MaxUint64-ts, 8 bytes big-endian. Every write
// transaction is a run of entries with memTxnBit set, closed by one entry
// with memFinTxnBit set. The file is preallocated (sparse, zero-filled) to
// twice the memtable size; Badger zeroes the header after the last entry.
const (
	memHeaderBytes = 20     // keyID + baseIV
	memTxnBit      = 1 << 6 // entry belongs to a transaction
	memFinTxnBit   = 1 << 7 // entry closes a transaction
)

// memWAL is what scanning one memtable WAL yields.
type memWAL struct {
	path       string
	size       int64
	validEnd   int64  // end of the last complete transaction
	maxVersion uint64 // highest version in a complete transaction
	txns       int    // complete transactions
	// cleanTail is true if every byte from validEnd to the end of the file is
	// zero: the file ends where its last complete transaction ends, as a
	// file that was never torn or damaged does.
	cleanTail bool
}

// scanMemWAL reads the memtable WAL at path the way Badger replays it and
// reports where its complete transactions end and, if wantTail, whether
// anything but zeros follows them. It reads with plain reads, not mmap.
func scanMemWAL(path string, wantTail bool) (memWAL, error) {
	w := memWAL{path: path}
	f, err := os.Open(path)
	if err != nil {
		return w, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return w, err
	}
	w.size = st.Size()
	if w.size == 0 {
		// Badger treats an empty file as new; it holds nothing.
		w.cleanTail = true
		return w, nil
	}
	if w.size < memHeaderBytes {
		w.validEnd = 0
		return w, nil // cleanTail false: a header cut short
	}
	var hdr [memHeaderBytes]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return w, err
	}
	if binary.BigEndian.Uint64(hdr[:8]) != 0 {
		return w, fmt.Errorf("encrypted memtable WAL (key id %d) is not supported", binary.BigEndian.Uint64(hdr[:8]))
	}
	w.validEnd = memHeaderBytes

	r := bufio.NewReaderSize(io.NewSectionReader(f, memHeaderBytes, w.size-memHeaderBytes), 256<<10)
	crcTab := castagnoli()
	var (
		off        = int64(memHeaderBytes) // offset of the next entry
		lastCommit uint64                  // version of the open transaction; 0 if none
		kv         []byte
		headerBuf  [2 + 3*binary.MaxVarintLen64]byte
	)
	// This loop follows badger's logFile.iterate: a transaction counts only
	// once its closing entry is read, and anything unexpected ends replay.
loop:
	for {
		e, n, err := readMemEntry(r, w.size-off, &headerBuf, &kv, crcTab)
		if err != nil || e.keyLen == 0 {
			break // torn, damaged or the zeroed end: replay stops here
		}
		off += n
		ver := uint64(0)
		if e.keyLen > 8 {
			ver = math.MaxUint64 - binary.BigEndian.Uint64(kv[e.keyLen-8:e.keyLen])
		}
		switch {
		case e.meta&memTxnBit != 0:
			if lastCommit == 0 {
				lastCommit = ver
			}
			if lastCommit != ver {
				break loop
			}
		case e.meta&memFinTxnBit != 0:
			ts, err := strconv.ParseUint(string(kv[e.keyLen:]), 10, 64)
			if err != nil || ts != lastCommit {
				break loop
			}
			w.txns++
			w.validEnd = off
			w.maxVersion = max(w.maxVersion, lastCommit)
			lastCommit = 0
		default:
			if lastCommit != 0 {
				break loop
			}
			// Not written by this package (all our writes are
			// transactions); Badger accepts it as a single entry.
			w.validEnd = off
			w.maxVersion = max(w.maxVersion, ver)
		}
	}
	if wantTail {
		w.cleanTail, err = zeroFrom(f, w.validEnd, w.size)
	}
	return w, err
}

// memEntry is a decoded entry header.
type memEntry struct {
	meta   byte
	keyLen int
}

// readMemEntry reads one entry, of at most left bytes (the rest of the
// file), into *kv (key then value) and returns its header and encoded
// length. Any malformation is errTornEntry; a zero header decodes as
// keyLen 0.
func readMemEntry(r *bufio.Reader, left int64, hb *[2 + 3*binary.MaxVarintLen64]byte, kv *[]byte, tab *crc32.Table) (memEntry, int64, error) {
	var e memEntry
	h := hb[:0]
	for i := 0; i < 2; i++ {
		c, err := r.ReadByte()
		if err != nil {
			return e, 0, errTornEntry
		}
		h = append(h, c)
	}
	var lens [3]uint64
	for i := range lens {
		v, err := binary.ReadUvarint(byteRecorder{r, &h})
		if err != nil {
			return e, 0, errTornEntry
		}
		lens[i] = v
	}
	e.meta = h[0]
	if lens[0] == 0 {
		return e, 0, nil
	}
	// Badger rejects keys of 64 KiB and more; values are bounded by the
	// file, which is far below 1 GiB for any sane memtable size. An entry
	// longer than the rest of the file is torn: it is refused before its
	// buffer is allocated (a damaged length made start-up allocate up to
	// 1 GiB for a file of a few bytes; fuzz audit, 2026-12-08).
	if lens[0] > 1<<16 || lens[1] > 1<<30 || int64(len(h))+int64(lens[0]+lens[1])+4 > left {
		return e, 0, errTornEntry
	}
	n := int(lens[0] + lens[1])
	if cap(*kv) < n {
		*kv = make([]byte, n)
	}
	*kv = (*kv)[:n]
	if _, err := io.ReadFull(r, *kv); err != nil {
		return e, 0, errTornEntry
	}
	var crcBuf [4]byte
	if _, err := io.ReadFull(r, crcBuf[:]); err != nil {
		return e, 0, errTornEntry
	}
	sum := crc32.Update(crc32.Checksum(h, tab), tab, *kv)
	if sum != binary.BigEndian.Uint32(crcBuf[:]) {
		return e, 0, errTornEntry
	}
	e.keyLen = int(lens[0])
	return e, int64(len(h) + n + 4), nil
}

// byteRecorder is an io.ByteReader that also appends every byte it reads to
// *rec (the header bytes the CRC covers).
type byteRecorder struct {
	r   *bufio.Reader
	rec *[]byte
}

func (b byteRecorder) ReadByte() (byte, error) {
	c, err := b.r.ReadByte()
	if err == nil {
		*b.rec = append(*b.rec, c)
	}
	return c, err
}

// zeroFrom reports whether every byte of f in [from, size) is zero.
func zeroFrom(f *os.File, from, size int64) (bool, error) {
	buf := make([]byte, 64<<10)
	for off := from; off < size; {
		n := int64(len(buf))
		if size-off < n {
			n = size - off
		}
		if _, err := f.ReadAt(buf[:n], off); err != nil {
			return false, err
		}
		for _, c := range buf[:n] {
			if c != 0 {
				return false, nil
			}
		}
		off += n
	}
	return true, nil
}
