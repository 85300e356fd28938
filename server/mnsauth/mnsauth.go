// Package mnsauth signs and verifies Alibaba Cloud MNS (Simple Message
// Queue) requests: signature version 2, the default of every SDK (shared
// spec mns-queue-api.md §2.2). The server verifies with it, and smqbench and
// smqctl sign with it, so the two sides cannot drift apart.
//
//	Authorization: MNS <AccessKeyId>:<Signature>
//	Signature    = base64(HMAC-SHA1(secret, StringToSign))
//	StringToSign = METHOD "\n" Content-MD5 "\n" Content-Type "\n" Date "\n"
//	               CanonicalizedMNSHeaders CanonicalizedResource
//
// Every part is taken exactly as sent (spec §2.2):
//
//   - Content-MD5 and Content-Type are the header values verbatim, or empty.
//     The body itself is not signed: a signature can be checked on the
//     headers alone, before any body byte is read. (ContentMD5Matches ties
//     the body to the signed digest.)
//   - Date is the Date header, else x-mns-date.
//   - CanonicalizedMNSHeaders is every header whose name starts with
//     "x-mns-" in any case, written "name:value\n" with the name lower-cased
//     and the value trimmed of surrounding blanks, sorted by name.
//   - CanonicalizedResource is the request target byte for byte as on the
//     request line (path, then "?" and the raw query), with any absolute-form
//     "scheme://authority" prefix stripped. It is never decoded or
//     re-encoded: receipt handles arrive with raw '+', '/', '=' from some
//     SDKs and percent-encoded from others (spec §0.5).
//
// Host, Content-Length, security-token and User-Agent are not signed.
//
// Nothing here allocates once the caller's buffers have grown: the
// canonical string is appended to a caller's slice, and a Key keeps a pool
// of keyed HMAC states.
package mnsauth

import (
	"bytes"
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"net/http"
	"sync"
	"time"
)

// APIVersion is the x-mns-version of the queue API.
const APIVersion = "2015-06-06"

// DateFormat is the layout of the Date header (RFC 1123, always GMT), for
// time.Time.Format on a UTC time. FormatDate applies it.
const DateFormat = "Mon, 02 Jan 2006 15:04:05 GMT"

// FormatDate returns t as a Date header value.
func FormatDate(t time.Time) string { return t.UTC().Format(DateFormat) }

// Header is one x-mns-* header of a request: its name in any case and its
// value as sent.
type Header struct {
	Name, Value []byte
}

// Request holds the parts of a request that the signature covers, each
// exactly as sent (see the package comment).
type Request struct {
	Method      []byte   // upper case, as on the request line
	ContentMD5  []byte   // the Content-MD5 header, or empty
	ContentType []byte   // the Content-Type header, or empty
	Date        []byte   // the Date header, else x-mns-date
	Headers     []Header // the x-mns-* headers, in any order and case
	Resource    []byte   // raw request target, absolute-form prefix stripped
}

// AppendStringToSign appends the canonical string to sign of r to dst and
// returns the extended slice. It sorts r.Headers in place (by lower-cased
// name; an already sorted slice is not written to).
func AppendStringToSign(dst []byte, r *Request) []byte {
	dst = append(dst, r.Method...)
	dst = append(dst, '\n')
	dst = append(dst, r.ContentMD5...)
	dst = append(dst, '\n')
	dst = append(dst, r.ContentType...)
	dst = append(dst, '\n')
	dst = append(dst, r.Date...)
	dst = append(dst, '\n')
	sortHeaders(r.Headers)
	for _, h := range r.Headers {
		for _, c := range h.Name {
			dst = append(dst, lower(c))
		}
		dst = append(dst, ':')
		dst = append(dst, bytes.TrimSpace(h.Value)...)
		dst = append(dst, '\n')
	}
	return append(dst, r.Resource...)
}

