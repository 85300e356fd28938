package index

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"

	"github.com/cespare/xxhash/v2"
	"github.com/dgraph-io/badger/v4/fb"
	"github.com/dgraph-io/badger/v4/pb"
	"google.golang.org/protobuf/encoding/protowire"
)

// Badger table (.sst) layout, as written by badger/v4/table.Builder:
//
//	block 0 | block 1 | ... | index | indexLen u32 | checksum | checksumLen u32
//
// index is a flatbuffer (fb.TableIndex) listing every block's offset and
// length, the table's max version and its key count; checksum is a protobuf
// pb.Checksum over index. An uncompressed block ends with
//
//	entries... | entryOffsets u32*n | n u32 | checksum | checksumLen u32
//
// and its checksum covers everything before checksum. All integers are
// big-endian.
//
// Badger parses these structures with assertions that end the process
// (log.Fatalf) or panic in its own goroutines when they are malformed, so the
// index verifies every table with bounds-checked code of its own before
// Badger opens it (invariant 6).

// tableInfo is what verifying a table's footer yields.
type tableInfo struct {
	maxVersion uint64 // highest Badger version (commit timestamp) in the table
	keyCount   uint32
	dataEnd    int64          // offset of the index: blocks lie in [0, dataEnd)
	index      *fb.TableIndex // valid until the verifier's next use
}

// castagnoli is the CRC32-C table Badger's checksums use. It is looked up
// per call (the standard library builds it once) to keep no package-level
// state.
func castagnoli() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) }

// checksumOK reports whether data matches a serialized pb.Checksum
// (field 1: algorithm, field 2: sum, both varints). It is decoded by hand
// because it runs once per 4 KiB block at start-up.
func checksumOK(data, serialized []byte, tab *crc32.Table) (bool, error) {
	var algo, sum uint64
	for len(serialized) > 0 {
		num, typ, n := protowire.ConsumeTag(serialized)
		if n < 0 || typ != protowire.VarintType {
			return false, fmt.Errorf("malformed checksum record")
		}
		serialized = serialized[n:]
		v, m := protowire.ConsumeVarint(serialized)
		if m < 0 {
			return false, fmt.Errorf("malformed checksum record")
		}
		serialized = serialized[m:]
		switch num {
		case 1:
			algo = v
		case 2:
			sum = v
		}
	}
	switch pb.Checksum_Algorithm(algo) {
	case pb.Checksum_CRC32C:
		return uint64(crc32.Checksum(data, tab)) == sum, nil
	case pb.Checksum_XXHash64:
		return xxhash.Sum64(data) == sum, nil
	default:
		return false, fmt.Errorf("unknown checksum algorithm %d", algo)
	}
}

// tableVerifier checks Badger tables with bounds-checked code, reusing its
// buffers from one table to the next. It is owned by one goroutine.
type tableVerifier struct {
	crc  *crc32.Table
	r    *bufio.Reader // sequential reader over a table's blocks
	foot []byte        // footer and index of the current table
	blk  []byte        // current block
	ext  [][2]int64    // the current table's block extents (offset, length)
}

func newTableVerifier() *tableVerifier {
	return &tableVerifier{crc: castagnoli(), r: bufio.NewReaderSize(nil, 256<<10)}
}

// footer reads and verifies the index of the table in f (size bytes). It
// does not look at the blocks. The returned index is valid until the next
// call.
func (v *tableVerifier) footer(f *os.File, size int64) (info tableInfo, err error) {
	// Footer fields are read from the end backwards: checksumLen u32,
	// checksum, indexLen u32, index. The last 64 KiB hold all of them in
	// most tables; read more only if the index is larger.
	tail := min(size, 64<<10)
	for {
		if int64(cap(v.foot)) < tail {
			v.foot = make([]byte, tail)
		}
		buf := v.foot[:tail]
		if _, err := f.ReadAt(buf, size-tail); err != nil {
			return info, fmt.Errorf("read footer: %w", err)
		}
		need, err := parseFooter(buf, size, &info, v.crc)
		if err != nil {
			return info, err
		}
		if need <= tail {
			break
		}
		tail = need
	}
	return info, nil
}

