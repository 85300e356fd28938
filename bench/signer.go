package bench

// MNS request signing, signature version 2 (spec §2.2):
//
//	Authorization: MNS <AccessKeyId>:<Signature>
//	Signature    = base64(HMAC-SHA1(secret, StringToSign))
//	StringToSign = METHOD "\n" Content-MD5 "\n" Content-Type "\n" Date "\n"
//	               CanonicalizedMNSHeaders CanonicalizedResource
//
// The bench sends one x-mns-* header, x-mns-version, so the canonical
// header block is the single line "x-mns-version:2015-06-06\n". The
// resource is the request target exactly as written on the request line.

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"time"
)

// APIVersion is the x-mns-version every request carries.
const APIVersion = "2015-06-06"

// Header is one x-mns-* header to sign: lower-case name and value.
type Header struct{ Name, Value string }

// Signer computes Authorization values. It is not safe for concurrent use:
// every worker owns one (it keeps a keyed HMAC state and scratch buffers, so
// signing allocates nothing).
type Signer struct {
	id   string
	mac  hash.Hash
	sts  []byte // string-to-sign scratch
	sum  []byte
	date dateCache
}

// NewSigner returns a signer for one access key.
func NewSigner(accessKeyID, accessKeySecret string) *Signer {
	return &Signer{
		id:  accessKeyID,
		mac: hmac.New(sha1.New, []byte(accessKeySecret)),
		sts: make([]byte, 0, 512),
		sum: make([]byte, 0, sha1.Size),
	}
}

// AppendStringToSign appends the canonical string to sign. headers must be
// the x-mns-* headers sorted by name, names lower-case.
func AppendStringToSign(dst []byte, method, contentMD5, contentType, date string, headers []Header, resource []byte) []byte {
	dst = append(dst, method...)
	dst = append(dst, '\n')
	dst = append(dst, contentMD5...)
	dst = append(dst, '\n')
	dst = append(dst, contentType...)
	dst = append(dst, '\n')
	dst = append(dst, date...)
	dst = append(dst, '\n')
	for _, h := range headers {
		dst = append(dst, h.Name...)
		dst = append(dst, ':')
		dst = append(dst, h.Value...)
		dst = append(dst, '\n')
	}
	return append(dst, resource...)
}

// AppendAuthorization appends "MNS <id>:<signature>" for the request parts.
func (s *Signer) AppendAuthorization(dst []byte, method, contentMD5, contentType, date string, headers []Header, resource []byte) []byte {
	s.sts = AppendStringToSign(s.sts[:0], method, contentMD5, contentType, date, headers, resource)
	return s.appendSigned(dst, s.sts)
}

// appendSigned appends "MNS <id>:" and base64(HMAC-SHA1(stringToSign)).
func (s *Signer) appendSigned(dst, stringToSign []byte) []byte {
	s.mac.Reset()
	s.mac.Write(stringToSign)
	s.sum = s.mac.Sum(s.sum[:0])
	dst = append(dst, "MNS "...)
	dst = append(dst, s.id...)
	dst = append(dst, ':')
	return base64.StdEncoding.AppendEncode(dst, s.sum)
}

// Date returns the current time as an RFC 1123 GMT date, recomputed at
// most once a second (the returned string is shared until then).
func (s *Signer) Date(now time.Time) string { return s.date.get(now) }

// dateCache formats the HTTP date once per second.
type dateCache struct {
	sec int64
	s   string
}

func (c *dateCache) get(now time.Time) string {
	if sec := now.Unix(); sec != c.sec || c.s == "" {
		c.sec = sec
		c.s = now.UTC().Format("Mon, 02 Jan 2006 15:04:05 GMT")
	}
	return c.s
}

// appendContentMD5 appends the Content-MD5 the Go SDK sends: base64 of the
// lower-case hex MD5 of the body (spec §2.1).
func appendContentMD5(dst, body []byte) []byte {
	sum := md5.Sum(body)
	var hx [32]byte
	hex.Encode(hx[:], sum[:])
	return base64.StdEncoding.AppendEncode(dst, hx[:])
}