// IsMNSHeader reports whether a header name starts with "x-mns-" in any
// case, i.e. whether the header is signed.
func IsMNSHeader(name []byte) bool {
	return len(name) > 6 && bytes.EqualFold(name[:6], []byte("x-mns-"))
}

// StripAbsoluteForm returns the request target without a leading
// "scheme://authority" (the absolute form that HTTP proxies receive, spec
// §1.1): what remains is the signed resource. Other targets are returned
// unchanged.
func StripAbsoluteForm(target []byte) []byte {
	if len(target) == 0 || target[0] == '/' {
		return target
	}
	i := bytes.Index(target, []byte("://"))
	if i <= 0 {
		return target
	}
	for _, c := range target[:i] {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') {
			return target
		}
	}
	rest := target[i+3:]
	j := bytes.IndexAny(rest, "/?")
	if j < 0 {
		return []byte("/")
	}
	// "http://host?x" has no path: routing then sees an empty one.
	return rest[j:]
}

// ParseAuthorization splits an Authorization value "MNS <id>:<signature>".
// ok is false for any other shape (another scheme, no colon, an empty id
// or signature, blanks inside either).
func ParseAuthorization(v []byte) (id, signature []byte, ok bool) {
	v = bytes.TrimSpace(v)
	if len(v) < 4 || string(v[:4]) != "MNS " {
		return nil, nil, false
	}
	v = bytes.TrimLeft(v[4:], " ")
	i := bytes.IndexByte(v, ':')
	if i <= 0 || i == len(v)-1 {
		return nil, nil, false
	}
	id, signature = v[:i], v[i+1:]
	if bytes.IndexByte(id, ' ') >= 0 || bytes.IndexByte(signature, ' ') >= 0 {
		return nil, nil, false
	}
	return id, signature, true
}

// SignatureLen is the length of a signature: base64 of a 20-byte HMAC-SHA1.
const SignatureLen = 28

// Key is one access key: its id and a pool of HMAC-SHA1 states keyed with
// its secret. It is safe for concurrent use.
type Key struct {
	id   string
	pool sync.Pool // of *macState
}

// macState is a keyed HMAC and room for its sum (a slice passed to
// hash.Hash.Sum escapes, so it is kept with the state).
type macState struct {
	h   hash.Hash
	sum []byte
}

// NewKey returns the key with the given id and secret.
func NewKey(id, secret string) *Key {
	k := &Key{id: id}
	s := []byte(secret)
	k.pool.New = func() any { return &macState{h: hmac.New(sha1.New, s), sum: make([]byte, 0, sha1.Size)} }
	return k
}

// ID returns the access key id.
func (k *Key) ID() string { return k.id }

// sum computes base64(HMAC-SHA1(secret, stringToSign)) into out.
func (k *Key) sum(out *[SignatureLen]byte, stringToSign []byte) {
	m := k.pool.Get().(*macState)
	m.h.Reset()
	m.h.Write(stringToSign)
	m.sum = m.h.Sum(m.sum[:0])
	base64.StdEncoding.Encode(out[:], m.sum)
	k.pool.Put(m)
}

// AppendSignature appends the signature of stringToSign (base64 of its
// HMAC-SHA1, SignatureLen bytes).
func (k *Key) AppendSignature(dst, stringToSign []byte) []byte {
	var sig [SignatureLen]byte
	k.sum(&sig, stringToSign)
	return append(dst, sig[:]...)
}

// AppendAuthorization appends the Authorization value for stringToSign:
// "MNS <id>:<signature>".
func (k *Key) AppendAuthorization(dst, stringToSign []byte) []byte {
	dst = append(dst, "MNS "...)
	dst = append(dst, k.id...)
	dst = append(dst, ':')
	return k.AppendSignature(dst, stringToSign)
}

// Verify reports whether signature (as parsed by ParseAuthorization) is
// this key's signature of stringToSign. The comparison takes constant time.
func (k *Key) Verify(stringToSign, signature []byte) bool {
	var sig [SignatureLen]byte
	k.sum(&sig, stringToSign)
	return subtle.ConstantTimeCompare(sig[:], signature) == 1
}

