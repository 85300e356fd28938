package mnsauth_test

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/smqd/smqd/server/mnsauth"
)

// Signing: build the canonical string of a request and append the
// Authorization value. This is the documentation's example request (spec
// §2.2, vector 1).
func Example() {
	key := mnsauth.NewKey("TestAccessID", "TestAccessSecret")
	req := mnsauth.Request{
		Method:   []byte("GET"),
		Date:     []byte("Thu, 09 Jul 2015 03:01:34 GMT"),
		Headers:  []mnsauth.Header{{Name: []byte("x-mns-version"), Value: []byte(mnsauth.APIVersion)}},
		Resource: []byte("/MyQueue"),
	}
	sts := mnsauth.AppendStringToSign(nil, &req)
	fmt.Printf("%q\n", sts)
	fmt.Println(string(key.AppendAuthorization(nil, sts)))
	// Output:
	// "GET\n\n\nThu, 09 Jul 2015 03:01:34 GMT\nx-mns-version:2015-06-06\n/MyQueue"
	// MNS TestAccessID:uwx3yeWoILzgmvesW0BQSgfM7b8=
}

// Verifying: a server rebuilds the canonical string from the headers it
// received, looks the key up by the id in Authorization and checks the
// signature, all before reading the body.
func ExampleKey_Verify() {
	keys := map[string]*mnsauth.Key{"testid": mnsauth.NewKey("testid", "testsecret")}
	authorization := []byte("MNS testid:/WdZqJfpqlgZoHuU0sIT3tMQKQE=")
	req := mnsauth.Request{
		Method:      []byte("DELETE"),
		ContentMD5:  []byte("ZDQxZDhjZDk4ZjAwYjIwNGU5ODAwOTk4ZWNmODQyN2U="),
		ContentType: []byte("text/xml"),
		Date:        []byte("Mon, 30 Nov 2026 04:10:03 GMT"),
		Headers: []mnsauth.Header{
			{Name: []byte("x-mns-version"), Value: []byte("2015-06-06")},
			{Name: []byte("x-mns-date"), Value: []byte("Mon, 30 Nov 2026 04:10:03 GMT")},
		},
		Resource: mnsauth.StripAbsoluteForm([]byte("http://acct.mns.cn-hangzhou.aliyuncs.com/queues/q1/messages?ReceiptHandle=1-ODU4+/OTk==")),
	}
	id, sig, ok := mnsauth.ParseAuthorization(authorization)
	key := keys[string(id)]
	fmt.Println(ok && key != nil && key.Verify(mnsauth.AppendStringToSign(nil, &req), sig))
	// The body is tied to the signature through Content-MD5.
	fmt.Println(mnsauth.ContentMD5Matches(req.ContentMD5, nil))
	// Output:
	// true
	// true
}

// Signing a net/http request, as a command-line client does.
func ExampleKey_SignHTTP() {
	body := `<?xml version="1.0" encoding="UTF-8"?><Message><MessageBody>hello</MessageBody></Message>`
	r, _ := http.NewRequest("POST", "http://127.0.0.1:8080/queues/q1/messages", strings.NewReader(body))
	r.Header.Set("Content-Type", "text/xml;charset=utf-8")
	r.Header.Set("Content-MD5", string(mnsauth.AppendContentMD5(nil, []byte(body))))
	r.Header.Set("Date", "Mon, 30 Nov 2026 04:10:03 GMT") // default: now
	mnsauth.NewKey("testid", "testsecret").SignHTTP(r)
	fmt.Println(r.Header.Get("Authorization"))
	// (The signature was checked independently with Python's hmac module.)

	// Output:
	// MNS testid:DWtvv+Ynv+PPGEDz2Y/XPs+SPzo=
}
