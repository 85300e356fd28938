package server

// Append-style XML encoding of response bodies (spec §3).
//
// Every response document starts with the XML declaration and a root
// element in the default namespace http://mns.aliyuncs.com/doc/v1 — no
// trailing slash, no prefix (spec §0.1). Elements are written compactly,
// without whitespace between them, and never empty where a client parses a
// number or calls strip() on the text (spec §3.1, §0.10).

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

const (
	xmlDecl = `<?xml version="1.0" encoding="UTF-8"?>` + "\n"
	xmlNS   = `http://mns.aliyuncs.com/doc/v1`
)

// appendRootOpen appends the declaration and the root start tag.
func appendRootOpen(b []byte, root string) []byte {
	b = append(b, xmlDecl...)
	b = append(b, '<')
	b = append(b, root...)
	b = append(b, ` xmlns="`+xmlNS+`">`...)
	return b
}

// appendEmptyRoot appends a document with an empty root (<Queues xmlns="…"/>).
func appendEmptyRoot(b []byte, root string) []byte {
	b = append(b, xmlDecl...)
	b = append(b, '<')
	b = append(b, root...)
	b = append(b, ` xmlns="`+xmlNS+`"/>`...)
	return b
}

func appendOpen(b []byte, name string) []byte {
	b = append(b, '<')
	b = append(b, name...)
	return append(b, '>')
}

func appendClose(b []byte, name string) []byte {
	b = append(b, '<', '/')
	b = append(b, name...)
	return append(b, '>')
}

// appendText appends s with the characters that XML text cannot hold raw
// escaped: & < > and CR (a raw CR would be turned into LF by the client's
// parser; &#13; keeps it, spec §7.2).
func appendText[S ~string | ~[]byte](b []byte, s S) []byte {
	last := 0
	for i := noEscapeWords(s); i < len(s); {
		var esc string
		switch s[i] {
		case '&':
			esc = "&amp;"
		case '<':
			esc = "&lt;"
		case '>':
			esc = "&gt;"
		case '\r':
			esc = "&#13;"
		default: // nothing to escape
			i++
			i += noEscapeWords(s[i:])
			continue
		}
		b = append(b, s[last:i]...)
		b = append(b, esc...)
		i++
		last = i
		i += noEscapeWords(s[i:])
	}
	return append(b, s[last:]...)
}

// xmlSafe returns s with what XML text cannot hold at all replaced by
// U+FFFD: bytes that are not UTF-8 and characters XML 1.0 excludes (C0
// controls but tab, LF and CR; U+FFFE, U+FFFF). For text a client wrote
// that goes back in an error (its path, its headers, its Host): copied
// raw, it made the error document one no parser reads (Go's xml and
// Python's refused 53 of 1,500 fuzzed requests' errors). Message bodies
// are checked at send instead (props.go, requests.go).
func xmlSafe(s string) string {
	ok := true
	for _, r := range s {
		if r == utf8.RuneError || !xmlChar(r) {
			ok = false
			break
		}
	}
	if ok {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError || !xmlChar(r) {
			r = utf8.RuneError
		}
		b.WriteRune(r)
		i += n
	}
	return b.String()
}

// xmlChar reports whether XML 1.0 text may hold r.
func xmlChar(r rune) bool {
	return r == '\t' || r == '\n' || r == '\r' || r >= 0x20 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF
}

// appendElem appends <name>escaped text</name>.
func appendElem[S ~string | ~[]byte](b []byte, name string, text S) []byte {
	b = appendOpen(b, name)
	b = appendText(b, text)
	return appendClose(b, name)
}

// appendIntElem appends <name>decimal</name>.
func appendIntElem(b []byte, name string, v int64) []byte {
	b = appendOpen(b, name)
	b = strconv.AppendInt(b, v, 10)
	return appendClose(b, name)
}

// appendBoolElem appends <name>True</name> or <name>False</name> (spec §3.1).
func appendBoolElem(b []byte, name string, v bool) []byte {
	if v {
		return appendElem(b, name, "True")
	}
	return appendElem(b, name, "False")
}

// unixMillis is the wire form of message times (spec §3.1).
func unixMillis(t time.Time) int64 { return t.UnixMilli() }

// unixSeconds is the wire form of queue times.
func unixSeconds(t time.Time) int64 { return t.Unix() }
