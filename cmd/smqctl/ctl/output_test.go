package ctl

import (
	"testing"
	"unicode/utf8"
)

// oneLine: a table cell of a body keeps line breaks and tabs escaped and
// is cut at a character (a cut inside "€" printed an invalid byte, and a
// tab split the cell into columns: console audit, 2026-12-06).
func TestOneLine(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"a\tb\nc\rd", 40, `a\tb\nc\rd`},
		{"short", 40, "short"},
		{"aaaa€€€€", 6, "aaaa…"},   // the cut falls inside the first €
		{"aaaaa€€€", 9, "aaaaa€…"}, // after it
	} {
		got := oneLine(c.in, c.max)
		if got != c.want || !utf8.ValidString(got) {
			t.Errorf("oneLine(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}
