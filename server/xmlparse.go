package server

// A small, non-validating XML parser for request bodies (spec §3.1).
//
// It builds a flat tree of elements in reusable slices, so parsing a request
// allocates nothing once a pooled xmlDoc has grown to the size of the
// workload. Elements are identified by their local name only (the part after
// any prefix), because clients send four different namespaces (spec §0.2).
// Attributes are checked for well-formedness and otherwise ignored.
//
// Text is decoded as XML 1.0 says: the five predefined entities and
// character references (&#NN; and &#xNN;) are replaced, CDATA sections are
// taken literally, and line ends are normalised (CR LF and lone CR become LF,
// XML 1.0 §2.11) before parsing — so a CR written as &#13; survives while a
// raw one does not.
//
// Well-formedness is checked enough to answer MalformedXML for what clients
// really send wrong (an unescaped '<' or '&' in a body from @alicloud/mns,
// spec §3.1): names, tag nesting and matching end tags, attribute syntax,
// entity and character references, characters outside the XML Char range,
// invalid UTF-8, text outside the root element, and a single root. DTDs are
// refused outright (no entity expansion, ever).
//
// Invariants:
//  1. nodes[0] is the root element after a successful parse.
//  2. A node's text (text[textStart:textEnd]) is meaningful only for an
//     element without child elements; text between child elements is dropped.
//  3. Name slices point into the input; the caller must not use a parsed doc
//     after the input buffer is reused.
//  4. len(nodes) <= maxXMLElements and len(open) <= maxXMLDepth: a parse
//     costs at most the input plus its decoded text plus that many nodes.

import (
	"bytes"
	"errors"
	"strconv"
	"unicode/utf8"
)

// maxXMLDepth bounds element nesting; MNS bodies are at most 4 deep.
const maxXMLDepth = 64

// errTooManyElements refuses a document of more than maxXMLElements
// elements, well-formed or not (InvalidArgument: no request of the API has
// that shape, spec §5.2), before its tree grows further.
var errTooManyElements = argError("the request document", "has more than "+strconv.Itoa(maxXMLElements)+" elements")

// xmlSyntaxError is a well-formedness error; the server answers MalformedXML.
type xmlSyntaxError struct {
	msg string
	off int
}

func (e *xmlSyntaxError) Error() string { return "malformed XML: " + e.msg }

// xmlNode is one element.
type xmlNode struct {
	name        []byte // local name; points into the input
	parent      int32  // -1 for the root
	firstChild  int32  // -1 if none
	lastChild   int32  // -1 if none
	next        int32  // next sibling, -1 if none
	textStart   int32  // decoded text range in xmlDoc.text (leaves only)
	textEnd     int32
	hasChildren bool
}

// xmlDoc is a parsed document. Reuse one by calling parse again.
type xmlDoc struct {
	nodes []xmlNode
	text  []byte   // decoded text of all elements
	open  [][]byte // qualified names of the open elements, for end-tag matching
}

// root returns the root node index (0) or -1 for an empty document.
func (d *xmlDoc) root() int32 {
	if len(d.nodes) == 0 {
		return -1
	}
	return 0
}

// name returns the local name of node i.
func (d *xmlDoc) name(i int32) []byte { return d.nodes[i].name }

// textOf returns the decoded text of a leaf element (nil for one with children).
func (d *xmlDoc) textOf(i int32) []byte {
	n := &d.nodes[i]
	if n.hasChildren {
		return nil
	}
	return d.text[n.textStart:n.textEnd]
}

// firstChild and nextSibling walk the tree; both return -1 at the end.
func (d *xmlDoc) firstChild(i int32) int32  { return d.nodes[i].firstChild }
func (d *xmlDoc) nextSibling(i int32) int32 { return d.nodes[i].next }

func (d *xmlDoc) reset() {
	clear(d.nodes) // drop the name slices into the request buffer
	d.nodes = d.nodes[:0]
	d.text = d.text[:0]
	for i := range d.open {
		d.open[i] = nil
	}
	d.open = d.open[:0]
}

var errEmptyDocument = errors.New("empty document")

// parse parses in. It returns errEmptyDocument when in holds only
// whitespace (callers decide whether that is allowed) and an *xmlSyntaxError
// when in is not well-formed.
func (d *xmlDoc) parse(in []byte) error {
	d.reset()
	p := xmlParser{in: in, d: d}
	return p.document()
}

type xmlParser struct {
	in  []byte
	pos int
	d   *xmlDoc
}

func (p *xmlParser) fail(msg string) error { return &xmlSyntaxError{msg: msg, off: p.pos} }

func isXMLSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (p *xmlParser) skipSpace() {
	for p.pos < len(p.in) && isXMLSpace(p.in[p.pos]) {
		p.pos++
	}
}

