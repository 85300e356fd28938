package server

// Native fuzz tests for the parsers of untrusted input (the canonical
// string to sign is fuzzed in package mnsauth). The seed corpus is checked
// in under testdata/fuzz/<FuzzName>/ (plus the f.Add seeds below). Run one
// with e.g.
//
//	go test -run '^$' -fuzz '^FuzzXMLParse$' -fuzztime 30s ./server/

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzXMLParse: the request XML parser never panics, and whatever it
// accepts survives a round trip through the response encoder: encoding the
// parsed tree and parsing that again gives the same tree and texts.
func FuzzXMLParse(f *testing.F) {
	for _, s := range []string{
		`<Message><MessageBody>hello</MessageBody><Priority>8</Priority></Message>`,
		`<?xml version="1.0" encoding="UTF-8"?><Messages xmlns="http://mns.aliyuncs.com/doc/v1/"><Message><MessageBody>a</MessageBody></Message></Messages>`,
		`<ReceiptHandles><ReceiptHandle>1-00</ReceiptHandle></ReceiptHandles>`,
		"<a>x\r\ny&#13;&#x10FFFF;<![CDATA[<>]]></a>",
		`<Queue/>`,
		`<a b='1' c="&amp;"><!-- c --><?pi?></a>`,
		`<a>1 < 2</a>`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var d xmlDoc
		err := d.parse(in)
		if err != nil {
			var se *xmlSyntaxError
			if err != errEmptyDocument && !errors.As(err, &se) {
				t.Fatalf("unexpected error type %T", err)
			}
			return
		}
		if d.root() != 0 || len(d.nodes) == 0 {
			t.Fatal("accepted without a root")
		}
		for i := range d.nodes {
			n := &d.nodes[i]
			if n.textStart < 0 || n.textEnd < n.textStart || int(n.textEnd) > len(d.text) {
				t.Fatalf("node %d text range %d..%d of %d", i, n.textStart, n.textEnd, len(d.text))
			}
			if len(n.name) == 0 {
				t.Fatalf("node %d has no name", i)
			}
		}
		var out []byte
		var enc func(i int32)
		enc = func(i int32) {
			name := string(d.name(i))
			out = appendOpen(out, name)
			if d.nodes[i].hasChildren {
				for c := d.firstChild(i); c >= 0; c = d.nextSibling(c) {
					enc(c)
				}
			} else {
				out = appendText(out, d.textOf(i))
			}
			out = appendClose(out, name)
		}
		enc(0)
		var d2 xmlDoc
		if err := d2.parse(out); err != nil {
			t.Fatalf("re-encoded document does not parse: %v\n%q", err, out)
		}
		if a, b := dump(&d, 0), dump(&d2, 0); a != b {
			t.Fatalf("round trip differs:\n%s\n%s", a, b)
		}
	})
}

// FuzzQuery: the query parser never panics; decoded values never grow; a
// value percent-encoded byte by byte decodes back to itself.
func FuzzQuery(f *testing.F) {
	for _, s := range []string{
		"numOfMessages=16&waitseconds=30",
		"ReceiptHandle=1-ODU4+/OTk==&VisibilityTimeout=10",
		"receiptHandle=1-ODU4%2B%2FOTk%3D%3D&visibilityTimeout=10",
		"peekonly=true&numOfMessages=3",
		"metaoverride=true",
		"a=%zz",
		"&&=&",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var q queryParams
		scratch, err := parseQuery(raw, &q, nil)
		if err != nil {
			var qe *queryError
			if !errors.As(err, &qe) {
				t.Fatalf("unexpected error type %T", err)
			}
			return
		}
		if len(scratch) > len(raw) {
			t.Fatalf("decoded %d bytes from %d", len(scratch), len(raw))
		}
		for _, p := range []queryParam{q.waitSeconds, q.numOfMessages, q.peekOnly, q.receiptHandle, q.visibilityTimeout, q.metaOverride} {
			if !p.present {
				continue
			}
			var enc []byte
			for _, c := range p.val {
				enc = append(enc, '%', upperHexDigits[c>>4], upperHexDigits[c&15])
			}
			var q2 queryParams
			if _, err := parseQuery(append([]byte("ReceiptHandle="), enc...), &q2, nil); err != nil || !bytes.Equal(q2.receiptHandle.val, p.val) {
				t.Fatalf("re-encoded %q → %q, %v", p.val, q2.receiptHandle.val, err)
			}
		}
		_, _ = parseDecimal(raw)
	})
}
