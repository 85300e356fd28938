package wal

// record.go owns the record codec: header layout, checksum, padding and the
// payload compression decision. It knows positions (the checksum seed) but
// no files. The format is documented in doc.go and is part of the on-disk
// format; never change it.

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/s2"
)

// Pos is the logical byte position of a record in the log.
type Pos uint64

// RecordType is the caller's tag of a record, 1..255. 0 is invalid.
type RecordType uint8

// Wire constants: part of the on-disk format; never change.
const (
	headerSize           = 12     // bytes of the record header
	recordMagic          = 0x5153 // "SQ" at header[6:8], little-endian
	flagCompressed uint8 = 1 << 0 // payload is an s2 block
	flagSkip       uint8 = 1 << 1 // a skip record: covers lost bytes, never served (repair.go)
	knownFlags           = flagCompressed | flagSkip
	skipType             = RecordType(0xff) // the type byte of a skip record
	recordAlign          = 4                // every record starts at a multiple of this
)

// align4 rounds n up to a multiple of 4.
func align4(n int) int { return (n + recordAlign - 1) &^ (recordAlign - 1) }

// framedSize is the on-disk size of a record with a stored payload of n bytes.
func framedSize(n int) int { return align4(headerSize + n) }

// putHeader writes the first 8 header bytes (everything but the checksum).
func putHeader(h []byte, n int, typ RecordType, flags uint8) {
	binary.LittleEndian.PutUint32(h[0:4], uint32(n))
	h[4] = byte(typ)
	h[5] = flags
	binary.LittleEndian.PutUint16(h[6:8], recordMagic)
}

// recordChecksum is the low 32 bits of xxhash64(p LE || h[0:8] || a || b),
// where a||b is the stored payload (split so that head and body need not be
// concatenated first).
func recordChecksum(p Pos, h []byte, a, b []byte) uint32 {
	var d xxhash.Digest
	d.Reset()
	var pb [8]byte
	binary.LittleEndian.PutUint64(pb[:], uint64(p))
	_, _ = d.Write(pb[:])
	_, _ = d.Write(h[:8])
	_, _ = d.Write(a)
	_, _ = d.Write(b)
	return uint32(d.Sum64())
}

// skipChecksum is recordChecksum for a record whose stored payload is n
// zero bytes (a skip record appended by SkipTo), without materializing them.
func skipChecksum(p Pos, h []byte, n int) uint32 {
	var zeros [4096]byte
	var d xxhash.Digest
	d.Reset()
	var pb [8]byte
	binary.LittleEndian.PutUint64(pb[:], uint64(p))
	_, _ = d.Write(pb[:])
	_, _ = d.Write(h[:8])
	for n > 0 {
		k := min(n, len(zeros))
		_, _ = d.Write(zeros[:k])
		n -= k
	}
	return uint32(d.Sum64())
}

// encodeRecord frames a record for position p into dst, which must be
// exactly framedSize(len(a)+len(b)) bytes: header, payload a||b, zero pad.
// Used by tests and tools; Append frames straight into the ring.
func encodeRecord(dst []byte, p Pos, typ RecordType, flags uint8, a, b []byte) {
	n := len(a) + len(b)
	putHeader(dst, n, typ, flags)
	binary.LittleEndian.PutUint32(dst[8:12], recordChecksum(p, dst, a, b))
	copy(dst[headerSize:], a)
	copy(dst[headerSize+len(a):], b)
	clear(dst[headerSize+n:])
}

// headerInfo is the decoded static part of a header.
type headerInfo struct {
	n     int // stored payload length
	typ   RecordType
	flags uint8
}

// parseHeader checks the parts of a 12-byte header that need no payload:
// magic, type, flags and the length limit. reason is "" if it is plausible.
func parseHeader(h []byte) (hi headerInfo, reason string) {
	if binary.LittleEndian.Uint16(h[6:8]) != recordMagic {
		return hi, "bad magic"
	}
	hi.n = int(binary.LittleEndian.Uint32(h[0:4]))
	hi.typ = RecordType(h[4])
	hi.flags = h[5]
	switch {
	case hi.typ == 0:
		return hi, "record type 0"
	case hi.flags&^knownFlags != 0:
		return hi, "unknown flags"
	case hi.flags&flagSkip != 0 && hi.flags != flagSkip:
		return hi, "skip record with other flags"
	case hi.n > MaxPayload:
		return hi, "length over limit"
	}
	return hi, ""
}

// isZeroHeader reports whether h (up to 12 bytes) is all zero: the clean end
// marker of a segment's data.
func isZeroHeader(h []byte) bool {
	for _, c := range h {
		if c != 0 {
			return false
		}
	}
	return true
}

// decodeRecord verifies the framed record for position p at the start of b.
// It returns the header, the stored payload (aliasing b) and the framed size.
// reason is non-empty if the record is invalid; b too short for the record
// gives "truncated". No payload is returned unless the checksum verified.
func decodeRecord(p Pos, b []byte) (hi headerInfo, stored []byte, framed int, reason string) {
	if len(b) < headerSize {
		return hi, nil, 0, "truncated"
	}
	hi, reason = parseHeader(b)
	if reason != "" {
		return hi, nil, 0, reason
	}
	framed = framedSize(hi.n)
	if len(b) < framed {
		return hi, nil, 0, "truncated"
	}
	stored = b[headerSize : headerSize+hi.n]
	if recordChecksum(p, b, stored, nil) != binary.LittleEndian.Uint32(b[8:12]) {
		return hi, nil, 0, "checksum mismatch"
	}
	// Pad bytes are outside the checksum; insist they are zero so a flipped
	// bit anywhere in the record is noticed.
	for _, c := range b[headerSize+hi.n : framed] {
		if c != 0 {
			return hi, nil, 0, "nonzero padding"
		}
	}
	return hi, stored, framed, ""
}

// isSkip reports whether a verified header is a skip record's.
func (hi headerInfo) isSkip() bool { return hi.flags&flagSkip != 0 }

// decodePayload turns a verified stored payload into the caller's payload,
// decompressing into dst (reused if large enough) when the record is
// compressed; dst must not overlap stored.
func decodePayload(hi headerInfo, stored, dst []byte) ([]byte, string) {
	if hi.flags&flagCompressed == 0 {
		return stored, ""
	}
	n, err := s2.DecodedLen(stored)
	if err != nil || n > MaxPayload {
		return nil, "bad compressed length"
	}
	out, err := s2.Decode(dst[:0], stored)
	if err != nil {
		return nil, "bad compressed payload"
	}
	return out, ""
}

// s2MaxEncodedLen bounds the s2 block encoding of n bytes.
func s2MaxEncodedLen(n int) int { return s2.MaxEncodedLen(n) }

// s2DecodedLen returns the decoded size an s2 block announces.
func s2DecodedLen(b []byte) (int, error) { return s2.DecodedLen(b) }

// compressInto tries s2 on payload (head||body, concatenated by the caller
// into src) and returns the compressed form if it saves at least 1/8, using
// scratch as the output buffer; ok is false to store the payload as is.
func compressInto(scratch, src []byte) (out []byte, ok bool) {
	need := s2.MaxEncodedLen(len(src))
	if need < 0 {
		return nil, false
	}
	if cap(scratch) < need {
		scratch = make([]byte, need)
	}
	out = s2.Encode(scratch[:need], src)
	if len(out) > len(src)-len(src)/8 {
		return nil, false
	}
	return out, true
}
