package server

// Request authentication: MNS signature version 2 (spec §2.1, §2.2).
//
//	Authorization: MNS <AccessKeyId>:<Signature>
//	Signature    = base64(HMAC-SHA1(secret, StringToSign))
//	StringToSign = METHOD "\n" Content-MD5 "\n" Content-Type "\n" Date "\n"
//	               CanonicalizedMNSHeaders CanonicalizedResource
//
// Every value is taken exactly as received: Content-MD5 is signed verbatim
// and never checked against the body (two incompatible encodings exist,
// spec §0.4), the resource is the raw request target with any absolute-form
// prefix stripped (spec §0.5), and the date is Date, else x-mns-date.
//
// The order of checks, first failure wins:
//
//	x-mns-version present but not 2015-06-06     400 InvalidVersionHeader (also with NoAuth)
//	no Authorization                             400 MissingAuthorizationHeader
//	Authorization not "MNS id:sig"               400 InvalidAuthorizationHeader
//	no x-mns-version                             400 MissingVersionHeader
//	neither Date nor x-mns-date                  400 MissingDateHeader
//	date unparsable                              400 InvalidDateHeader
//	date more than MaxClockSkew off              408 TimeExpired
//	unknown access key id                        403 InvalidAccessKeyId
//	signature mismatch                           403 SignatureDoesNotMatch

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/base64"
	"hash"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

const apiVersion = "2015-06-06"

// credential is one access key with a pool of keyed HMAC states, so that
// verifying a signature allocates nothing.
type credential struct {
	pool sync.Pool // of hash.Hash (HMAC-SHA1 keyed with the secret)
}

func newCredential(secret string) *credential {
	key := []byte(secret)
	c := &credential{}
	c.pool.New = func() any { return hmac.New(sha1.New, key) }
	return c
}

// signHeader is one x-mns-* header: its name as received (compared and
// written lower-cased) and its value.
type signHeader struct {
	name, value []byte
}

