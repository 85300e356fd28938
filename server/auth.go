package server

// Request authentication: MNS signature version 2 (spec §2.1, §2.2). The
// canonical string and the HMAC live in package mnsauth, shared with the
// signing clients; this file holds the server's policy: which header
// problem gets which error code, and the clock check.
//
// Every value is taken exactly as received: Content-MD5 is signed verbatim,
// the resource is the raw request target with any absolute-form prefix
// stripped (spec §0.5), and the date is Date, else x-mns-date.
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
	"errors"
	"sync/atomic"
	"time"

	"github.com/smqd/smqd/server/mnsauth"
	"github.com/valyala/fasthttp"
)

const apiVersion = mnsauth.APIVersion

// authenticator checks request headers and signatures.
type authenticator struct {
	noAuth bool
	// keys maps access key ids to keys. A map is never changed once
	// stored: SetCredentials stores a new one.
	keys atomic.Pointer[map[string]*mnsauth.Key]
	skew time.Duration
	now  func() time.Time
}

func newAuthenticator(opts *Options) *authenticator {
	a := &authenticator{
		noAuth: opts.NoAuth,
		skew:   opts.MaxClockSkew,
		now:    opts.Now,
	}
	a.setKeys(opts.Credentials)
	return a
}

func (a *authenticator) setKeys(creds map[string]string) {
	keys := make(map[string]*mnsauth.Key, len(creds))
	for id, secret := range creds {
		keys[id] = mnsauth.NewKey(id, secret)
	}
	a.keys.Store(&keys)
}

// SetCredentials replaces the access keys of a running server (a
// reload, to add, rotate or revoke keys): requests authenticated after it
// returns are checked against creds alone. Requests already authenticated
// go on. creds follows Options.Credentials' rules and must not be empty;
// it fails on a server without authentication.
func (s *Server) SetCredentials(creds map[string]string) error {
	if s.opts.NoAuth {
		return errors.New("server: no authentication, so no credentials to replace")
	}
	if err := (Options{Credentials: creds}).Validate(); err != nil {
		return err
	}
	s.auth.setKeys(creds)
	return nil
}

// authScratch is per-request scratch space for check.
type authScratch struct {
	headers []mnsauth.Header
	buf     []byte // the string to sign
	id      []byte // the verified access key id (the request's header bytes); nil until check succeeds
}

// check authenticates the request whose raw resource (path and query as
// signed) is given. It returns nil or an *apiError.
func (a *authenticator) check(h *fasthttp.RequestHeader, resource []byte, s *authScratch) error {
	s.id = nil
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
	id, sig, ok := mnsauth.ParseAuthorization(authz)
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
	key := (*a.keys.Load())[string(id)]
	if key == nil {
		return newAPIError(codeInvalidAccessKeyId, "unknown access key id")
	}

	in := mnsauth.Request{
		Method:      h.Method(),
		ContentMD5:  h.Peek("Content-MD5"),
		ContentType: h.ContentType(),
		Date:        date,
		Resource:    resource,
	}
	s.headers = s.headers[:0]
	for k, v := range h.All() {
		if mnsauth.IsMNSHeader(k) {
			s.headers = append(s.headers, mnsauth.Header{Name: k, Value: v})
		}
	}
	in.Headers = s.headers
	s.buf = mnsauth.AppendStringToSign(s.buf[:0], &in)
	if !key.Verify(s.buf, sig) {
		return newAPIError(codeSignatureDoesNotMatch, "the request signature does not match; the server signed "+quoteForMessage(s.buf))
	}
	s.id = id
	return nil
}

// quoteForMessage renders a string to sign with visible newlines, for the
// SignatureDoesNotMatch message (what the real service also reveals, and
// what lets a user see which part differed).
func quoteForMessage(b []byte) string {
	return string(bytes.ReplaceAll(b, []byte("\n"), []byte(`\n`)))
}
