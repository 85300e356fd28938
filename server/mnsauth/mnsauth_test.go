package mnsauth

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
)

// vectors are the test vectors of spec §2.2: the documentation's example
// and a DELETE captured from @alicloud/mns 1.2.0 (unsorted, mixed-case
// headers here: the canonicaliser sorts and lower-cases them).
var vectors = []struct {
	name, id, secret string
	req              Request
	wantSTS          string
	wantAuth         string
}{
	{
		name: "docs example", id: "TestAccessID", secret: "TestAccessSecret",
		req: Request{
			Method:   []byte("GET"),
			Date:     []byte("Thu, 09 Jul 2015 03:01:34 GMT"),
			Headers:  []Header{{Name: []byte("X-Mns-Version"), Value: []byte("2015-06-06")}},
			Resource: []byte("/MyQueue"),
		},
		wantSTS:  "GET\n\n\nThu, 09 Jul 2015 03:01:34 GMT\nx-mns-version:2015-06-06\n/MyQueue",
		wantAuth: "MNS TestAccessID:uwx3yeWoILzgmvesW0BQSgfM7b8=",
	},
	{
		name: "@alicloud/mns DELETE", id: "testid", secret: "testsecret",
		req: Request{
			Method:      []byte("DELETE"),
			ContentMD5:  []byte("ZDQxZDhjZDk4ZjAwYjIwNGU5ODAwOTk4ZWNmODQyN2U="),
			ContentType: []byte("text/xml"),
			Date:        []byte("Mon, 30 Nov 2026 04:10:03 GMT"),
			Headers: []Header{
				{Name: []byte("X-Mns-Version"), Value: []byte("2015-06-06")},
				{Name: []byte("x-mns-date"), Value: []byte(" Mon, 30 Nov 2026 04:10:03 GMT ")},
			},
			Resource: []byte("/queues/q1/messages?ReceiptHandle=1-ODU4+/OTk=="),
		},
		wantSTS: "DELETE\nZDQxZDhjZDk4ZjAwYjIwNGU5ODAwOTk4ZWNmODQyN2U=\ntext/xml\nMon, 30 Nov 2026 04:10:03 GMT\n" +
			"x-mns-date:Mon, 30 Nov 2026 04:10:03 GMT\nx-mns-version:2015-06-06\n/queues/q1/messages?ReceiptHandle=1-ODU4+/OTk==",
		wantAuth: "MNS testid:/WdZqJfpqlgZoHuU0sIT3tMQKQE=",
	},
}

func TestVectors(t *testing.T) {
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			r := v.req
			r.Headers = append([]Header(nil), v.req.Headers...)
			sts := AppendStringToSign(nil, &r)
			if string(sts) != v.wantSTS {
				t.Fatalf("string to sign\n%q\nwant\n%q", sts, v.wantSTS)
			}
			k := NewKey(v.id, v.secret)
			if got := string(k.AppendAuthorization(nil, sts)); got != v.wantAuth {
				t.Fatalf("Authorization %q, want %q", got, v.wantAuth)
			}
			// Again, with a pooled HMAC state.
			if got := string(k.AppendAuthorization([]byte("x"), sts)); got != "x"+v.wantAuth {
				t.Fatalf("second Authorization %q", got)
			}
			id, sig, ok := ParseAuthorization([]byte(v.wantAuth))
			if !ok || string(id) != v.id || !k.Verify(sts, sig) {
				t.Fatalf("ParseAuthorization/Verify: %q %q %v", id, sig, ok)
			}
			if Sign(v.secret, sts) != string(sig) {
				t.Fatal("Sign differs from Key.AppendSignature")
			}
			// Any change to the signed string or the signature fails.
			if k.Verify(append(sts, ' '), sig) {
				t.Fatal("verified a different string to sign")
			}
			bad := bytes.Clone(sig)
			bad[0] ^= 1
			if k.Verify(sts, bad) || k.Verify(sts, sig[:len(sig)-1]) || NewKey(v.id, v.secret+"x").Verify(sts, sig) {
				t.Fatal("verified a wrong signature or key")
			}
		})
	}
}