// parseFooter parses the footer of a table of size bytes whose last
// len(tail) bytes are tail. If the footer needs more bytes than tail holds,
// it returns how many; otherwise it fills info and returns len(tail).
func parseFooter(tail []byte, size int64, info *tableInfo, tab *crc32.Table) (need int64, err error) {
	n := int64(len(tail))
	at := func(pos, length int64, what string) ([]byte, error) {
		if pos < 0 || length < 0 || pos+length > size {
			return nil, fmt.Errorf("%s at %d+%d lies outside the file (%d bytes)", what, pos, length, size)
		}
		return tail[pos-(size-n) : pos-(size-n)+length], nil
	}
	if size < 8 {
		return 0, fmt.Errorf("%d bytes is too short for a table", size)
	}
	pos := size - 4
	b, _ := at(pos, 4, "checksum length")
	chkLen := int64(binary.BigEndian.Uint32(b))
	pos -= chkLen + 4 // checksum and index length
	if pos < 0 {
		return 0, fmt.Errorf("checksum length %d exceeds the file (%d bytes)", chkLen, size)
	}
	if pos < size-n {
		return size - pos, nil
	}
	chk, _ := at(pos+4, chkLen, "index checksum")
	b, _ = at(pos, 4, "index length")
	idxLen := int64(binary.BigEndian.Uint32(b))
	pos -= idxLen
	if pos < 0 {
		return 0, fmt.Errorf("index length %d exceeds the file (%d bytes)", idxLen, size)
	}
	if pos < size-n {
		return size - pos, nil
	}
	idx, err := at(pos, idxLen, "index")
	if err != nil {
		return 0, err
	}
	ok, err := checksumOK(idx, chk, tab)
	if err != nil {
		return 0, fmt.Errorf("index %w", err)
	}
	if !ok {
		return 0, fmt.Errorf("index checksum mismatch")
	}
	// The checksum matched, so idx is what Badger wrote; the flatbuffer
	// accessors are still guarded in case a matching checksum lies.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed index: %v", r)
		}
	}()
	ti := fb.GetRootAsTableIndex(idx, 0)
	*info = tableInfo{maxVersion: ti.MaxVersion(), keyCount: ti.KeyCount(), dataEnd: pos, index: ti}
	return n, nil
}

// verify checks the table at path completely: footer, index checksum and
// the checksum of every block, reading the file sequentially with plain
// reads (no mmap, so the process's RSS does not grow; the pages stay in the
// page cache for the start-up scan that follows).
func (v *tableVerifier) verify(path string) (tableInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return tableInfo{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return tableInfo{}, err
	}
	info, err := v.footer(f, st.Size())
	if err != nil {
		return info, err
	}
	if v.ext, err = blockExtents(info.index, v.ext[:0]); err != nil {
		return info, err
	}
	v.r.Reset(io.NewSectionReader(f, 0, info.dataEnd))
	next := int64(0) // Badger writes blocks back to back from offset 0
	for i, e := range v.ext {
		off, n := e[0], e[1]
		if off != next || off+n > info.dataEnd || n < 8 {
			return info, fmt.Errorf("block %d: bad extent %d+%d (expected offset %d, data ends at %d)", i, off, n, next, info.dataEnd)
		}
		next = off + n
		if int64(cap(v.blk)) < n {
			v.blk = make([]byte, n)
		}
		blk := v.blk[:n]
		if _, err := io.ReadFull(v.r, blk); err != nil {
			return info, fmt.Errorf("block %d: read: %w", i, err)
		}
		if err := verifyBlock(blk, v.crc); err != nil {
			return info, fmt.Errorf("block %d at offset %d: %w", i, off, err)
		}
	}
	return info, nil
}

// blockExtents appends the offset and length of every block ti lists to
// dst. The flatbuffer accessors panic on a malformed index; they are
// guarded as in parseFooter (an index whose checksum matched but that the
// accessors could not read crashed the process with a slice bounds panic:
// fuzz audit, 2026-12-08).
func blockExtents(ti *fb.TableIndex, dst [][2]int64) (_ [][2]int64, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed index: %v", r)
		}
	}()
	var bo fb.BlockOffset
	for i := 0; i < ti.OffsetsLength(); i++ {
		if !ti.Offsets(&bo, i) {
			return dst, fmt.Errorf("block %d: missing offset", i)
		}
		dst = append(dst, [2]int64{int64(bo.Offset()), int64(bo.Len())})
	}
	return dst, nil
}

// verifyBlock checks one uncompressed block's checksum.
func verifyBlock(blk []byte, tab *crc32.Table) error {
	end := len(blk) - 4
	chkLen := int(binary.BigEndian.Uint32(blk[end:]))
	if chkLen > end {
		return fmt.Errorf("checksum length %d exceeds block", chkLen)
	}
	ok, err := checksumOK(blk[:end-chkLen], blk[end-chkLen:end], tab)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("checksum mismatch")
	}
	return nil
}
