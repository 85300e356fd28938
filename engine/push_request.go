package engine

// Building one push attempt: its headers, body and signature (spec §3.5,
// §3.6; push.go invariant 4).

import (
	"bytes"
	"context"
	"crypto"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/textproto"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Content types of the three formats (spec §3.5).
var pushContentType = [...]string{
	FormatXML:        "text/xml;charset=utf-8",
	FormatJSON:       "application/json;charset=utf-8",
	FormatSimplified: "text/plain;charset=utf-8",
}

// request builds one signed attempt (spec §3.5, §3.6; invariant 4).
func (ps *pushSub) request(ctx context.Context, sub *subscription, env *pushEnvelope) (*http.Request, error) {
	p := ps.p
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ps.u.url, bytes.NewReader(env.body))
	if err != nil {
		return nil, err
	}
	sum := md5.Sum(env.body)
	md5hex := strings.ToUpper(hex.EncodeToString(sum[:]))
	ctype := pushContentType[sub.cfg.Format]
	date := p.b.clock.Now().UTC().Format(http.TimeFormat)
	mns := [][2]string{
		{"x-mns-version", "2015-06-06"},
		{"x-mns-request-id", p.requestID()},
	}
	if sub.cfg.Format == FormatSimplified {
		mns = append(mns,
			[2]string{"x-mns-message-id", env.id.String()},
			[2]string{"x-mns-topic-owner", string(env.owner)},
			[2]string{"x-mns-topic-name", sub.topic},
			[2]string{"x-mns-subscriber", string(env.owner)},
			[2]string{"x-mns-subscription-name", sub.name},
			[2]string{"x-mns-publish-time", strconv.FormatInt(env.publishMs, 10)},
		)
		if tag := headerValue(env.tag); tag != "" {
			mns = append(mns, [2]string{"x-mns-message-tag", tag})
		}
	}
	if p.opts.Signer != nil {
		mns = append(mns, [2]string{"x-mns-signing-cert-url", base64.StdEncoding.EncodeToString([]byte(p.opts.CertURL))})
	}
	h := req.Header
	// Keys assigned directly: net/http writes them as stored (spec §0.8).
	h["Date"] = []string{date}
	h["Content-Type"] = []string{ctype}
	h["Content-md5"] = []string{md5hex}
	h["User-Agent"] = []string{"Aliyun Notification Service Agent"}
	for _, kv := range mns {
		h[kv[0]] = []string{kv[1]}
	}
	if p.opts.Signer != nil {
		sig, err := p.sign(ctx, PushStringToSign(md5hex, ctype, date, mns, ps.u.resource))
		if err != nil {
			return nil, err
		}
		h["Authorization"] = []string{sig}
	}
	return req, nil
}

// headerValue is tag as an HTTP header carries it, so that the signature
// covers what is sent: net/http trims a value's surrounding blanks, and
// refuses a request whose value holds a control character (a tag published
// before those were refused: each becomes a space).
func headerValue(tag []byte) string {
	s := string(tag)
	if strings.IndexFunc(s, isControl) >= 0 {
		s = strings.Map(func(r rune) rune {
			if isControl(r) {
				return ' '
			}
			return r
		}, s)
	}
	return textproto.TrimString(s)
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// PushStringToSign is the text a push signature covers (spec §3.6):
// "POST", Content-md5, Content-Type and Date, each followed by a newline,
// then every x-mns-* header as lower-case-name:value and a newline, sorted
// by name, then the request's path and query. Receivers rebuild it to
// verify a push.
func PushStringToSign(md5hex, ctype, date string, mns [][2]string, resource string) string {
	sorted := append([][2]string(nil), mns...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i][0] < sorted[j][0] })
	var sb strings.Builder
	sb.WriteString("POST\n")
	sb.WriteString(md5hex + "\n" + ctype + "\n" + date + "\n")
	for _, kv := range sorted {
		sb.WriteString(strings.ToLower(kv[0]) + ":" + kv[1] + "\n")
	}
	sb.WriteString(resource)
	return sb.String()
}

// signSlots bounds the push signatures computed at once in the process
// to half its CPUs (at least one). An RSA-2048 signature takes about a
// millisecond of CPU, one per attempt: a burst to 200 endpoints, each
// worker signing at once, took the CPUs from the API (a SendMessage took
// 0.5-3.4 s instead of 1 ms), and the signing, inside the attempts'
// timeouts, made healthy endpoints time out and be pushed again (push
// audit, 2026-12-06).
var signSlots = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2))

func (p *pusher) sign(ctx context.Context, s string) (string, error) {
	select {
	case signSlots <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	defer func() { <-signSlots }()
	d := sha1.Sum([]byte(s)) //nolint:gosec // the spec's algorithm (§3.6)
	sig, err := p.opts.Signer.Sign(rand.Reader, d[:], crypto.SHA1)
	if err != nil {
		return "", fmt.Errorf("engine: sign push: %w", err)
	}
	return base64.StdEncoding.EncodeToString(sig), nil
}

// requestID returns a new x-mns-request-id: 24 upper-case hex digits, the
// time in seconds then a counter (queue spec §2.4's shape).
func (p *pusher) requestID() string {
	var b [12]byte
	binary.BigEndian.PutUint32(b[0:4], uint32(time.Now().Unix()))
	binary.BigEndian.PutUint64(b[4:12], p.reqSeq.Add(1))
	return strings.ToUpper(hex.EncodeToString(b[:]))
}