func (p *xmlParser) hasPrefix(s string) bool {
	return len(p.in)-p.pos >= len(s) && string(p.in[p.pos:p.pos+len(s)]) == s
}

// skipPast moves past the first occurrence of end, or fails.
func (p *xmlParser) skipPast(end, what string) error {
	i := bytes.Index(p.in[p.pos:], []byte(end))
	if i < 0 {
		return p.fail("unterminated " + what)
	}
	if err := checkChars(p.in[p.pos : p.pos+i]); err != nil {
		p.pos += i
		return p.fail(err.Error() + " in " + what)
	}
	p.pos += i + len(end)
	return nil
}

// misc skips whitespace, comments and processing instructions (outside the
// root element). It reports whether anything other than those follows.
func (p *xmlParser) misc() error {
	for {
		p.skipSpace()
		switch {
		case p.pos >= len(p.in):
			return nil
		case p.hasPrefix("<?"):
			p.pos += 2
			if err := p.skipPast("?>", "processing instruction"); err != nil {
				return err
			}
		case p.hasPrefix("<!--"):
			p.pos += 4
			if err := p.skipPast("-->", "comment"); err != nil {
				return err
			}
		case p.hasPrefix("<!"):
			return p.fail("DTDs and declarations are not accepted")
		default:
			return nil
		}
	}
}

func (p *xmlParser) document() error {
	if p.hasPrefix("\xEF\xBB\xBF") { // UTF-8 byte order mark
		p.pos += 3
	}
	if err := p.misc(); err != nil {
		return err
	}
	if p.pos >= len(p.in) {
		if len(bytes.TrimSpace(p.in)) == 0 {
			return errEmptyDocument
		}
		return p.fail("no root element")
	}
	if p.in[p.pos] != '<' {
		return p.fail("text before the root element")
	}
	if err := p.element(); err != nil {
		return err
	}
	if err := p.misc(); err != nil {
		return err
	}
	if p.pos < len(p.in) {
		return p.fail("content after the root element")
	}
	return nil
}

func isNameStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == ':' || c >= 0x80
}

func isNameChar(c byte) bool {
	return isNameStart(c) || c >= '0' && c <= '9' || c == '-' || c == '.'
}

// name scans a qualified name and returns it.
func (p *xmlParser) name() ([]byte, error) {
	start := p.pos
	if p.pos >= len(p.in) || !isNameStart(p.in[p.pos]) {
		return nil, p.fail("expected a name")
	}
	p.pos++
	for p.pos < len(p.in) && isNameChar(p.in[p.pos]) {
		p.pos++
	}
	n := p.in[start:p.pos]
	if !utf8.Valid(n) {
		return nil, p.fail("invalid UTF-8 in a name")
	}
	return n, nil
}

func localName(qname []byte) []byte {
	if i := bytes.LastIndexByte(qname, ':'); i >= 0 {
		return qname[i+1:]
	}
	return qname
}

// element parses the root element and everything inside it, iteratively.
// p.in[p.pos] is '<' of the root's start tag.
func (p *xmlParser) element() error {
	d := p.d
	cur, done, err := p.startTag(-1)
	if err != nil || done {
		return err
	}
	for cur >= 0 {
		if p.pos >= len(p.in) {
			return p.fail("unexpected end of document inside <" + string(d.open[len(d.open)-1]) + ">")
		}
		if p.in[p.pos] != '<' {
			if err := p.text(); err != nil {
				return err
			}
			continue
		}
		switch {
		case p.hasPrefix("</"):
			p.pos += 2
			qn, err := p.name()
			if err != nil {
				return err
			}
			p.skipSpace()
			if p.pos >= len(p.in) || p.in[p.pos] != '>' {
				return p.fail("expected '>' after an end tag name")
			}
			p.pos++
			open := d.open[len(d.open)-1]
			if !bytes.Equal(open, qn) {
				return p.fail("end tag </" + string(qn) + "> does not match <" + string(open) + ">")
			}
			d.open[len(d.open)-1] = nil
			d.open = d.open[:len(d.open)-1]
			p.close(cur)
			cur = d.nodes[cur].parent
		case p.hasPrefix("<!--"):
			p.pos += 4
			if err := p.skipPast("-->", "comment"); err != nil {
				return err
			}
		case p.hasPrefix("<![CDATA["):
			p.pos += 9
			i := bytes.Index(p.in[p.pos:], []byte("]]>"))
			if i < 0 {
				return p.fail("unterminated CDATA section")
			}
			raw := p.in[p.pos : p.pos+i]
			if err := checkChars(raw); err != nil {
				return p.fail(err.Error() + " in CDATA")
			}
			d.text = appendNormalisedEOL(d.text, raw)
			p.pos += i + 3
		case p.hasPrefix("<?"):
			p.pos += 2
			if err := p.skipPast("?>", "processing instruction"); err != nil {
				return err
			}
		case p.hasPrefix("<!"):
			return p.fail("declarations are not accepted inside elements")
		default:
			child, _, err := p.startTag(cur)
			if err != nil {
				return err
			}
			if child >= 0 {
				cur = child
			}
		}
	}
	return nil
}

