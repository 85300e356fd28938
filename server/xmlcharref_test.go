package server

import (
	"encoding/xml"
	"testing"
)

// TestXMLCharRefLeadingZeros: XML 1.0 lets a character reference have any
// number of digits ([66] CharRef ::= '&#' [0-9]+ ';' | '&#x' [0-9a-fA-F]+ ';'),
// so leading zeros are well-formed; encoding/xml accepts them. The parser
// refused every reference longer than 12 bytes with MalformedXML
// (apicompat audit, 2026-12-07: `&#x0000000041;` answered 400 over the wire).
func TestXMLCharRefLeadingZeros(t *testing.T) {
	for _, ref := range []string{
		"&#x0000000041;",                  // 10 hex digits
		"&#00000000065;",                  // 11 decimal digits
		"&#x000000000000000000000000041;", // many zeros
		"&#x000000001F600;",               // a supplementary character
	} {
		in := "<Message><MessageBody>a" + ref + "b</MessageBody></Message>"
		var want struct{ MessageBody string }
		if err := xml.Unmarshal([]byte(in), &want); err != nil {
			t.Fatalf("encoding/xml refuses %q: %v", in, err)
		}
		var d xmlDoc
		if err := d.parse([]byte(in)); err != nil {
			t.Errorf("%s: %v (encoding/xml reads %q)", ref, err, want.MessageBody)
			continue
		}
		for c := d.firstChild(0); c >= 0; c = d.nextSibling(c) {
			if is(d.name(c), "MessageBody") && string(d.textOf(c)) != want.MessageBody {
				t.Errorf("%s: %q, encoding/xml says %q", ref, d.textOf(c), want.MessageBody)
			}
		}
	}
	// Still refused: out of range however it is spelled, and named
	// references other than the five.
	for _, in := range []string{
		"<a>&#x0000000110000;</a>",
		"<a>&#00000000000000000000;</a>",
		"<a>&#x00000000000000000000000000000000000000000000000000000000000000000000000000D800;</a>",
		"<a>&averyveryverylongname;</a>",
	} {
		var d xmlDoc
		if err := d.parse([]byte(in)); err == nil {
			t.Errorf("%q parsed", in)
		}
	}
}