// signInput is everything the signature covers.
type signInput struct {
	method, contentMD5, contentType, date []byte
	headers                               []signHeader // x-mns-* headers, any order
	resource                              []byte
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

// sortHeaders sorts by lower-cased name (insertion sort: there are few).
func sortHeaders(h []signHeader) {
	for i := 1; i < len(h); i++ {
		for j := i; j > 0 && lessFold(h[j].name, h[j-1].name); j-- {
			h[j], h[j-1] = h[j-1], h[j]
		}
	}
}

// appendStringToSign appends the canonical string of spec §2.2. It sorts
// in.headers in place.
func appendStringToSign(dst []byte, in *signInput) []byte {
	dst = append(dst, in.method...)
	dst = append(dst, '\n')
	dst = append(dst, in.contentMD5...)
	dst = append(dst, '\n')
	dst = append(dst, in.contentType...)
	dst = append(dst, '\n')
	dst = append(dst, in.date...)
	dst = append(dst, '\n')
	sortHeaders(in.headers)
	for _, h := range in.headers {
		for _, c := range h.name {
			dst = append(dst, lower(c))
		}
		dst = append(dst, ':')
		dst = append(dst, bytes.TrimSpace(h.value)...)
		dst = append(dst, '\n')
	}
	return append(dst, in.resource...)
}

// isMNSHeader reports whether name starts with "x-mns-" in any case.
func isMNSHeader(name []byte) bool {
	return len(name) > 6 && bytes.EqualFold(name[:6], []byte("x-mns-"))
}

// parseAuthorization splits "MNS <id>:<sig>".
func parseAuthorization(v []byte) (id, sig []byte, ok bool) {
	v = bytes.TrimSpace(v)
	if len(v) < 4 || string(v[:4]) != "MNS " {
		return nil, nil, false
	}
	v = bytes.TrimLeft(v[4:], " ")
	i := bytes.IndexByte(v, ':')
	if i <= 0 || i == len(v)-1 {
		return nil, nil, false
	}
	id, sig = v[:i], v[i+1:]
	if bytes.IndexByte(id, ' ') >= 0 || bytes.IndexByte(sig, ' ') >= 0 {
		return nil, nil, false
	}
	return id, sig, true
}

// authenticator checks request headers and signatures.
type authenticator struct {
	noAuth bool
	keys   map[string]*credential // access key id -> credential; read-only after New
	skew   time.Duration
	now    func() time.Time
}

func newAuthenticator(opts *Options) *authenticator {
	a := &authenticator{
		noAuth: opts.NoAuth,
		keys:   make(map[string]*credential, len(opts.Credentials)),
		skew:   opts.MaxClockSkew,
		now:    opts.Now,
	}
	for id, secret := range opts.Credentials {
		a.keys[id] = newCredential(secret)
	}
	return a
}

// authScratch is per-request scratch space for check.
type authScratch struct {
	headers []signHeader
	buf     []byte
	sum     []byte
	b64     [28]byte
}

// check authenticates the request whose raw resource (path and query as
// signed) is given. It returns nil or an *apiError.
func (a *authenticator) check(h *fasthttp.RequestHeader, resource []byte, s *authScratch) error {
	version := h.Peek("X-Mns-Version")
	if len(version) > 0 && string(bytes.TrimSpace(version)) != apiVersion {
		return newAPIError(codeInvalidVersionHeader, "x-mns-version must be "+apiVersion)
	}
	if a.noAuth {
		return nil
	}
	authz := h.Peek("Authorization")
	if len(authz) == 0 {
		return newAPIError(codeMissingAuthorizationHeader, "the Authorization header is missing")
	}
	id, sig, ok := parseAuthorization(authz)
	if !ok {
		return newAPIError(codeInvalidAuthorizationHeader, "the Authorization header must be \"MNS <AccessKeyId>:<Signature>\"")
	}
	if len(version) == 0 {
		return newAPIError(codeMissingVersionHeader, "the x-mns-version header is missing")
	}
	date := h.Peek("Date")
	if len(date) == 0 {
		date = h.Peek("X-Mns-Date")
	}
	if len(date) == 0 {
		return newAPIError(codeMissingDateHeader, "neither Date nor x-mns-date is present")
	}
	t, err := fasthttp.ParseHTTPDate(date)
	if err != nil {
		return newAPIError(codeInvalidDateHeader, "the Date header is not an RFC 1123 date")
	}
	now := a.now()
	if d := now.Sub(t); d > a.skew || d < -a.skew {
		return newAPIError(codeTimeExpired, "the request date differs from the server time by more than "+a.skew.String())
	}
	cred := a.keys[string(id)]
	if cred == nil {
		return newAPIError(codeInvalidAccessKeyId, "unknown access key id")
	}

	in := signInput{
		method:      h.Method(),
		contentMD5:  h.Peek("Content-MD5"),
		contentType: h.ContentType(),
		date:        date,
		resource:    resource,
	}
	s.headers = s.headers[:0]
	for k, v := range h.All() {
		if isMNSHeader(k) {
			s.headers = append(s.headers, signHeader{name: k, value: v})
		}
	}
	in.headers = s.headers
	s.buf = appendStringToSign(s.buf[:0], &in)

	mac := cred.pool.Get().(hash.Hash)
	mac.Reset()
	mac.Write(s.buf)
	s.sum = mac.Sum(s.sum[:0])
	cred.pool.Put(mac)
	base64.StdEncoding.Encode(s.b64[:], s.sum)
	if subtle.ConstantTimeCompare(s.b64[:], sig) != 1 {
		return newAPIError(codeSignatureDoesNotMatch, "the request signature does not match; the server signed "+quoteForMessage(s.buf))
	}
	return nil
}

// quoteForMessage renders a string to sign with visible newlines, for the
// SignatureDoesNotMatch message (what the real service also reveals, and
// what lets a user see which part differed).
func quoteForMessage(b []byte) string {
	return string(bytes.ReplaceAll(b, []byte("\n"), []byte(`\n`)))
}

// signature computes the signature of a string to sign; used by tests and
// documentation examples.
func signature(secret string, stringToSign []byte) string {
	mac := hmac.New(sha1.New, []byte(secret))
	mac.Write(stringToSign)
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}
