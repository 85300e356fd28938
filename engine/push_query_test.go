package engine

import "testing"

// An HTTP endpoint whose query holds a space is pushed to with it
// percent-encoded (bytes that are not ASCII are sent as they were), and
// the push is signed over what is sent (topics audit: "POST /p?a=b c HTTP/1.1" failed
// forever). Refusing them at Subscribe (review) also stopped a broker
// holding such a subscription from an earlier version from opening, and
// broke queries in UTF-8 that worked.
func TestPushEscapesItsEndpointsQuery(t *testing.T) {
	b, clk := openTest(t, Options{Push: pushOptions()})
	rcv := newReceiver(t, clk)
	if _, err := b.CreateTopic("t", DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Subscribe("t", "s", SubscriptionConfig{Endpoint: rcv.url("/p?a=b c&d=caf\xc3\xa9"), Format: FormatSimplified}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Publish("t", PublishInput{Body: []byte("hello")}); err != nil {
		t.Fatal(err)
	}
	req := rcv.next(t)
	if want := "/p?a=b%20c&d=caf\xc3\xa9"; req.path != want {
		t.Fatalf("pushed to %q, want %q", req.path, want)
	}
	verifyPush(t, req, &testPushKey().PublicKey, testCertURL)
}
