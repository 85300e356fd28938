package server

import (
	"fmt"
	"strings"
	"testing"
)

// A Resource that no request's resource can match is refused when the
// file is read, as an Action that matches no action is: a typo in a Deny
// ("/queues/secret/", "/queue/secret/*") made it match nothing, and the
// file loaded without a word while the Allow beside it let the key do
// what the Deny was written to stop.
func TestPolicyResourceThatMatchesNoResourceIsRefused(t *testing.T) {
	file := func(res string) []byte {
		return fmt.Appendf(nil, `{"Policies": {"p": {"Statement": [
			{"Effect": "Allow", "Action": "mns:*", "Resource": "*"},
			{"Effect": "Deny", "Action": "mns:*", "Resource": %q}]}},
			"Keys": {"k": ["p"]}}`, res)
	}
	for _, path := range []string{
		"/queues/secret/", "/queue/secret/*", "/Queues/secret", "/queues/secret/message",
		"/queues/a/b", "/queues/", "/backups", "/cluster/nodes/x", "/cluster/nodes/", "/topics/t/subscription",
		"/topics/t/subscriptions/s/", "queues", "/nothing",
	} {
		res := "acs:mns:*:*:" + path
		if _, err := ParsePolicies(file(res)); err == nil || !strings.Contains(err.Error(), `policy "p", statement 2: the Resource`) {
			t.Errorf("%s: %v, want an error naming the statement: it matches no resource", res, err)
		}
	}
	for _, path := range []string{
		"*", "/*", "/queues", "/queues/*", "/queues/orders-*/messages", "/queues/secret*", "/queues/q", "/q*s",
		"/topics", "/topics/t", "/topics/t/messages", "/topics/t/subscriptions", "/topics/*/subscriptions/keep-*",
		"/topics/t/subscriptions/s", "/backup", "/cluster/nodes/3", "/cluster/nodes/*", "/*/messages", "/*s",
	} {
		res := "acs:mns:cn-hangzhou:123:" + path
		if _, err := ParsePolicies(file(res)); err != nil {
			t.Errorf("%s: %v", res, err)
		}
	}
}
