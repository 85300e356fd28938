package index

// FuzzTableVerify: the table verifier (check_table.go), which runs on every
// table the MANIFEST lists before Badger opens the directory, never panics
// on any file: a table Badger would crash on is refused with an error.
// Inputs are either a whole file or a table put together from blocks and an
// index whose checksum matches (the case the verifier cannot tell from
// one Badger wrote: "the flatbuffer accessors are still guarded in case a
// matching checksum lies").

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/dgraph-io/badger/v4/pb"
	"google.golang.org/protobuf/encoding/protowire"
)

// fuzzTable returns a table file of blocks, then idx, its length, a
// CRC32-C checksum of idx and the checksum's length.
func fuzzTable(blocks, idx []byte) []byte {
	var chk []byte
	chk = protowire.AppendTag(chk, 1, protowire.VarintType)
	chk = protowire.AppendVarint(chk, uint64(pb.Checksum_CRC32C))
	chk = protowire.AppendTag(chk, 2, protowire.VarintType)
	chk = protowire.AppendVarint(chk, uint64(crc32.Checksum(idx, castagnoli())))
	b := append(append([]byte(nil), blocks...), idx...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(idx)))
	b = append(b, chk...)
	return binary.BigEndian.AppendUint32(b, uint32(len(chk)))
}

func FuzzTableVerify(f *testing.F) {
	f.Add([]byte("block"), []byte{}, false)
	f.Add([]byte(nil), []byte{4, 0, 0, 0, 0, 0, 0, 0}, false)
	f.Add([]byte(nil), []byte{12, 0, 0, 0, 8, 0, 12, 0, 4, 0, 8, 0, 8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0}, false)
	f.Add(fuzzTable([]byte("0123456789"), []byte{4, 0, 0, 0, 0, 0, 0, 0}), []byte(nil), true)
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0}, []byte(nil), true)
	// An index with a matching checksum whose block offsets the
	// flatbuffer accessors cannot read: verify panicked (slice bounds out
	// of range [12348:17]) instead of refusing the table.
	f.Add([]byte(nil), []byte("\f\x00\x00\x0000000000\a\x00\x00\x00\x00"), false)
	path := filepath.Join(f.TempDir(), "000001.sst")
	v := newTableVerifier()
	f.Fuzz(func(t *testing.T, a, b []byte, whole bool) {
		file := a
		if !whole {
			file = fuzzTable(a, b)
		}
		if err := os.WriteFile(path, file, 0o600); err != nil {
			t.Fatal(err)
		}
		if info, err := v.verify(path); err == nil && (info.dataEnd < 0 || info.dataEnd > int64(len(file))) {
			t.Fatalf("table %x: data ends at %d", file, info.dataEnd)
		}
	})
}

// FuzzMemWAL: scanning a memtable WAL (check_wal.go) never panics on any
// file, and what it takes as complete transactions lies within the file.
func FuzzMemWAL(f *testing.F) {
	hdr := make([]byte, memHeaderBytes)
	f.Add(hdr)
	f.Add(append(append([]byte(nil), hdr...), 0x40, 0, 9, 1, 0, 'k', 0, 0, 0, 0, 0, 0, 0, 1, 'v', 0, 0, 0, 0))
	f.Add(append(append([]byte(nil), hdr...), 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 3, 0, 'k'))
	f.Add([]byte("short"))
	path := filepath.Join(f.TempDir(), "000001.mem")
	f.Fuzz(func(t *testing.T, file []byte) {
		if err := os.WriteFile(path, file, 0o600); err != nil {
			t.Fatal(err)
		}
		w, err := scanMemWAL(path, true)
		if err != nil {
			return
		}
		if w.validEnd > w.size || w.size != int64(len(file)) || (w.txns > 0 && w.validEnd <= memHeaderBytes) {
			t.Fatalf("%x: %+v", file, w)
		}
	})
}

// A memtable WAL entry whose value length says 1 GiB, in a file of a few
// bytes (a torn or damaged entry), is refused without allocating the
// gigabyte: a damaged file held the start-up of the index to 1 GiB of
// memory for each such entry (fuzz audit, 2026-12-08).
func TestMemWALEntryLongerThanTheFile(t *testing.T) {
	file := make([]byte, memHeaderBytes)
	file = append(file, 0, 0, 1)                 // meta, user meta, key length 1
	file = binary.AppendUvarint(file, 1<<30)     // value length 1 GiB
	file = append(file, 0, 'k', 'v', 0, 0, 0, 0) // expiry, key, a value cut short
	path := filepath.Join(t.TempDir(), "000001.mem")
	if err := os.WriteFile(path, file, 0o600); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	w, err := scanMemWAL(path, true)
	runtime.ReadMemStats(&after)
	if err != nil || w.txns != 0 || w.validEnd != memHeaderBytes || w.cleanTail {
		t.Fatalf("%+v %v", w, err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<20 {
		t.Fatalf("scanning a %d-byte file allocated %d bytes", len(file), got)
	}
}
