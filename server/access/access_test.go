package access

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

var testActions = []string{
	"mns:CreateQueue", "mns:DeleteQueue", "mns:GetQueueAttributes", "mns:ListQueue",
	"mns:SendMessage", "mns:BatchSendMessage", "mns:ReceiveMessage", "mns:BatchReceiveMessage",
	"mns:DeleteMessage", "mns:PublishMessage", "smqd:Backup",
}

func action(t testing.TB, name string) int {
	for i, a := range testActions {
		if a == name {
			return i
		}
	}
	t.Fatalf("no action %q", name)
	return -1
}

func mustParse(t testing.TB, doc string) *Set {
	t.Helper()
	s, err := Parse([]byte(doc), testActions)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return s
}

func TestParseRefuses(t *testing.T) {
	for _, c := range []struct{ name, doc, want string }{
		{"not json", `{`, "policy file"},
		{"unknown top-level field", `{"Policy": {}}`, "unknown field"},
		{"unknown statement field", `{"Policies": {"p": {"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*", "Principal": "x"}]}}}`, "unknown field"},
		{"two values", `{} {}`, "more than one"},
		{"effect", `{"Policies": {"p": {"Statement": [{"Effect": "allow", "Action": "*", "Resource": "*"}]}}}`, "Effect"},
		{"version", `{"Policies": {"p": {"Version": "2", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}}}`, "Version"},
		{"no statement", `{"Policies": {"p": {"Version": "1"}}}`, "no Statement"},
		{"no action", `{"Policies": {"p": {"Statement": [{"Effect": "Allow", "Resource": "*"}]}}}`, "no Action"},
		{"typo in action", `{"Policies": {"p": {"Statement": [{"Effect": "Allow", "Action": "mns:SendMesage", "Resource": "*"}]}}}`, "matches no action"},
		{"action of another service", `{"Policies": {"p": {"Statement": [{"Effect": "Allow", "Action": "oss:*", "Resource": "*"}]}}}`, "matches no action"},
		{"action not a string", `{"Policies": {"p": {"Statement": [{"Effect": "Allow", "Action": 3, "Resource": "*"}]}}}`, "string"},
		{"no resource", `{"Policies": {"p": {"Statement": [{"Effect": "Allow", "Action": "*"}]}}}`, "no Resource"},
		{"resource of another service", `{"Policies": {"p": {"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "acs:oss:*:*:/b"}]}}}`, "acs:mns"},
		{"resource path without slash", `{"Policies": {"p": {"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "acs:mns:*:*:queues/q"}]}}}`, "start with /"},
		{"resource too short", `{"Policies": {"p": {"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "acs:mns:*:/queues/q"}]}}}`, "acs:mns"},
		{"condition operator", `{"Policies": {"p": {"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*", "Condition": {"StringEquals": {"mns:PushType": "http"}}}]}}}`, "not supported"},
		{"ip condition key", `{"Policies": {"p": {"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*", "Condition": {"IpAddress": {"acs:SourceVpc": "vpc-1"}}}]}}}`, "not supported"},
		{"ip condition value", `{"Policies": {"p": {"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*", "Condition": {"IpAddress": {"acs:SourceIp": ["10.0.0.0/8", "10.0.0.300"]}}}]}}}`, "neither an address nor a CIDR"},
		{"ip condition empty", `{"Policies": {"p": {"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*", "Condition": {"NotIpAddress": {"acs:SourceIp": []}}}]}}}`, "no address"},
		{"ip condition zone", `{"Policies": {"p": {"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*", "Condition": {"IpAddress": {"acs:SourceIp": "fe80::1%eth0"}}}]}}}`, "neither an address nor a CIDR"},
		{"ip condition mapped span", `{"Policies": {"p": {"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*", "Condition": {"IpAddress": {"acs:SourceIp": "::ffff:0.0.0.0/80"}}}]}}}`, "IPv4-mapped"},
		{"condition key", `{"Policies": {"p": {"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*", "Condition": {"Bool": {"acs:MFAPresent": "true"}}}]}}}`, "not supported"},
		{"condition value", `{"Policies": {"p": {"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*", "Condition": {"Bool": {"acs:SecureTransport": "yes"}}}]}}}`, "SecureTransport"},
		{"condition two values", `{"Policies": {"p": {"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*", "Condition": {"Bool": {"acs:SecureTransport": ["true", "false"]}}}]}}}`, "one value"},
		// A condition that would be dropped or widened (nothing is ignored):
		// the same key twice in another case (Go's map order picked one of
		// the two at each load), an operator with no key (no condition at
		// all), and any JSON key written twice (JSON keeps only one).
		{"condition key twice", `{"Policies": {"p": {"Statement": [{"Effect": "Deny", "Action": "*", "Resource": "*", "Condition": {"Bool": {"acs:SecureTransport": "false", "acs:securetransport": "true"}}}]}}}`, "given twice"},
		{"ip condition key twice", `{"Policies": {"p": {"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*", "Condition": {"IpAddress": {"acs:SourceIp": "10.0.0.0/8", "ACS:SourceIp": "0.0.0.0/0"}}}]}}}`, "given twice"},
		{"condition operator without key", `{"Policies": {"p": {"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*", "Condition": {"IpAddress": {}}}]}}}`, "no key"},
		{"bool without key", `{"Policies": {"p": {"Statement": [{"Effect": "Deny", "Action": "*", "Resource": "*", "Condition": {"Bool": {}}}]}}}`, "no key"},
		{"resource twice", `{"Policies": {"p": {"Statement": [{"Effect": "Deny", "Action": "*", "Resource": "acs:mns:*:*:/queues/a", "Resource": "acs:mns:*:*:/queues/b"}]}}}`, "twice"},
		{"field twice in another case", `{"Policies": {"p": {"Statement": [{"Effect": "Deny", "effect": "Allow", "Action": "*", "Resource": "*"}]}}}`, "twice"},
		{"policy twice", `{"Policies": {"p": {"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}, "p": {"Statement": [{"Effect": "Deny", "Action": "*", "Resource": "*"}]}}}`, "twice"},
		{"undefined policy", `{"Keys": {"k": ["nope"]}}`, "no policy named"},
		{"built-in name redefined", `{"Policies": {"AliyunMNSFullAccess": {"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}}}`, "built-in"},
		{"empty key id", `{"Keys": {"": ["AliyunMNSFullAccess"]}}`, "empty access key id"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.doc), testActions)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Parse: %v, want an error containing %q", err, c.want)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	s := mustParse(t, `{
	  "Policies": {
	    "worker": {"Version": "1", "Statement": [
	      {"Effect": "Allow", "Action": ["mns:receive*", "MNS:DeleteMessage"], "Resource": "acs:mns:cn-hangzhou:1234:/queues/orders-*/messages"},
	      {"Effect": "Allow", "Action": "mns:SendMessage", "Resource": ["acs:mns:*:*:/queues/audit/messages", "acs:mns:*:*:/queues/orders-1/messages"]}
	    ]},
	    "admin-but": {"Statement": [
	      {"Effect": "Allow", "Action": "*", "Resource": "*"},
	      {"Effect": "Deny", "Action": "mns:DeleteQueue", "Resource": "acs:mns:*:*:/queues/keep-*"}
	    ]},
	    "tls-only": {"Statement": [
	      {"Effect": "Allow", "Action": "mns:*", "Resource": "*"},
	      {"Effect": "Deny", "Action": "mns:*", "Resource": "*", "Condition": {"Bool": {"acs:SecureTransport": "false"}}}
	    ]}
	  },
	  "Keys": {
	    "w": ["worker"],
	    "a": ["admin-but"],
	    "r": ["AliyunMNSReadOnlyAccess"],
	    "f": ["AliyunMNSFullAccess"],
	    "adm": ["SmqdAdministratorAccess"],
	    "t": ["tls-only"],
	    "none": []
	  }
	}`)
	for _, c := range []struct {
		key, action, path string
		secure, want      bool
	}{
		{"w", "mns:ReceiveMessage", "/queues/orders-7/messages", false, true},
		{"w", "mns:BatchReceiveMessage", "/queues/orders-7/messages", false, false}, // "receive*" is a prefix: BatchReceive is not
		{"w", "mns:DeleteMessage", "/queues/orders-/messages", false, true},
		{"w", "mns:DeleteMessage", "/queues/orders-7", false, false},
		{"w", "mns:DeleteMessage", "/queues/payments/messages", false, false},
		{"w", "mns:SendMessage", "/queues/orders-7/messages", false, false},
		{"w", "mns:SendMessage", "/queues/orders-1/messages", false, true},
		{"w", "mns:SendMessage", "/queues/audit/messages", false, true},
		{"w", "mns:SendMessage", "/queues/audit/messagesx", false, false},
		{"w", "mns:ListQueue", "/queues", false, false},
		{"a", "mns:DeleteQueue", "/queues/keep-1", false, false},
		{"a", "mns:DeleteQueue", "/queues/kee", false, true},
		{"a", "mns:SendMessage", "/queues/keep-1/messages", false, true},
		{"a", "smqd:Backup", "/backup", false, true},
		{"r", "mns:ListQueue", "/queues", false, true},
		{"r", "mns:GetQueueAttributes", "/queues/q", false, true},
		{"r", "mns:ReceiveMessage", "/queues/q/messages", false, false},
		{"r", "smqd:Backup", "/backup", false, false},
		{"f", "smqd:Backup", "/backup", false, false}, // mns:* only, as the service's
		{"adm", "smqd:Backup", "/backup", false, true},
		{"adm", "mns:DeleteQueue", "/queues/x", false, true},
		{"f", "mns:DeleteQueue", "/queues/anything", false, true},
		{"t", "mns:SendMessage", "/queues/q/messages", true, true},
		{"t", "mns:SendMessage", "/queues/q/messages", false, false},
		{"t", "smqd:Backup", "/backup", true, false},
		{"none", "mns:ListQueue", "/queues", true, false},
		{"stranger", "mns:ListQueue", "/queues", true, false},
	} {
		ctx := Context{Secure: c.secure}
		if got := s.Check([]byte(c.key), action(t, c.action), []byte(c.path), ctx); got != c.want {
			t.Errorf("Check(%s, %s, %s, secure %v) = %v, want %v (%s)", c.key, c.action, c.path, c.secure, got, c.want,
				s.Explain([]byte(c.key), action(t, c.action), []byte(c.path), ctx))
		}
	}
	if got := s.Explain([]byte("a"), action(t, "mns:DeleteQueue"), []byte("/queues/keep-1"), Context{}); !strings.Contains(got, `"admin-but", statement 2`) {
		t.Errorf("Explain = %q", got)
	}
	if s.Check([]byte("f"), -1, []byte("/queues"), Context{}) || s.Check([]byte("f"), len(testActions), []byte("/queues"), Context{}) {
		t.Error("an action out of range is allowed")
	}
	if !s.Has("none") || s.Has("stranger") {
		t.Error("Has")
	}
}

// TestCheckAgainstModel compares Check with a direct reading of the
// policy rules (regular expressions over the written strings) on random
// policies and requests, driven by seeds.
func TestCheckAgainstModel(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 60
	}
	for seed := range uint64(seeds) {
		r := rand.New(rand.NewPCG(seed, 7))
		f := randomFile(r)
		data, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		s, err := Parse(data, testActions)
		if err != nil {
			continue // an action pattern that matched nothing, say
		}
		for range 200 {
			key := fmt.Sprintf("k%d", r.IntN(4))
			a := r.IntN(len(testActions))
			path := randomPath(r)
			secure := r.IntN(2) == 0
			src := sourceIPs[r.IntN(len(sourceIPs))]
			want := modelCheck(f, key, testActions[a], path, secure, src)
			var addr netip.Addr // the zero Addr: not known
			if src != "" {
				addr = netip.MustParseAddr(src)
			}
			if got := s.Check([]byte(key), a, []byte(path), Context{Secure: secure, SourceIP: addr}); got != want {
				t.Fatalf("seed %d: Check(%s, %s, %s, secure %v, from %q) = %v, model %v\npolicy file: %s", seed, key, testActions[a], path, secure, src, got, want, data)
			}
		}
	}
}

// sourceIPs are the request sources the model test draws from; "" is
// not known.
var sourceIPs = []string{"", "10.0.0.1", "10.1.2.3", "192.168.1.7", "172.16.0.1", "::1", "2001:db8::5", "::ffff:10.0.0.1"}

var ipConditions = []string{"10.0.0.0/8", "10.0.0.1", "192.168.0.0/16", "::1", "2001:db8::/32", "::ffff:10.0.0.0/104", "0.0.0.0/0"}

var pathWords = []string{"queues", "topics", "messages", "q", "qq", "orders-1", "orders-2", "backup", "subscriptions", "s"}

func randomPath(r *rand.Rand) string {
	n := 1 + r.IntN(4)
	var b strings.Builder
	for range n {
		b.WriteByte('/')
		b.WriteString(pathWords[r.IntN(len(pathWords))])
	}
	return b.String()
}

func randomPattern(r *rand.Rand) string {
	if r.IntN(8) == 0 {
		return "*"
	}
	p := randomPath(r)
	// Replace a few runs with *.
	for range r.IntN(3) {
		i := r.IntN(len(p) + 1)
		j := i + r.IntN(len(p)-i+1)
		p = p[:i] + "*" + p[j:]
	}
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	return "acs:mns:*:*:" + p
}

var actionPatterns = []string{"*", "mns:*", "smqd:*", "mns:SendMessage", "mns:send*", "MNS:*Message", "mns:Batch*", "mns:*Queue*", "smqd:Backup", "mns:ListQueue"}

func randomFile(r *rand.Rand) *File {
	f := &File{Policies: map[string]Document{}, Keys: map[string][]string{}}
	np := 1 + r.IntN(3)
	for i := range np {
		var d Document
		for range 1 + r.IntN(4) {
			st := Statement{Effect: "Allow"}
			if r.IntN(3) == 0 {
				st.Effect = "Deny"
			}
			for range 1 + r.IntN(2) {
				st.Action = append(st.Action, actionPatterns[r.IntN(len(actionPatterns))])
			}
			for range 1 + r.IntN(2) {
				st.Resource = append(st.Resource, randomPattern(r))
			}
			if r.IntN(4) == 0 {
				st.Condition = map[string]map[string]strings1{"Bool": {"acs:SecureTransport": {[]string{"true", "false"}[r.IntN(2)]}}}
			}
			if r.IntN(3) == 0 {
				if st.Condition == nil {
					st.Condition = map[string]map[string]strings1{}
				}
				op := []string{"IpAddress", "NotIpAddress"}[r.IntN(2)]
				var vals strings1
				for range 1 + r.IntN(2) {
					vals = append(vals, ipConditions[r.IntN(len(ipConditions))])
				}
				st.Condition[op] = map[string]strings1{"acs:SourceIp": vals}
			}
			d.Statement = append(d.Statement, st)
		}
		f.Policies[fmt.Sprintf("p%d", i)] = d
	}
	names := []string{AdministratorAccess, FullAccess, ReadOnlyAccess}
	for n := range f.Policies {
		names = append(names, n)
	}
	for k := range 3 { // k3 stays unnamed
		var att []string
		for range r.IntN(3) {
			att = append(att, names[r.IntN(len(names))])
		}
		f.Keys[fmt.Sprintf("k%d", k)] = att
	}
	return f
}

// modelMatch is the model of Match: the textbook dynamic program over
// (pattern prefix, string prefix), where * is any run of bytes.
// fold compares without regard to ASCII case.
func modelMatch(p, str string, fold bool) bool {
	if fold {
		p, str = strings.ToLower(p), strings.ToLower(str)
	}
	// m[i][j]: p[:i] matches str[:j].
	m := make([][]bool, len(p)+1)
	for i := range m {
		m[i] = make([]bool, len(str)+1)
	}
	m[0][0] = true
	for i := 1; i <= len(p); i++ {
		for j := 0; j <= len(str); j++ {
			if p[i-1] == '*' {
				m[i][j] = m[i-1][j] || (j > 0 && m[i][j-1])
			} else {
				m[i][j] = j > 0 && m[i-1][j-1] && p[i-1] == str[j-1]
			}
		}
	}
	return m[len(p)][len(str)]
}

// modelInCIDRs reads an acs:SourceIp condition with package net: whether
// src (an address; "" not known) is in one of the values.
func modelInCIDRs(vals []string, src string) bool {
	ip := net.ParseIP(src)
	if ip == nil {
		return false
	}
	for _, v := range vals {
		if !strings.Contains(v, "/") {
			if net.ParseIP(v).Equal(ip) {
				return true
			}
			continue
		}
		_, n, err := net.ParseCIDR(v)
		if err != nil {
			panic(err)
		}
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

func modelCheck(f *File, key, act, path string, secure bool, src string) bool {
	names, ok := f.Keys[key]
	if !ok {
		return false
	}
	allowed := false
	for _, n := range names {
		doc, ok := f.Policies[n]
		for _, b := range builtins() {
			if b.name == n {
				doc, ok = b.doc, true
			}
		}
		if !ok {
			panic("undefined policy " + n)
		}
		for _, st := range doc.Statement {
			if c, ok := st.Condition["Bool"]["acs:SecureTransport"]; ok && (c[0] == "true") != secure {
				continue
			}
			if c, ok := st.Condition["IpAddress"]["acs:SourceIp"]; ok && !modelInCIDRs(c, src) {
				continue
			}
			if c, ok := st.Condition["NotIpAddress"]["acs:SourceIp"]; ok && modelInCIDRs(c, src) {
				continue
			}
			actOK := false
			for _, a := range st.Action {
				if modelMatch(a, act, true) {
					actOK = true
				}
			}
			resOK := false
			for _, res := range st.Resource {
				p := res
				if res != "*" {
					p = strings.SplitN(res, ":", 5)[4]
				}
				if modelMatch(p, path, false) {
					resOK = true
				}
			}
			if !actOK || !resOK {
				continue
			}
			if st.Effect == "Deny" {
				return false
			}
			allowed = true
		}
	}
	return allowed
}

func TestSourceIPCondition(t *testing.T) {
	s := mustParse(t, `{"Policies": {
	  "office": {"Statement": [
	    {"Effect": "Allow", "Action": "mns:*", "Resource": "*", "Condition": {"IpAddress": {"acs:SourceIp": ["10.0.0.0/8", "192.168.1.7", "2001:db8::/32"]}}}]},
	  "not-lab": {"Statement": [
	    {"Effect": "Allow", "Action": "mns:*", "Resource": "*"},
	    {"Effect": "Deny", "Action": "mns:*", "Resource": "*", "Condition": {"NotIpAddress": {"acs:SourceIp": "10.0.0.0/8"}, "Bool": {"acs:SecureTransport": "false"}}}]}},
	 "Keys": {"o": ["office"], "n": ["not-lab"], "f": ["AliyunMNSFullAccess"]}}`)
	if !s.UsesSourceIP() || mustParse(t, `{"Keys": {"f": ["AliyunMNSFullAccess"]}}`).UsesSourceIP() {
		t.Fatal("UsesSourceIP")
	}
	a := action(t, "mns:SendMessage")
	for _, c := range []struct {
		key, src string
		secure   bool
		want     bool
	}{
		{"o", "10.9.8.7", false, true},
		{"o", "::ffff:10.9.8.7", false, true}, // an IPv4-mapped source is its IPv4 address
		{"o", "192.168.1.7", false, true},
		{"o", "192.168.1.8", false, false},
		{"o", "2001:db8::1", false, true},
		{"o", "2001:db9::1", false, false},
		{"o", "", false, false}, // not known: no IpAddress matches
		{"n", "10.0.0.1", false, true},
		{"n", "11.0.0.1", false, false}, // outside, over plain HTTP: denied
		{"n", "11.0.0.1", true, true},   // both conditions must hold for the Deny
		{"n", "", false, false},         // not known: every NotIpAddress matches
		{"f", "", false, true},
	} {
		var src netip.Addr
		if c.src != "" {
			src = netip.MustParseAddr(c.src)
		}
		if got := s.Check([]byte(c.key), a, []byte("/queues/q/messages"), Context{Secure: c.secure, SourceIP: src}); got != c.want {
			t.Errorf("key %s from %q (TLS %v): %v, want %v", c.key, c.src, c.secure, got, c.want)
		}
	}
}

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		p, s string
		want bool
	}{
		{"", "", true}, {"", "a", false}, {"*", "", true}, {"*", "/a/b", true},
		{"/queues/*", "/queues/", true}, {"/queues/*", "/queues", false},
		{"/queues/*/messages", "/queues/a/b/messages", true},
		{"/queues/*/messages", "/queues/a/messagesx", false},
		{"a*b*c", "aXbYbZc", true}, {"a*b*c", "acb", false}, {"**", "x", true},
		{"*a", "bbbbba", true}, {"*a", "bbbbab", false},
	} {
		if got := Match([]byte(c.p), []byte(c.s)); got != c.want {
			t.Errorf("Match(%q, %q) = %v", c.p, c.s, got)
		}
	}
}

func FuzzMatch(f *testing.F) {
	f.Add("/queues/*/messages", "/queues/a/messages")
	f.Add("a*b*c", "aXbYbZc")
	f.Add("*", "")
	f.Fuzz(func(t *testing.T, p, s string) {
		if len(p) > 64 || len(s) > 256 {
			return
		}
		if got, want := Match([]byte(p), []byte(s)), modelMatch(p, s, false); got != want {
			t.Fatalf("Match(%q, %q) = %v, model %v", p, s, got, want)
		}
	})
}

// FuzzParse: a policy file never panics the parser, and what it accepts
// never panics Check.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"Policies": {"p": {"Version": "1", "Statement": [{"Effect": "Deny", "Action": ["mns:*"], "Resource": "acs:mns:*:*:/queues/*", "Condition": {"Bool": {"acs:SecureTransport": "false"}}}]}}, "Keys": {"k": ["p", "AliyunMNSFullAccess"]}}`))
	f.Add([]byte(`{"Keys": {"k": ["AliyunMNSReadOnlyAccess"]}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data, testActions)
		if err != nil {
			return
		}
		for _, id := range s.Keys() {
			for a := range testActions {
				c := Context{Secure: a%2 == 0, SourceIP: netip.AddrFrom4([4]byte{10, 0, 0, byte(a)})}
				s.Check([]byte(id), a, []byte("/queues/q/messages"), c)
				s.Explain([]byte(id), a, []byte("/queues/q/messages"), c)
			}
		}
	})
}

func TestCheckAllocatesNothing(t *testing.T) {
	s := mustParse(t, `{"Policies": {"p": {"Statement": [{"Effect": "Allow", "Action": "mns:*", "Resource": ["acs:mns:*:*:/queues/a*", "acs:mns:*:*:/queues/orders-*/messages"]}]}}, "Keys": {"k": ["p"]}}`)
	id, path, a := []byte("k"), []byte("/queues/orders-9/messages"), action(t, "mns:SendMessage")
	if n := testing.AllocsPerRun(100, func() {
		if !s.Check(id, a, path, Context{SourceIP: netip.AddrFrom4([4]byte{10, 1, 2, 3})}) {
			t.Fatal("refused")
		}
	}); n != 0 {
		t.Fatalf("Check allocates %v times", n)
	}
}

func BenchmarkCheck(b *testing.B) {
	s := mustParse(b, `{"Policies": {"p": {"Statement": [
	  {"Effect": "Allow", "Action": "mns:*", "Resource": ["acs:mns:*:*:/queues/a*", "acs:mns:*:*:/queues/orders-*/messages"]},
	  {"Effect": "Deny", "Action": "mns:DeleteQueue", "Resource": "acs:mns:*:*:/queues/keep-*"}]}}, "Keys": {"k": ["p"]}}`)
	id, path, a := []byte("k"), []byte("/queues/orders-9/messages"), action(b, "mns:SendMessage")
	for b.Loop() {
		s.Check(id, a, path, Context{})
	}
}

func TestLimitsParse(t *testing.T) {
	for _, c := range []struct{ name, doc, want string }{
		{"key not under Keys", `{"Keys": {"a": ["AliyunMNSFullAccess"]}, "Limits": {"b": {"RequestsPerSecond": 1}}}`, "not under Keys"},
		{"zero rate", `{"Keys": {"a": ["AliyunMNSFullAccess"]}, "Limits": {"a": {"RequestsPerSecond": 0}}}`, "RequestsPerSecond"},
		{"negative burst", `{"Keys": {"a": ["AliyunMNSFullAccess"]}, "Limits": {"*": {"RequestsPerSecond": 5, "Burst": -1}}}`, "Burst"},
		{"unknown field", `{"Keys": {"a": ["AliyunMNSFullAccess"]}, "Limits": {"a": {"RequestsPerMinute": 5}}}`, "unknown field"},
	} {
		if _, err := Parse([]byte(c.doc), testActions); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
	s := mustParse(t, `{"Keys": {"a": ["AliyunMNSFullAccess"], "b": [], "c": ["AliyunMNSReadOnlyAccess"]},
	  "Limits": {"a": {"RequestsPerSecond": 0.5, "Burst": 3}, "*": {"RequestsPerSecond": 100}}}`)
	if l := s.Limiter([]byte("a")); l == nil || l.Limit() != (Limit{0.5, 3}) {
		t.Errorf("a's limit: %+v", l)
	}
	if l := s.Limiter([]byte("c")); l == nil || l.Limit() != (Limit{100, 100}) { // "*", a second's worth of burst
		t.Errorf("c's limit: %+v", l)
	}
	if s.Limiter([]byte("c")) == s.Limiter([]byte("b")) {
		t.Error("two keys share the default's limiter")
	}
	if s.Limiter([]byte("stranger")) != nil || mustParse(t, `{"Keys": {"a": []}}`).Limiter([]byte("a")) != nil {
		t.Error("a limiter where no limit applies")
	}
}

// The limiter: a burst at once, then one per interval; a refused request
// is not counted.
func TestLimiter(t *testing.T) {
	l := newLimiter(Limit{RequestsPerSecond: 2, Burst: 3}) // one every 500 ms
	now := int64(1_000_000_000_000)
	for i := range 3 {
		if !l.Allow(now) {
			t.Fatalf("request %d of the burst refused", i+1)
		}
	}
	for range 5 {
		if l.Allow(now) {
			t.Fatal("a fourth request at once allowed")
		}
	}
	if l.Allow(now + 499_000_000) {
		t.Fatal("allowed 499 ms later")
	}
	if !l.Allow(now + 500_000_000) {
		t.Fatal("refused 500 ms later")
	}
	if l.Allow(now + 500_000_000) {
		t.Fatal("two allowed 500 ms later")
	}
	// After a long pause the burst is back, not more.
	later := now + 3_600_000_000_000
	n := 0
	for l.Allow(later) {
		n++
	}
	if n != 3 {
		t.Fatalf("%d allowed after an hour, want the burst of 3", n)
	}
}

// Concurrent requests at one instant: exactly the burst is allowed.
func TestLimiterConcurrent(t *testing.T) {
	l := newLimiter(Limit{RequestsPerSecond: 1, Burst: 100})
	now := int64(5_000_000_000)
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				if l.Allow(now) {
					allowed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if n := allowed.Load(); n != 100 {
		t.Fatalf("%d of 1600 allowed at one instant, want the burst of 100", n)
	}
}

// A reload keeps the limiter of a key whose limit did not change.
func TestLimiterInheriting(t *testing.T) {
	doc := func(rate string) *Set {
		return mustParse(t, `{"Keys": {"a": ["AliyunMNSFullAccess"], "b": ["AliyunMNSFullAccess"]},
		  "Limits": {"a": {"RequestsPerSecond": 1, "Burst": 1}, "b": {"RequestsPerSecond": `+rate+`, "Burst": 1}}}`)
	}
	old := doc("1")
	now := int64(7_000_000_000)
	old.Limiter([]byte("a")).Allow(now)
	old.Limiter([]byte("b")).Allow(now)
	fresh := doc("2")
	s := fresh.Inheriting(old)
	if s.Limiter([]byte("a")).Allow(now) {
		t.Error("a's burst was spent before the reload, and its limit is the same: refused")
	}
	if !s.Limiter([]byte("b")).Allow(now) {
		t.Error("b's limit changed: a fresh limiter")
	}
	if fresh.Limiter([]byte("a")) == old.Limiter([]byte("a")) {
		t.Error("Inheriting changed the set it was called on")
	}
	if !s.Check([]byte("a"), action(t, "mns:SendMessage"), []byte("/queues/q/messages"), Context{}) {
		t.Error("the inheriting set lost its grants")
	}
}

func BenchmarkLimiterAllow(b *testing.B) {
	l := newLimiter(Limit{RequestsPerSecond: 1e9, Burst: 1 << 30})
	var now int64
	for b.Loop() {
		now++
		l.Allow(now)
	}
}
