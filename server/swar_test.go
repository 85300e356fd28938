package server

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// plainByte and escapeByte are the byte loops' own tests, the reference
// the word scanners must agree with.
func plainByte(c byte) bool  { return c >= 0x20 && c < 0x80 && c != '&' }
func escapeByte(c byte) bool { return c == '&' || c == '<' || c == '>' || c == '\r' }

// swarInput is random text with the interesting bytes (every control
// character, '&', '<', '>', CR, 0x7f, 0x80, 0xff, and bytes next to the
// thresholds) at random places, so that each can land in each of a
// word's eight positions and of a 32-byte block's (the AVX2 scans). Some
// inputs hold them densely, some sparsely, so that scans also run long.
func swarInput(r *rand.Rand) []byte {
	special := []byte{0, 1, '\t', '\n', '\r', 0x1f, 0x20, '&', '<', '>', '=', '?', 0x7f, 0x80, 0xc3, 0xff, 0x25, 0x27, 0x3b}
	b := make([]byte, r.IntN(200))
	every := []int{6, 60, 600}[r.IntN(3)]
	for i := range b {
		if r.IntN(every) == 0 {
			b[i] = special[r.IntN(len(special))]
		} else {
			b[i] = byte('a' + r.IntN(26))
		}
	}
	return b
}

// The scanners return k with every byte before it one the byte loop
// skips, and they stop only at a word holding a byte that needs care (not
// trivially at 0); the eight-byte loops alone return a multiple of 8.
// With AVX2 (amd64) the first three cases run the 32-byte scans.
func TestSWARScannersAgreeWithByteLoops(t *testing.T) {
	for seed := uint64(0); seed < 20000; seed++ {
		r := rand.New(rand.NewPCG(seed, 1))
		s := swarInput(r)
		for _, tc := range []struct {
			name string
			k    int
			ok   func(byte) bool
		}{
			{"plainTextWords", plainTextWords(s), plainByte},
			{"noEscapeWords", noEscapeWords(s), func(c byte) bool { return !escapeByte(c) }},
			{"noEscapeWords(string)", noEscapeWords(string(s)), func(c byte) bool { return !escapeByte(c) }},
			{"plainTextSWAR", plainTextSWAR(s), plainByte},
			{"noEscapeSWAR", noEscapeSWAR(s), func(c byte) bool { return !escapeByte(c) }},
			{"noEscapeSWAR(string)", noEscapeSWAR(string(s)), func(c byte) bool { return !escapeByte(c) }},
		} {
			if tc.k > len(s) || strings.Contains(tc.name, "SWAR") && tc.k%8 != 0 {
				t.Fatalf("seed %d: %s(%q) = %d", seed, tc.name, s, tc.k)
			}
			for i := 0; i < tc.k; i++ {
				if !tc.ok(s[i]) {
					t.Fatalf("seed %d: %s(%q) = %d skips byte %d (%#x)", seed, tc.name, s, tc.k, i, s[i])
				}
			}
			if tc.k+8 <= len(s) {
				clean := true
				for _, c := range s[tc.k : tc.k+8] {
					clean = clean && tc.ok(c)
				}
				if clean {
					t.Fatalf("seed %d: %s(%q) = %d stops before a clean word", seed, tc.name, s, tc.k)
				}
			}
		}
	}
}

// refAppendText is appendText as it was before the word scanners.
func refAppendText(b, s []byte) []byte {
	for _, c := range s {
		switch c {
		case '&':
			b = append(b, "&amp;"...)
		case '<':
			b = append(b, "&lt;"...)
		case '>':
			b = append(b, "&gt;"...)
		case '\r':
			b = append(b, "&#13;"...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// appendText matches the reference byte for byte, and the parser gives
// back the original text of whatever it encoded (valid XML text only).
func TestAppendTextAndParseRoundTrip(t *testing.T) {
	var d xmlDoc
	for seed := uint64(0); seed < 20000; seed++ {
		r := rand.New(rand.NewPCG(seed, 2))
		s := swarInput(r)
		got, want := appendText(nil, s), refAppendText(nil, s)
		if !bytes.Equal(got, want) {
			t.Fatalf("seed %d: appendText(%q) = %q, want %q", seed, s, got, want)
		}
		if gotS := appendText(nil, string(s)); !bytes.Equal(gotS, want) {
			t.Fatalf("seed %d: appendText(string %q) = %q, want %q", seed, s, gotS, want)
		}
		doc := append(append([]byte("<a>"), got...), "</a>"...)
		err := d.parse(doc)
		valid := true
		for _, c := range s {
			valid = valid && (plainByte(c) || c == '&' || c == '\n' || c == '\t' || c == '\r')
		}
		switch {
		case valid && err != nil:
			t.Fatalf("seed %d: %q: %v", seed, doc, err)
		case !valid && err == nil && !isValidUTF8Text(s):
			t.Fatalf("seed %d: %q accepted", seed, doc)
		case err == nil:
			if text := d.textOf(0); !bytes.Equal(text, s) {
				t.Fatalf("seed %d: parsed %q, want %q", seed, text, s)
			}
		}
	}
}

// isValidUTF8Text: s is valid UTF-8 without control characters other than
// tab, LF and CR (which appendText escapes): text XML may carry.
func isValidUTF8Text(s []byte) bool {
	if !utf8.Valid(s) {
		return false
	}
	for _, c := range s {
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}

// BenchmarkXMLText: the parser's text scan and the encoder's escaping on
// a 1 KiB body of the kind smqbench sends (letters, digits, spaces).
func BenchmarkXMLText(b *testing.B) {
	body := make([]byte, 1024)
	r := rand.New(rand.NewPCG(1, 1))
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 "
	for i := range body {
		body[i] = alphabet[r.IntN(len(alphabet))]
	}
	b.Run("parse", func(b *testing.B) {
		doc := append(append([]byte("<MessageBody>"), body...), "</MessageBody>"...)
		var d xmlDoc
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if err := d.parse(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("escape", func(b *testing.B) {
		out := make([]byte, 0, 2048)
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			out = appendText(out[:0], body)
		}
	})
}