// Sign returns the signature of stringToSign under secret. It is the
// one-shot form of Key.AppendSignature.
func Sign(secret string, stringToSign []byte) string {
	return string(NewKey("", secret).AppendSignature(nil, stringToSign))
}

// SignHTTP signs a net/http request in place, as the SDKs do: it sets Date
// (now) and x-mns-version when they are missing, and Authorization over the
// request's headers and r.URL.RequestURI(), the target net/http writes on
// the request line of a direct (not proxied) request. Set Content-MD5
// (AppendContentMD5) and Content-Type before calling it.
func (k *Key) SignHTTP(r *http.Request) {
	if r.Header.Get("Date") == "" && r.Header.Get("X-Mns-Date") == "" {
		r.Header.Set("Date", FormatDate(time.Now()))
	}
	if r.Header.Get("X-Mns-Version") == "" {
		r.Header.Set("X-Mns-Version", APIVersion)
	}
	in := Request{
		Method:      []byte(r.Method),
		ContentMD5:  []byte(r.Header.Get("Content-MD5")),
		ContentType: []byte(r.Header.Get("Content-Type")),
		Date:        []byte(r.Header.Get("Date")),
		Resource:    []byte(r.URL.RequestURI()),
	}
	if len(in.Date) == 0 {
		in.Date = []byte(r.Header.Get("X-Mns-Date"))
	}
	for name, vs := range r.Header {
		if IsMNSHeader([]byte(name)) && len(vs) > 0 {
			in.Headers = append(in.Headers, Header{Name: []byte(name), Value: []byte(vs[0])})
		}
	}
	r.Header.Set("Authorization", string(k.AppendAuthorization(nil, AppendStringToSign(nil, &in))))
}

// AppendContentMD5 appends the Content-MD5 value that the Go, Python and
// @alicloud/mns SDKs send: base64 of the lower-case hex MD5 of body (spec
// §0.4).
func AppendContentMD5(dst, body []byte) []byte {
	sum := md5.Sum(body)
	var hx [2 * md5.Size]byte
	hex.Encode(hx[:], sum[:])
	return base64.StdEncoding.AppendEncode(dst, hx[:])
}

// ContentMD5Matches reports whether a Content-MD5 header value is the MD5
// of body in either encoding the SDKs use (spec §0.4): base64 of the hex
// digest (Go, Python, @alicloud/mns; either hex case) or base64 of the raw
// 16-byte digest (ali-mns). Surrounding blanks are ignored.
func ContentMD5Matches(header, body []byte) bool {
	header = bytes.TrimSpace(header)
	sum := md5.Sum(body)
	var dec [2 * md5.Size]byte
	switch len(header) {
	case 24: // base64 of 16 raw bytes
		n, err := base64.StdEncoding.Decode(dec[:], header)
		return err == nil && n == md5.Size && subtle.ConstantTimeCompare(dec[:n], sum[:]) == 1
	case 44: // base64 of 32 hex digits
		n, err := base64.StdEncoding.Decode(dec[:], header)
		if err != nil || n != len(dec) {
			return false
		}
		var got [md5.Size]byte
		if _, err := hex.Decode(got[:], dec[:]); err != nil {
			return false
		}
		return subtle.ConstantTimeCompare(got[:], sum[:]) == 1
	}
	return false
}

// sortHeaders sorts by lower-cased name. Insertion sort: requests carry a
// handful of x-mns-* headers, and a sorted slice is never written to.
func sortHeaders(h []Header) {
	for i := 1; i < len(h); i++ {
		for j := i; j > 0 && lessFold(h[j].Name, h[j-1].Name); j-- {
			h[j], h[j-1] = h[j-1], h[j]
		}
	}
}

// lessFold compares two header names as their lower-case forms.
func lessFold(a, b []byte) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		x, y := lower(a[i]), lower(b[i])
		if x != y {
			return x < y
		}
	}
	return len(a) < len(b)
}

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