// startTag parses a start tag (p.in[p.pos] == '<') under parent. It returns
// the new element's index if the element stays open, or -1 if it was
// self-closing (then done reports whether that was the root).
func (p *xmlParser) startTag(parent int32) (idx int32, done bool, err error) {
	d := p.d
	if len(d.open) >= maxXMLDepth {
		return -1, false, p.fail("elements nested too deeply")
	}
	p.pos++
	qn, err := p.name()
	if err != nil {
		return -1, false, err
	}
	if len(d.nodes) >= maxXMLElements {
		return -1, false, errTooManyElements
	}
	idx = p.open(parent, qn)
	selfClosing, err := p.attributes()
	if err != nil {
		return -1, false, err
	}
	if selfClosing {
		p.close(idx)
		return -1, parent < 0, nil
	}
	d.open = append(d.open, qn)
	return idx, false, nil
}

// open appends a node for a start tag under parent.
func (p *xmlParser) open(parent int32, qn []byte) int32 {
	d := p.d
	idx := int32(len(d.nodes))
	d.nodes = append(d.nodes, xmlNode{
		name:       localName(qn),
		parent:     parent,
		firstChild: -1,
		lastChild:  -1,
		next:       -1,
		textStart:  int32(len(d.text)),
	})
	if parent >= 0 {
		pn := &d.nodes[parent]
		if pn.lastChild >= 0 {
			d.nodes[pn.lastChild].next = idx
		} else {
			pn.firstChild = idx
		}
		pn.lastChild = idx
		pn.hasChildren = true
	}
	return idx
}

func (p *xmlParser) close(i int32) {
	n := &p.d.nodes[i]
	if n.hasChildren {
		n.textStart, n.textEnd = 0, 0
		return
	}
	n.textEnd = int32(len(p.d.text))
}

// attributes parses the rest of a start tag after its name. It reports
// whether the tag was self-closing.
func (p *xmlParser) attributes() (bool, error) {
	for {
		hadSpace := p.pos < len(p.in) && isXMLSpace(p.in[p.pos])
		p.skipSpace()
		if p.pos >= len(p.in) {
			return false, p.fail("unterminated start tag")
		}
		switch p.in[p.pos] {
		case '>':
			p.pos++
			return false, nil
		case '/':
			if p.hasPrefix("/>") {
				p.pos += 2
				return true, nil
			}
			return false, p.fail("expected '>' after '/'")
		}
		if !hadSpace {
			return false, p.fail("expected whitespace before an attribute")
		}
		if _, err := p.name(); err != nil {
			return false, err
		}
		p.skipSpace()
		if p.pos >= len(p.in) || p.in[p.pos] != '=' {
			return false, p.fail("expected '=' after an attribute name")
		}
		p.pos++
		p.skipSpace()
		if p.pos >= len(p.in) || (p.in[p.pos] != '"' && p.in[p.pos] != '\'') {
			return false, p.fail("expected a quoted attribute value")
		}
		q := p.in[p.pos]
		p.pos++
		end := bytes.IndexByte(p.in[p.pos:], q)
		if end < 0 {
			return false, p.fail("unterminated attribute value")
		}
		val := p.in[p.pos : p.pos+end]
		if bytes.IndexByte(val, '<') >= 0 {
			return false, p.fail("'<' in an attribute value")
		}
		if err := checkChars(val); err != nil {
			return false, p.fail(err.Error() + " in an attribute value")
		}
		// Check references; the decoded value is not kept.
		for i := 0; i < len(val); i++ {
			if val[i] == '&' {
				_, n, err := decodeReference(val[i:], nil)
				if err != nil {
					return false, p.fail(err.Error())
				}
				i += n - 1
			}
		}
		p.pos += end + 1
	}
}

