package bench

import (
	"testing"
)

// TestSignerVectors checks the test vectors of spec §2.2.
func TestSignerVectors(t *testing.T) {
	cases := []struct {
		name, id, secret              string
		method, md5, ctype, date      string
		headers                       []Header
		resource, wantSTS, wantHeader string
	}{
		{
			name: "docs example", id: "TestAccessID", secret: "TestAccessSecret",
			method: "GET", date: "Thu, 09 Jul 2015 03:01:34 GMT",
			headers:    []Header{{"x-mns-version", "2015-06-06"}},
			resource:   "/MyQueue",
			wantSTS:    "GET\n\n\nThu, 09 Jul 2015 03:01:34 GMT\nx-mns-version:2015-06-06\n/MyQueue",
			wantHeader: "MNS TestAccessID:uwx3yeWoILzgmvesW0BQSgfM7b8=",
		},
		{
			name: "@alicloud/mns DELETE", id: "testid", secret: "testsecret",
			method: "DELETE", md5: "ZDQxZDhjZDk4ZjAwYjIwNGU5ODAwOTk4ZWNmODQyN2U=", ctype: "text/xml",
			date: "Mon, 30 Nov 2026 04:10:03 GMT",
			headers: []Header{
				{"x-mns-date", "Mon, 30 Nov 2026 04:10:03 GMT"},
				{"x-mns-version", "2015-06-06"},
			},
			resource: "/queues/q1/messages?ReceiptHandle=1-ODU4+/OTk==",
			wantSTS: "DELETE\nZDQxZDhjZDk4ZjAwYjIwNGU5ODAwOTk4ZWNmODQyN2U=\ntext/xml\nMon, 30 Nov 2026 04:10:03 GMT\n" +
				"x-mns-date:Mon, 30 Nov 2026 04:10:03 GMT\nx-mns-version:2015-06-06\n/queues/q1/messages?ReceiptHandle=1-ODU4+/OTk==",
			wantHeader: "MNS testid:/WdZqJfpqlgZoHuU0sIT3tMQKQE=",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sts := AppendStringToSign(nil, c.method, c.md5, c.ctype, c.date, c.headers, []byte(c.resource))
			if string(sts) != c.wantSTS {
				t.Fatalf("string to sign\n%q\nwant\n%q", sts, c.wantSTS)
			}
			s := NewSigner(c.id, c.secret)
			got := s.AppendAuthorization(nil, c.method, c.md5, c.ctype, c.date, c.headers, []byte(c.resource))
			if string(got) != c.wantHeader {
				t.Fatalf("Authorization %q, want %q", got, c.wantHeader)
			}
			// Again, reusing the signer's state.
			got = s.AppendAuthorization(got[:0], c.method, c.md5, c.ctype, c.date, c.headers, []byte(c.resource))
			if string(got) != c.wantHeader {
				t.Fatalf("second Authorization %q, want %q", got, c.wantHeader)
			}
		})
	}
}

func TestContentMD5(t *testing.T) {
	// Spec §2.1: the empty body's Content-MD5 as Go and @alicloud/mns send it.
	if got := string(appendContentMD5(nil, nil)); got != "ZDQxZDhjZDk4ZjAwYjIwNGU5ODAwOTk4ZWNmODQyN2U=" {
		t.Fatalf("empty-body Content-MD5 %q", got)
	}
}

func TestSignerAllocs(t *testing.T) {
	s := NewSigner("id", "secret")
	dst := make([]byte, 0, 128)
	res := []byte("/queues/bench-0/messages?numOfMessages=16&waitseconds=1")
	s.AppendAuthorization(dst, "GET", "", "", "Mon, 30 Nov 2026 04:10:03 GMT", versionHeader, res)
	if n := testing.AllocsPerRun(1000, func() {
		dst = s.AppendAuthorization(dst[:0], "GET", "", "", "Mon, 30 Nov 2026 04:10:03 GMT", versionHeader, res)
	}); n != 0 {
		t.Fatalf("signing allocates %v per request", n)
	}
}
