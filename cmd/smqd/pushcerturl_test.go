package main

import (
	"io"
	"strings"
	"testing"
)

// TestPushCertURLMustBeAnHTTPURL: --push-cert-url is what every push
// names as its certificate (x-mns-signing-cert-url); a value that is not
// an http(s) URL with a host was taken and sent as given, and receivers
// could verify no push. It is a usage error.
func TestPushCertURLMustBeAnHTTPURL(t *testing.T) {
	for _, bad := range []string{"htp:/nohost", "::bogus", "/x509.pem", "http://", "ftp://host/c.pem"} {
		if _, err := parseConfig([]string{"--push-cert-url", bad}, env(nil), io.Discard); err == nil || !strings.Contains(err.Error(), "--push-cert-url must be an http:// or https:// URL") {
			t.Errorf("--push-cert-url %q: %v", bad, err)
		}
	}
	if _, err := parseConfig(nil, env(map[string]string{"SMQD_PUSH_CERT_URL": "htp:/nohost"}), io.Discard); err == nil || !strings.HasPrefix(err.Error(), `SMQD_PUSH_CERT_URL="htp:/nohost": `) {
		t.Errorf("SMQD_PUSH_CERT_URL: %v, want the variable named", err)
	}
	for _, good := range []string{"https://mq.example.com/x509_public_certificate.pem", "http://10.0.0.5:8080/c.pem"} {
		if _, err := parseConfig([]string{"--push-cert-url", good}, env(nil), io.Discard); err != nil {
			t.Errorf("--push-cert-url %q: %v", good, err)
		}
	}
}
