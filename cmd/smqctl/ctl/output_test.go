package ctl

import (
	"net/http"
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

// An error answer that is not smqd's (a proxy's 502, with no request id)
// names no empty request; an XML error without a RequestId element takes
// the x-mns-request-id header's.
func TestAPIErrorNamesARequestOnlyWhenThereIsOne(t *testing.T) {
	for _, c := range []struct {
		hdr, body, want string
	}{
		{"", "bad gateway", "HTTP502: bad gateway (HTTP 502)"},
		{"r1", "bad gateway", "HTTP502: bad gateway (HTTP 502, request r1)"},
		{"r2", "<Error><Code>QueueNotExist</Code><Message>m</Message></Error>", "QueueNotExist: m (HTTP 502, request r2)"},
		{"r2", "<Error><Code>QueueNotExist</Code><Message>m</Message><RequestId>r3</RequestId></Error>", "QueueNotExist: m (HTTP 502, request r3)"},
	} {
		resp := &http.Response{StatusCode: 502, Header: http.Header{}}
		if c.hdr != "" {
			resp.Header.Set("x-mns-request-id", c.hdr)
		}
		if got := apiError(resp, []byte(c.body)).Error(); got != c.want {
			t.Errorf("%q, %q: %q, want %q", c.hdr, c.body, got, c.want)
		}
	}
}
