package server

// Request-target parsing: absolute-form stripping, path/query split and the
// query parameters of spec §1.3.
//
// Query parameter names are matched case-insensitively (Go sends
// ReceiptHandle, @alicloud/mns receiptHandle, spec §0.7). Values are
// percent-decoded (%XX only): a '+' stays a '+' (spec §0.6), so neither
// net/url's nor fasthttp's form decoding is used. Unknown parameters are
// ignored; a known one given twice, or a malformed %-escape, is
// InvalidQueryString.

import (
	"bytes"

	"github.com/smqd/smqd/server/mnsauth"
)

// splitTarget strips an absolute-form prefix (scheme://authority) from a
// raw request target and splits the rest into path and raw query (without
// the '?'). hasQuery reports whether a '?' was present.
func splitTarget(target []byte) (path, query []byte, hasQuery bool) {
	target = stripAbsoluteForm(target)
	if i := bytes.IndexByte(target, '?'); i >= 0 {
		return target[:i], target[i+1:], true
	}
	return target, nil, false
}

// stripAbsoluteForm returns target without a leading "scheme://authority".
// The result is what the client signed (spec §1.1, §2.2).
func stripAbsoluteForm(target []byte) []byte { return mnsauth.StripAbsoluteForm(target) }

// queryParam is one known parameter: whether it was present and its
// percent-decoded value.
type queryParam struct {
	present bool
	val     []byte
}

// queryParams holds the parameters the queue API uses.
type queryParams struct {
	waitSeconds       queryParam
	numOfMessages     queryParam
	peekOnly          queryParam
	receiptHandle     queryParam
	visibilityTimeout queryParam
	metaOverride      queryParam
	purge             queryParam // smqd's PurgeQueue (DELETE .../messages?purge=true)
}

// queryError is an InvalidQueryString error.
type queryError struct{ msg string }

func (e *queryError) Error() string { return e.msg }

// parseQuery parses a raw query string into q. Decoded values are stored in
// scratch, which is returned (grown to at least len(raw) so that the slices
// in q stay valid).
func parseQuery(raw []byte, q *queryParams, scratch []byte) ([]byte, error) {
	*q = queryParams{}
	if cap(scratch) < len(raw) {
		scratch = make([]byte, 0, len(raw))
	}
	scratch = scratch[:0]
	for len(raw) > 0 {
		var pair []byte
		if i := bytes.IndexByte(raw, '&'); i >= 0 {
			pair, raw = raw[:i], raw[i+1:]
		} else {
			pair, raw = raw, nil
		}
		if len(pair) == 0 {
			continue
		}
		name, val := pair, []byte(nil)
		if i := bytes.IndexByte(pair, '='); i >= 0 {
			name, val = pair[:i], pair[i+1:]
		}
		p := q.lookup(name)
		if p == nil {
			// Unknown parameters are ignored, but their escapes must still
			// be well-formed.
			if !validEscapes(val) || !validEscapes(name) {
				return scratch, &queryError{msg: "malformed percent-escape in the query string"}
			}
			continue
		}
		if p.present {
			return scratch, &queryError{msg: "query parameter " + string(name) + " given more than once"}
		}
		start := len(scratch)
		var ok bool
		scratch, ok = appendPercentDecoded(scratch, val)
		if !ok {
			return scratch, &queryError{msg: "malformed percent-escape in query parameter " + string(name)}
		}
		p.present = true
		p.val = scratch[start:len(scratch):len(scratch)]
	}
	return scratch, nil
}

func (q *queryParams) lookup(name []byte) *queryParam {
	switch len(name) {
	case len("waitseconds"):
		if bytes.EqualFold(name, []byte("waitseconds")) {
			return &q.waitSeconds
		}
	case len("numOfMessages"):
		if bytes.EqualFold(name, []byte("numOfMessages")) {
			return &q.numOfMessages
		}
		if bytes.EqualFold(name, []byte("ReceiptHandle")) {
			return &q.receiptHandle
		}
	case len("peekonly"):
		if bytes.EqualFold(name, []byte("peekonly")) {
			return &q.peekOnly
		}
	case len("VisibilityTimeout"):
		if bytes.EqualFold(name, []byte("VisibilityTimeout")) {
			return &q.visibilityTimeout
		}
	case len("purge"):
		if bytes.EqualFold(name, []byte("purge")) {
			return &q.purge
		}
	case len("metaoverride"):
		if bytes.EqualFold(name, []byte("metaoverride")) {
			return &q.metaOverride
		}
	}
	return nil
}

func unhexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// appendPercentDecoded appends s with %XX escapes decoded; '+' is kept.
func appendPercentDecoded(dst, s []byte) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			dst = append(dst, c)
			continue
		}
		if i+2 >= len(s) {
			return dst, false
		}
		hi, ok1 := unhexDigit(s[i+1])
		lo, ok2 := unhexDigit(s[i+2])
		if !ok1 || !ok2 {
			return dst, false
		}
		dst = append(dst, hi<<4|lo)
		i += 2
	}
	return dst, true
}

func validEscapes(s []byte) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '%' {
			if i+2 >= len(s) {
				return false
			}
			if _, ok := unhexDigit(s[i+1]); !ok {
				return false
			}
			if _, ok := unhexDigit(s[i+2]); !ok {
				return false
			}
			i += 2
		}
	}
	return true
}

// isTrue reports whether a boolean parameter value is "true" (any case).
// isPurge reports whether a DELETE .../messages is smqd's PurgeQueue.
func isPurge(qp *queryParams) bool { return qp.purge.present && isTrue(qp.purge.val) }

func isTrue(v []byte) bool { return bytes.EqualFold(bytes.TrimSpace(v), []byte("true")) }

// parseDecimal parses a decimal integer with optional surrounding
// whitespace and an optional leading '-' (spec §1.3). It refuses anything
// else, including values beyond ±1e15 (all API ranges are far smaller).
func parseDecimal(v []byte) (int64, bool) {
	v = bytes.TrimSpace(v)
	neg := false
	if len(v) > 0 && v[0] == '-' {
		neg, v = true, v[1:]
	}
	if len(v) == 0 || len(v) > 15 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}
