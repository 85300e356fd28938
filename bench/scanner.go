package bench

// A minimal scanner for the response bodies the bench reads on its hot
// path (spec §3.5-§3.7, §3.11). It is not an XML parser: it finds the
// elements by their literal start and end tags, which is enough for
// responses whose element names never occur in text (text is escaped, so
// '<' never appears inside a value). Values are returned raw, still entity
// encoded; the bench's own bodies are [0-9A-Za-z-] and need no decoding.
// Nothing here allocates.

import "bytes"

// element returns the text of the first <name>...</name> in b at or after
// from, and the offset just past its end tag. ok is false when there is
// none. name is the bare element name; open and close are "<name>" and
// "</name>" prebuilt by the caller.
func element(b []byte, from int, open, close []byte) (val []byte, next int, ok bool) {
	if from >= len(b) {
		return nil, len(b), false
	}
	i := bytes.Index(b[from:], open)
	if i < 0 {
		return nil, len(b), false
	}
	start := from + i + len(open)
	j := bytes.Index(b[start:], close)
	if j < 0 {
		return nil, len(b), false
	}
	return b[start : start+j], start + j + len(close), true
}

var (
	tagMessageOpen        = []byte("<Message>")
	tagMessageClose       = []byte("</Message>")
	tagMessageIDOpen      = []byte("<MessageId>")
	tagMessageIDClose     = []byte("</MessageId>")
	tagReceiptHandleOpen  = []byte("<ReceiptHandle>")
	tagReceiptHandleClose = []byte("</ReceiptHandle>")
	tagMessageBodyOpen    = []byte("<MessageBody>")
	tagMessageBodyClose   = []byte("</MessageBody>")
	tagCodeOpen           = []byte("<Code>")
	tagCodeClose          = []byte("</Code>")
	tagErrorCodeOpen      = []byte("<ErrorCode>")
	tagErrorCodeClose     = []byte("</ErrorCode>")
)

// ScannedMessage is one message of a send or receive response; its slices
// point into the scanned body.
type ScannedMessage struct {
	MessageID     []byte
	ReceiptHandle []byte
	MessageBody   []byte
	ErrorCode     []byte // batch partial failure entry
}

// MessageScanner walks the messages of a SendMessage, BatchSendMessage,
// ReceiveMessage or BatchReceiveMessage response: a single root <Message
// ...> or a <Messages> list of <Message> entries.
type MessageScanner struct {
	b   []byte
	pos int
}

// Reset starts scanning body. An error body (root Error or Errors) has no
// messages.
func (s *MessageScanner) Reset(body []byte) {
	s.b, s.pos = body, 0
	if r := rootName(body); bytes.Equal(r, []byte("Error")) || bytes.Equal(r, []byte("Errors")) {
		s.pos = len(body)
	}
}

// rootName returns the name of the first element of b (after any XML
// declaration).
func rootName(b []byte) []byte {
	for i := 0; i < len(b); i++ {
		if b[i] != '<' || i+1 >= len(b) || b[i+1] == '?' || b[i+1] == '!' {
			continue
		}
		j := i + 1
		for j < len(b) && b[j] != '>' && b[j] != ' ' && b[j] != '/' && b[j] != '\n' {
			j++
		}
		return b[i+1 : j]
	}
	return nil
}

// Next fills m with the next message and reports whether there was one.
func (s *MessageScanner) Next(m *ScannedMessage) bool {
	*m = ScannedMessage{}
	b := s.b
	// An entry starts at "<Message>" (list entries) or "<Message " (the
	// root of a single response, which carries xmlns). "<Messages" is the
	// list root and is skipped.
	for s.pos < len(b) {
		i := bytes.Index(b[s.pos:], tagMessageOpen[:len(tagMessageOpen)-1]) // "<Message"
		if i < 0 {
			s.pos = len(b)
			return false
		}
		at := s.pos + i + len("<Message")
		if at >= len(b) {
			s.pos = len(b)
			return false
		}
		if c := b[at]; c != '>' && c != ' ' && c != '/' {
			s.pos = at // "<Messages", "<MessageId", ...
			continue
		}
		end := bytes.Index(b[at:], tagMessageClose)
		if end < 0 {
			end = len(b)
		} else {
			end += at
		}
		entry := b[at:end]
		m.MessageID, _, _ = element(entry, 0, tagMessageIDOpen, tagMessageIDClose)
		m.ReceiptHandle, _, _ = element(entry, 0, tagReceiptHandleOpen, tagReceiptHandleClose)
		m.MessageBody, _, _ = element(entry, 0, tagMessageBodyOpen, tagMessageBodyClose)
		if m.MessageID == nil { // only a failed batch entry has no MessageId
			m.ErrorCode, _, _ = element(entry, 0, tagErrorCodeOpen, tagErrorCodeClose)
		}
		s.pos = end + len(tagMessageClose)
		return true
	}
	return false
}

// ErrorCode returns the Code of an <Error> response body, or nil.
func ErrorCode(body []byte) []byte {
	v, _, _ := element(body, 0, tagCodeOpen, tagCodeClose)
	return v
}

// BatchErrorCodes counts the <Error> entries of a BatchDeleteMessage
// partial-failure body (root Errors) and returns the first ErrorCode.
func BatchErrorCodes(body []byte) (n int, first []byte) {
	pos := 0
	for {
		v, next, ok := element(body, pos, tagErrorCodeOpen, tagErrorCodeClose)
		if !ok {
			return n, first
		}
		if n == 0 {
			first = v
		}
		n++
		pos = next
	}
}

// ElementInt returns the decimal value of the first <name> element of body
// (for GetQueueAttributes counters; not on the hot path).
func ElementInt(body []byte, name string) (int64, bool) {
	v, _, ok := element(body, 0, []byte("<"+name+">"), []byte("</"+name+">"))
	if !ok {
		return 0, false
	}
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}
