package server

// Scans of XML text for the bytes that need care.
//
// Message bodies are most of the bytes the server parses and writes, and
// most body bytes need no work: printable ASCII other than the few that XML
// escapes. These helpers skip such bytes 32 at a time with AVX2 where the
// CPU has it (swar_amd64.s), and eight at a time otherwise (SWAR: SIMD
// within a register); the byte loops that follow them handle whatever
// needs care. Measured with BenchmarkXMLText (server/swar_test.go): see
// docs/benchmarks.md.
//
// Invariant: each helper returns k <= len(s) such that every byte of s
// before k is one that the caller's byte loop would have skipped without
// doing anything, and it stops early only at a byte that needs care: if
// k+8 <= len(s), s[k:k+8] holds such a byte. (The zero-byte test below can
// report a false positive only in a word that also holds a true one, so a
// word it passes is clean; a word it fails goes to the byte loop, which
// decides.)

import "unsafe"

const (
	swarLo = 0x0101010101010101
	swarHi = 0x8080808080808080
)

// load64 reads s[i:i+8] as a little-endian word (one load once compiled).
func load64[S ~string | ~[]byte](s S, i int) uint64 {
	_ = s[i+7]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}

// hasZeroByte reports whether some byte of x is 0.
func hasZeroByte(x uint64) bool { return (x-swarLo)&^x&swarHi != 0 }

// plainTextWords returns how many leading bytes of s are in 0x20..0x7f and
// are not '&' (text the parser copies as it is), as the invariant bounds it.
func plainTextWords(s []byte) int {
	if haveAVX2 && len(s) >= 32 {
		i := indexNotPlainAVX2(unsafe.SliceData(s), len(s))
		if i < len(s)&^31 {
			return i
		}
		return i + plainTextSWAR(s[i:])
	}
	return plainTextSWAR(s)
}

// plainTextSWAR is plainTextWords eight bytes at a time; it returns a
// multiple of 8.
func plainTextSWAR(s []byte) int {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		x := load64(s, i)
		// x&swarHi: a byte >= 0x80; (x-0x20…)&^x&swarHi: a byte < 0x20
		// (exact once no byte has its top bit set).
		if x&swarHi != 0 || (x-0x20*swarLo)&^x&swarHi != 0 || hasZeroByte(x^('&'*swarLo)) {
			break
		}
	}
	return i
}

// noEscapeWords returns how many leading bytes of s are none of the bytes
// appendText escapes ('&', '<', '>', CR), as the invariant bounds it.
func noEscapeWords[S ~string | ~[]byte](s S) int {
	if haveAVX2 && len(s) >= 32 {
		// A string's header is the start of a slice's: data, then length.
		p := unsafe.StringData(*(*string)(unsafe.Pointer(&s)))
		i := indexEscapeAVX2(p, len(s))
		if i < len(s)&^31 {
			return i
		}
		return i + noEscapeSWAR(s[i:])
	}
	return noEscapeSWAR(s)
}

// noEscapeSWAR is noEscapeWords eight bytes at a time; it returns a
// multiple of 8.
func noEscapeSWAR[S ~string | ~[]byte](s S) int {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		x := load64(s, i)
		if hasZeroByte(x^('&'*swarLo)) || hasZeroByte(x^('<'*swarLo)) ||
			hasZeroByte(x^('>'*swarLo)) || hasZeroByte(x^('\r'*swarLo)) {
			break
		}
	}
	return i
}