func TestParseAuthorization(t *testing.T) {
	for _, tc := range []struct {
		in      string
		id, sig string
		ok      bool
	}{
		{"MNS id:sig", "id", "sig", true},
		{"  MNS   id:sig  ", "id", "sig", true},
		{"MNS id:", "", "", false},
		{"MNS :sig", "", "", false},
		{"MNS idsig", "", "", false},
		{"mns id:sig", "", "", false},
		{"Basic dGVzdDp0ZXN0", "", "", false},
		{"MNS i d:sig", "", "", false},
		{"MNS id:s ig", "", "", false},
		{"MNS4-HMAC-SHA256 Credential=id/x,Signature=00", "", "", false},
		{"", "", "", false},
	} {
		id, sig, ok := ParseAuthorization([]byte(tc.in))
		if ok != tc.ok || string(id) != tc.id || string(sig) != tc.sig {
			t.Errorf("%q: %q %q %v", tc.in, id, sig, ok)
		}
	}
}

func TestStripAbsoluteForm(t *testing.T) {
	for in, want := range map[string]string{
		"/queues/q?x=1": "/queues/q?x=1",
		"http://acct.mns.cn-hangzhou.aliyuncs.com/queues/q1/messages?ReceiptHandle=1-ODU4+/OTk==": "/queues/q1/messages?ReceiptHandle=1-ODU4+/OTk==",
		"HTTPS://h:1/queues": "/queues",
		"http://h":           "/",
		"http://h?x":         "?x",
		"*":                  "*",
		"a b://h/x":          "a b://h/x",
	} {
		if got := string(StripAbsoluteForm([]byte(in))); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

func TestContentMD5(t *testing.T) {
	// Spec §2.1: the empty body's Content-MD5 as Go and @alicloud/mns send it.
	if got := string(AppendContentMD5(nil, nil)); got != "ZDQxZDhjZDk4ZjAwYjIwNGU5ODAwOTk4ZWNmODQyN2U=" {
		t.Fatalf("empty-body Content-MD5 %q", got)
	}
	body := []byte(`<Message><MessageBody>hello</MessageBody></Message>`)
	sum := md5.Sum(body)
	forms := map[string]string{
		"hex (Go, Python, @alicloud/mns)": string(AppendContentMD5(nil, body)),
		"upper-case hex":                  base64.StdEncoding.EncodeToString([]byte(strings.ToUpper(hex.EncodeToString(sum[:])))),
		"raw digest (ali-mns)":            base64.StdEncoding.EncodeToString(sum[:]),
		"with blanks":                     " " + base64.StdEncoding.EncodeToString(sum[:]) + " ",
	}
	for name, v := range forms {
		if !ContentMD5Matches([]byte(v), body) {
			t.Errorf("%s form %q not accepted", name, v)
		}
		if ContentMD5Matches([]byte(v), append(bytes.Clone(body), ' ')) {
			t.Errorf("%s form %q accepted for another body", name, v)
		}
	}
	other := md5.Sum([]byte("other"))
	for _, v := range []string{
		"", "bm90IGFuIG1kNQ==", "not base64 at all",
		base64.StdEncoding.EncodeToString(other[:]),
		base64.StdEncoding.EncodeToString([]byte(hex.EncodeToString(other[:]))),
		base64.StdEncoding.EncodeToString([]byte(strings.Repeat("z", 32))), // 32 bytes, not hex
		hex.EncodeToString(sum[:]),                                         // bare hex, not base64: no SDK sends it
	} {
		if ContentMD5Matches([]byte(v), body) {
			t.Errorf("%q accepted", v)
		}
	}
}

// SignHTTP signs what net/http sends: the server-side canonical string of
// the same request verifies.
func TestSignHTTP(t *testing.T) {
	body := "<Message><MessageBody>x</MessageBody></Message>"
	r, err := http.NewRequest("DELETE", "http://127.0.0.1:1/queues/q/messages?ReceiptHandle=a%2Bb&x=1", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Content-Type", "text/xml")
	r.Header.Set("Content-MD5", string(AppendContentMD5(nil, []byte(body))))
	r.Header.Set("x-mns-prefix", "p")
	k := NewKey("id", "secret")
	k.SignHTTP(r)
	if r.Header.Get("Date") == "" || r.Header.Get("X-Mns-Version") != APIVersion {
		t.Fatalf("headers %v", r.Header)
	}
	id, sig, ok := ParseAuthorization([]byte(r.Header.Get("Authorization")))
	if !ok || string(id) != "id" {
		t.Fatalf("Authorization %q", r.Header.Get("Authorization"))
	}
	sts := "DELETE\n" + r.Header.Get("Content-MD5") + "\ntext/xml\n" + r.Header.Get("Date") + "\n" +
		"x-mns-prefix:p\nx-mns-version:2015-06-06\n/queues/q/messages?ReceiptHandle=a%2Bb&x=1"
	if !k.Verify([]byte(sts), sig) {
		t.Fatalf("signature does not verify over %q", sts)
	}
}

// Signing and verifying allocate nothing once buffers have grown.
func TestNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under the race detector")
	}
	k := NewKey("id", "secret")
	v := vectors[1]
	r := v.req
	r.Headers = append([]Header(nil), v.req.Headers...)
	sts := make([]byte, 0, 512)
	auth := make([]byte, 0, 64)
	_, sig, _ := ParseAuthorization([]byte(v.wantAuth))
	n := testing.AllocsPerRun(100, func() {
		sts = AppendStringToSign(sts[:0], &r)
		auth = k.AppendAuthorization(auth[:0], sts)
		k.Verify(sts, sig)
	})
	if n > 0 {
		t.Fatalf("%v allocations per sign and verify", n)
	}
}

// FuzzStringToSign: the canonical string does not depend on the order or
// the case of the x-mns-* header names, has the fixed four lines first,
// lower-cases and sorts the headers, and ends with the resource verbatim.
func FuzzStringToSign(f *testing.F) {
	f.Add("GET", "", "", "Thu, 09 Jul 2015 03:01:34 GMT", "X-Mns-Version:2015-06-06", "/MyQueue")
	f.Add("DELETE", "ZDQxZDhjZDk4ZjAwYjIwNGU5ODAwOTk4ZWNmODQyN2U=", "text/xml", "Mon, 30 Nov 2026 04:10:03 GMT",
		"x-mns-version:2015-06-06\nx-mns-date:Mon, 30 Nov 2026 04:10:03 GMT", "/queues/q1/messages?ReceiptHandle=1-ODU4+/OTk==")
	f.Add("GET", "", "", "d", "x-mns-ret-number:10\nX-MNS-PREFIX: q \nx-mns-marker:m1", "/queues")
	f.Fuzz(func(t *testing.T, method, md5, ctype, date, headerBlock, resource string) {
		for _, s := range []string{method, md5, ctype, date} {
			if strings.ContainsRune(s, '\n') {
				return // header values cannot hold newlines
			}
		}
		var hs []Header
		for _, line := range strings.Split(headerBlock, "\n") {
			name, value, ok := strings.Cut(line, ":")
			if !ok || !IsMNSHeader([]byte(name)) || strings.ContainsAny(name, " \t") {
				continue
			}
			hs = append(hs, Header{Name: []byte(name), Value: []byte(value)})
		}
		in := Request{Method: []byte(method), ContentMD5: []byte(md5), ContentType: []byte(ctype),
			Date: []byte(date), Headers: hs, Resource: []byte(resource)}
		a := AppendStringToSign(nil, &in)
		// Reversed order and flipped case give the same bytes.
		rev := make([]Header, len(hs))
		for i, h := range hs {
			rev[len(hs)-1-i] = Header{Name: asciiUpper(h.Name), Value: h.Value}
		}
		in.Headers = rev
		b := AppendStringToSign(nil, &in)
		if !bytes.Equal(a, b) && !hasFoldDuplicates(hs) {
			t.Fatalf("order/case dependent:\n%q\n%q", a, b)
		}
		prefix := method + "\n" + md5 + "\n" + ctype + "\n" + date + "\n"
		if !bytes.HasPrefix(a, []byte(prefix)) || !bytes.HasSuffix(a, []byte(resource)) {
			t.Fatalf("shape: %q", a)
		}
		block := string(a[len(prefix) : len(a)-len(resource)])
		lines := strings.Split(strings.TrimSuffix(block, "\n"), "\n")
		if len(hs) == 0 {
			if block != "" {
				t.Fatalf("header block %q without headers", block)
			}
			return
		}
		if len(lines) < len(hs) {
			t.Fatalf("%d header lines for %d headers", len(lines), len(hs))
		}
		prev := ""
		for _, h := range in.Headers {
			n := strings.ToLower(string(h.Name))
			if n < prev {
				t.Fatalf("headers not sorted: %q after %q", n, prev)
			}
			prev = n
		}
	})
}

// hasFoldDuplicates reports two headers whose names differ only in case
// (then their relative order legitimately depends on the input order).
func hasFoldDuplicates(hs []Header) bool {
	seen := map[string]bool{}
	for _, h := range hs {
		k := string(asciiUpper(h.Name))
		if seen[k] {
			return true
		}
		seen[k] = true
	}
	return false
}

func asciiUpper(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		out[i] = c
	}
	return out
}
