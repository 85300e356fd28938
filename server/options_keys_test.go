package server

import "testing"

// An access key id with ':' (it ends the id in "MNS <id>:<signature>"),
// a blank, a control character or DEL (HTTP clients refuse to send it in
// a header) could sign no request: Validate refuses it. DEL was taken
// until 2026-12-08 (fuzz audit: the credentials file took it too).
func TestValidateRefusesKeyIDsNoRequestCanSign(t *testing.T) {
	for _, id := range []string{"a:b", "a b", "a\tb", "a\x7fb", "\x00"} {
		o := Options{Credentials: map[string]string{id: "secret"}}
		if err := o.Validate(); err == nil {
			t.Errorf("key id %q taken", id)
		}
	}
	if err := (Options{Credentials: map[string]string{"good-id_1.x": "secret"}}).Validate(); err != nil {
		t.Errorf("a plain key id refused: %v", err)
	}
}
