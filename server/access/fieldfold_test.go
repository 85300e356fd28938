package access

import (
	"strings"
	"testing"
)

// authaudit (2026-12-07): encoding/json matches a field name without
// regard to case as bytes.EqualFold does, Unicode folding included:
// "Reſource" (U+017F LATIN SMALL LETTER LONG S) and "\u212Aeys" (U+212A
// KELVIN SIGN) are Resource and Keys to it. checkKeys compared
// strings.ToLower of the names, which leaves the long s alone, so a
// second Resource spelt so passed as another key and JSON kept only the
// last: a Deny on /queues/secret silently became a Deny on /nothing.
func TestParseRefusesFieldTwiceInUnicodeFold(t *testing.T) {
	for _, c := range []struct{ name, doc string }{
		{"resource and long-s resource", `{"Policies": {"p": {"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"},
			{"Effect": "Deny", "Action": "*", "Resource": "acs:mns:*:*:/queues/secret/messages", "Reſource": "acs:mns:*:*:/nothing"}]}},
			"Keys": {"k": ["p"]}}`},
		{"keys and long-s keys", `{"Policies": {"p": {"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}},
			"Keys": {"k": ["AliyunMNSReadOnlyAccess"]}, "Keyſ": {"k": ["p"]}}`},
		// The Kelvin sign was caught already: strings.ToLower makes it k.
		{"keys and kelvin-sign keys", `{"Policies": {"p": {"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}},
			"Keys": {"k": ["AliyunMNSReadOnlyAccess"]}, "` + "\u212A" + `eys": {"k": ["p"]}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Parse([]byte(c.doc), testActions)
			if err == nil || !strings.Contains(err.Error(), "twice") {
				var explain string
				if s != nil {
					explain = s.Explain([]byte("k"), 0, []byte("/queues/secret/messages"), Context{})
				}
				t.Fatalf("Parse: %v (key k, action %s on /queues/secret/messages: %s), want an error: a field given twice", err, testActions[0], explain)
			}
		})
	}
}