// text decodes a run of character data up to the next '<' (or the end):
// one pass that checks characters, decodes references and normalises line
// ends, copying clean stretches in bulk.
func (p *xmlParser) text() error {
	d := p.d
	end := bytes.IndexByte(p.in[p.pos:], '<')
	if end < 0 {
		end = len(p.in) - p.pos
	}
	run := p.in[p.pos : p.pos+end]
	base := p.pos
	seg := 0 // start of the stretch not yet copied
	for i := plainTextWords(run); i < len(run); {
		c := run[i]
		if c >= 0x20 && c < 0x80 && c != '&' || c == '\n' || c == '\t' {
			i++
			i += plainTextWords(run[i:])
			continue
		}
		switch {
		case c == '\r':
			d.text = append(d.text, run[seg:i]...)
			d.text = append(d.text, '\n')
			i++
			if i < len(run) && run[i] == '\n' {
				i++
			}
			seg = i
		case c == '&':
			d.text = append(d.text, run[seg:i]...)
			var n int
			var err error
			d.text, n, err = decodeReference(run[i:], d.text)
			if err != nil {
				p.pos = base + i
				return p.fail(err.Error())
			}
			i += n
			seg = i
		case c < 0x20:
			p.pos = base + i
			return p.fail(errBadChar.Error())
		default: // c >= 0x80
			r, n := utf8.DecodeRune(run[i:])
			if r == utf8.RuneError && n <= 1 {
				p.pos = base + i
				return p.fail(errBadUTF8.Error())
			}
			if !isXMLChar(r) {
				p.pos = base + i
				return p.fail(errBadChar.Error())
			}
			i += n
		}
	}
	d.text = append(d.text, run[seg:]...)
	p.pos = base + len(run)
	return nil
}

// appendNormalisedEOL appends raw with CR LF and lone CR turned into LF.
func appendNormalisedEOL(dst, raw []byte) []byte {
	for {
		i := bytes.IndexByte(raw, '\r')
		if i < 0 {
			return append(dst, raw...)
		}
		dst = append(dst, raw[:i]...)
		dst = append(dst, '\n')
		raw = raw[i+1:]
		if len(raw) > 0 && raw[0] == '\n' {
			raw = raw[1:]
		}
	}
}

var (
	errBadReference = errors.New("'&' that does not start a valid entity or character reference")
	errBadChar      = errors.New("character not allowed in XML")
	errBadUTF8      = errors.New("invalid UTF-8")
)

// decodeReference decodes the reference at the start of s (s[0] == '&'),
// appends its text to dst and returns the bytes consumed.
func decodeReference(s []byte, dst []byte) ([]byte, int, error) {
	semi := bytes.IndexByte(s, ';')
	// A named reference is one of the five (at most "&quot;"); a character
	// reference may have any number of digits, leading zeros included
	// (XML 1.0 [66], as encoding/xml reads it): its digits are checked one
	// by one below, and the value stops growing past 0x10FFFF.
	if semi < 2 || semi > 12 && s[1] != '#' {
		return dst, 0, errBadReference
	}
	ref := s[1:semi]
	if ref[0] == '#' {
		var r rune
		digits := ref[1:]
		base := rune(10)
		if len(digits) > 0 && digits[0] == 'x' {
			base, digits = 16, digits[1:]
		}
		if len(digits) == 0 {
			return dst, 0, errBadReference
		}
		for _, c := range digits {
			var v rune
			switch {
			case c >= '0' && c <= '9':
				v = rune(c - '0')
			case base == 16 && c >= 'a' && c <= 'f':
				v = rune(c-'a') + 10
			case base == 16 && c >= 'A' && c <= 'F':
				v = rune(c-'A') + 10
			default:
				return dst, 0, errBadReference
			}
			r = r*base + v
			if r > 0x10FFFF {
				return dst, 0, errBadReference
			}
		}
		if !isXMLChar(r) {
			return dst, 0, errBadReference
		}
		return utf8.AppendRune(dst, r), semi + 1, nil
	}
	var c byte
	switch string(ref) {
	case "lt":
		c = '<'
	case "gt":
		c = '>'
	case "amp":
		c = '&'
	case "quot":
		c = '"'
	case "apos":
		c = '\''
	default:
		return dst, 0, errBadReference
	}
	return append(dst, c), semi + 1, nil
}

// isXMLChar reports whether r is in the XML 1.0 Char production.
func isXMLChar(r rune) bool {
	return r == 0x09 || r == 0x0A || r == 0x0D ||
		r >= 0x20 && r <= 0xD7FF ||
		r >= 0xE000 && r <= 0xFFFD ||
		r >= 0x10000 && r <= 0x10FFFF
}

// checkChars checks that s is valid UTF-8 made of XML Chars.
func checkChars(s []byte) error {
	for i := 0; i < len(s); {
		c := s[i]
		if c < 0x80 {
			if c < 0x20 && c != '\t' && c != '\n' && c != '\r' {
				return errBadChar
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && n <= 1 {
			return errBadUTF8
		}
		if !isXMLChar(r) {
			return errBadChar
		}
		i += n
	}
	return nil
}
