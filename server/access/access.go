// Package access decides which access key may do which operation on which
// resource: smqd's version of the RAM policies that Alibaba Cloud attaches
// to the MNS service's users.
//
// A policy file names policies and attaches them to access key ids:
//
//	{
//	  "Policies": {
//	    "orders-worker": {
//	      "Version": "1",
//	      "Statement": [
//	        {"Effect": "Allow",
//	         "Action": ["mns:ReceiveMessage", "mns:BatchReceiveMessage", "mns:DeleteMessage", "mns:BatchDeleteMessage"],
//	         "Resource": "acs:mns:*:*:/queues/orders-*/messages"}
//	      ]
//	    }
//	  },
//	  "Keys": {
//	    "SMQDOlbqIu7wVnp3otJX": ["SmqdAdministratorAccess"],
//	    "worker-1": ["orders-worker"]
//	  },
//	  "Limits": {"worker-1": {"RequestsPerSecond": 500, "Burst": 1000}}
//	}
//
// Invariants:
//   - Implicit deny: a key with no attached policy, or no statement that
//     allows the action on the resource, is refused. An explicit Deny wins
//     over every Allow.
//   - Nothing is ignored: an unknown field, effect, action, condition or
//     resource form is an error when the file is parsed, never a statement
//     that silently matches more, or less, than it says. An action pattern
//     must match at least one known action (a typo is an error).
//   - A decision reads only immutable data: a Set's rules never change
//     once built, and a reload builds a new one. What moves is a key's
//     Limiter (its request rate, the file's "Limits"), which a reload
//     hands on to the new Set while the key's limit stays the same.
//   - Check allocates nothing, and neither does a Limiter's Allow (one
//     compare-and-swap).
//
// Conditions: Bool on acs:SecureTransport, and IpAddress and NotIpAddress
// on acs:SourceIp (addresses and CIDR prefixes). Several operators in a
// statement must all hold; several values of one, any. A request whose
// source address is not known matches no IpAddress and every
// NotIpAddress condition.
//
// Resources are the MNS ARNs, acs:mns:REGION:ACCOUNT:/PATH. smqd has no
// regions or accounts, so a pattern's REGION and ACCOUNT fields are not
// compared; PATH is matched with * standing for any run of characters,
// '/' included. Action names are compared without regard to case, PATHs
// with it.
package access

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Built-in policies, attachable without defining them (the first two
// are the service's system policies).
const (
	// FullAccess allows every mns: action on every resource: all of the
	// MNS API, as the service's policy of that name does, and none of
	// smqd's own operations (a backup holds every key's secret).
	FullAccess = "AliyunMNSFullAccess"
	// ReadOnlyAccess allows the mns:Get* and mns:List* actions: attributes
	// and listings, never a message.
	ReadOnlyAccess = "AliyunMNSReadOnlyAccess"
	// AdministratorAccess allows every action, smqd's own included
	// (smqd:Backup, smqd:CancelBackup, smqd:PurgeQueue, smqd:ClusterAddNode,
	// smqd:ClusterRemoveNode).
	AdministratorAccess = "SmqdAdministratorAccess"
)

// File is a policy file as written.
type File struct {
	Policies map[string]Document `json:"Policies"`
	Keys     map[string][]string `json:"Keys"`
	// Limits caps each key's request rate; the key "*" gives the limit of
	// every key of Keys without its own.
	Limits map[string]Limit `json:"Limits,omitempty"`
}

// Limit is a key's request rate: RequestsPerSecond on average, with
// bursts of up to Burst requests (default: one second's worth, at least
// 1). A batch is one request.
type Limit struct {
	RequestsPerSecond float64 `json:"RequestsPerSecond"`
	Burst             int     `json:"Burst,omitempty"`
}

// Document is one policy.
type Document struct {
	Version   string      `json:"Version"`
	Statement []Statement `json:"Statement"`
}

// Statement is one rule of a policy. Action and Resource are a string or
// a list of strings in the file.
type Statement struct {
	Effect    string                         `json:"Effect"`
	Action    strings1                       `json:"Action"`
	Resource  strings1                       `json:"Resource"`
	Condition map[string]map[string]strings1 `json:"Condition,omitempty"`
}

// strings1 is a JSON string or array of strings.
type strings1 []string

func (s *strings1) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = strings1{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("want a string or a list of strings")
	}
	*s = many
	return nil
}

// Set is a parsed, checked policy file, ready for Check. It is immutable.
type Set struct {
	actions  []string // the known actions, by index
	keys     map[string]*grants
	sourceIP bool // a statement has an acs:SourceIp condition
}

// grants is what one key may do: per action index, the statements that
// name the action; and how often (nil: no limit).
type grants struct {
	byAction [][]*rule
	limiter  *Limiter
	policies int // policies attached to the key
}

// rule is a compiled statement.
type rule struct {
	deny      bool
	any       bool           // Resource "*" (or a pattern whose path is "*")
	paths     [][]byte       // path patterns
	secure    int8           // acs:SecureTransport: -1 either, 0 false, 1 true
	ipIn      []netip.Prefix // IpAddress acs:SourceIp: the source must be in one (nil: no such condition)
	ipNotIn   []netip.Prefix // NotIpAddress acs:SourceIp: the source must be in none
	policy    string         // for Explain
	statement int
}

// Parse reads a policy file. actions lists every action the caller will
// ask about, as "service:Name" (for example "mns:SendMessage"); an action
// pattern in the file that matches none of them is an error.
func Parse(data []byte, actions []string) (*Set, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("policy file: %w", err)
	}
	if dec.More() {
		return nil, errors.New("policy file: more than one JSON value")
	}
	if err := checkKeys(data); err != nil {
		return nil, fmt.Errorf("policy file: %w", err)
	}
	return Build(&f, actions)
}

// fieldNames are the file's field names in lower case: encoding/json
// matches them without case, so "Effect" and "effect" are one field.
var fieldNames = map[string]bool{"policies": true, "keys": true, "limits": true, "version": true, "statement": true,
	"effect": true, "action": true, "resource": true, "condition": true, "requestspersecond": true, "burst": true}

// fieldName returns the field name that encoding/json takes key for (in
// lower case), or key itself if it names none. JSON matches names as
// bytes.EqualFold does, Unicode folding included ("Reſource" is
// Resource), which strings.ToLower does not follow (authaudit,
// 2026-12-07).
func fieldName(key string) string {
	for f := range fieldNames {
		if strings.EqualFold(key, f) {
			return f
		}
	}
	return key
}

// checkKeys refuses an object that gives a key twice, exactly or (a field
// name) in another case: JSON decoding keeps the last one and drops the
// other without a word, which would make a statement match more, or less,
// than the file says.
func checkKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	var walk func() error
	walk = func() error {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		switch t {
		case json.Delim('['):
			for dec.More() {
				if err := walk(); err != nil {
					return err
				}
			}
		case json.Delim('{'):
			seen := map[string]string{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return err
				}
				k, _ := kt.(string)
				id := fieldName(k)
				if prev, ok := seen[id]; ok {
					return fmt.Errorf("the key %q is given twice in one object (%q and %q): only one would count", k, prev, k)
				}
				seen[id] = k
				if err := walk(); err != nil {
					return err
				}
			}
		default:
			return nil
		}
		_, err = dec.Token() // the closing ] or }
		return err
	}
	return walk()
}

// Build checks f and compiles it.
func Build(f *File, actions []string) (*Set, error) {
	s := &Set{actions: slices.Clone(actions), keys: make(map[string]*grants, len(f.Keys))}
	compiled := make(map[string][]*compiledStatement, len(f.Policies)+2)
	for name, doc := range f.Policies {
		if slices.ContainsFunc(builtins(), func(b builtin) bool { return b.name == name }) {
			return nil, fmt.Errorf("policy %q: the name of a built-in policy", name)
		}
		cs, err := compileDocument(name, &doc, actions)
		if err != nil {
			return nil, err
		}
		compiled[name] = cs
	}
	for _, b := range builtins() {
		cs, err := compileDocument(b.name, &b.doc, actions)
		if err != nil {
			return nil, err
		}
		compiled[b.name] = cs
	}
	for id, names := range f.Keys {
		if id == "" {
			return nil, errors.New("an empty access key id under Keys")
		}
		g := &grants{byAction: make([][]*rule, len(actions)), policies: len(names)}
		for _, name := range names {
			cs, ok := compiled[name]
			if !ok {
				return nil, fmt.Errorf("key %q: no policy named %q (define it under Policies, or use %s, %s or %s)", id, name, AdministratorAccess, FullAccess, ReadOnlyAccess)
			}
			for _, c := range cs {
				for _, a := range c.actions {
					g.byAction[a] = append(g.byAction[a], c.rule)
				}
				s.sourceIP = s.sourceIP || c.rule.ipIn != nil || c.rule.ipNotIn != nil
			}
		}
		s.keys[id] = g
	}
	for id, l := range f.Limits {
		if _, named := f.Keys[id]; id != "*" && !named {
			return nil, fmt.Errorf("the limit of key %q: the key is not under Keys", id)
		}
		if !(l.RequestsPerSecond > 0 && l.RequestsPerSecond <= 1e9) || l.Burst < 0 || l.Burst > 1e9 {
			return nil, fmt.Errorf("the limit of key %q: RequestsPerSecond must be above 0 (at most 1e9), and Burst 0 (one second's worth) or more", id)
		}
	}
	for id, g := range s.keys {
		l, ok := f.Limits[id]
		if !ok {
			l, ok = f.Limits["*"]
		}
		if ok {
			g.limiter = newLimiter(l)
		}
	}
	return s, nil
}

type compiledStatement struct {
	actions []int
	rule    *rule
}

func compileDocument(name string, doc *Document, actions []string) ([]*compiledStatement, error) {
	if name == "" {
		return nil, errors.New("an empty policy name under Policies")
	}
	if doc.Version != "" && doc.Version != "1" {
		return nil, fmt.Errorf("policy %q: Version %q (only \"1\")", name, doc.Version)
	}
	if len(doc.Statement) == 0 {
		return nil, fmt.Errorf("policy %q: no Statement", name)
	}
	out := make([]*compiledStatement, 0, len(doc.Statement))
	for i := range doc.Statement {
		c, err := compileStatement(&doc.Statement[i], actions)
		if err != nil {
			return nil, fmt.Errorf("policy %q, statement %d: %w", name, i+1, err)
		}
		c.rule.policy, c.rule.statement = name, i+1
		out = append(out, c)
	}
	return out, nil
}

func compileStatement(st *Statement, actions []string) (*compiledStatement, error) {
	r := &rule{secure: -1}
	switch st.Effect {
	case "Allow":
	case "Deny":
		r.deny = true
	default:
		return nil, fmt.Errorf("the Effect %q is neither Allow nor Deny", st.Effect)
	}
	if len(st.Action) == 0 {
		return nil, errors.New("no Action")
	}
	seen := make([]bool, len(actions))
	var idx []int
	for _, p := range st.Action {
		n := 0
		lp := strings.ToLower(p)
		for i, a := range actions {
			if Match([]byte(lp), []byte(strings.ToLower(a))) {
				n++
				if !seen[i] {
					seen[i] = true
					idx = append(idx, i)
				}
			}
		}
		if n == 0 {
			return nil, fmt.Errorf("the Action %q matches no action smqd knows (%s)", p, knownActions(actions))
		}
	}
	sort.Ints(idx)
	if len(st.Resource) == 0 {
		return nil, errors.New("no Resource")
	}
	for _, res := range st.Resource {
		p, err := resourcePath(res)
		if err != nil {
			return nil, err
		}
		if p == "*" {
			r.any = true
			continue
		}
		r.paths = append(r.paths, []byte(p))
	}
	if r.any {
		r.paths = nil
	}
	for op, keys := range st.Condition {
		// One key per operator: each supports one (compared without
		// case), so a second is the same key again, and Go's map order
		// would pick which one counts; none would be no condition at all.
		if len(keys) == 0 {
			return nil, fmt.Errorf("the Condition %s has no key (an empty condition would allow, or deny, everything its statement names)", op)
		}
		if len(keys) > 1 {
			var names []string
			for k := range keys {
				names = append(names, strconv.Quote(k))
			}
			slices.Sort(names)
			return nil, fmt.Errorf("the Condition %s has the key given twice (keys are compared without case): %s", op, strings.Join(names, ", "))
		}
		switch op {
		case "Bool":
		case "IpAddress", "NotIpAddress":
			if err := r.compileSourceIP(op, keys); err != nil {
				return nil, err
			}
			continue
		default:
			return nil, fmt.Errorf("the Condition operator %q is not supported (only Bool with acs:SecureTransport, IpAddress and NotIpAddress with acs:SourceIp)", op)
		}
		for k, vals := range keys {
			if !strings.EqualFold(k, "acs:SecureTransport") {
				return nil, fmt.Errorf("the Condition key %q is not supported (only acs:SecureTransport)", k)
			}
			if len(vals) != 1 {
				return nil, errors.New("the Condition acs:SecureTransport takes one value, \"true\" or \"false\"")
			}
			switch strings.ToLower(vals[0]) {
			case "true":
				r.secure = 1
			case "false":
				r.secure = 0
			default:
				return nil, fmt.Errorf("the Condition acs:SecureTransport %q is neither of (\"true\" or \"false\")", vals[0])
			}
		}
	}
	return &compiledStatement{actions: idx, rule: r}, nil
}

// compileSourceIP reads an IpAddress or NotIpAddress condition on
// acs:SourceIp: addresses and CIDR prefixes.
func (r *rule) compileSourceIP(op string, keys map[string]strings1) error {
	for k, vals := range keys {
		if !strings.EqualFold(k, "acs:SourceIp") {
			return fmt.Errorf("the Condition key %q of %s is not supported (only acs:SourceIp)", k, op)
		}
		if len(vals) == 0 {
			return fmt.Errorf("the Condition %s acs:SourceIp has no address", op)
		}
		ps := make([]netip.Prefix, 0, len(vals))
		for _, v := range vals {
			p, err := netip.ParsePrefix(v)
			if err != nil {
				a, aerr := netip.ParseAddr(v)
				if aerr != nil || a.Zone() != "" {
					return fmt.Errorf("the Condition %s acs:SourceIp %q is neither an address nor a CIDR prefix", op, v)
				}
				p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
			}
			if p.Addr().Is4In6() {
				if p.Bits() < 96 {
					return fmt.Errorf("the Condition %s acs:SourceIp %q spans IPv4-mapped and other IPv6 addresses", op, v)
				}
				p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
			}
			ps = append(ps, p.Masked())
		}
		if op == "IpAddress" {
			r.ipIn = append(r.ipIn, ps...)
		} else {
			r.ipNotIn = append(r.ipNotIn, ps...)
		}
	}
	return nil
}

// resourcePath returns the path pattern of a Resource: "*", or the part
// after the fourth colon of acs:mns:REGION:ACCOUNT:/PATH.
func resourcePath(res string) (string, error) {
	if res == "*" {
		return "*", nil
	}
	parts := strings.SplitN(res, ":", 5)
	if len(parts) != 5 || parts[0] != "acs" || parts[1] != "mns" {
		return "", fmt.Errorf("the Resource %q: want \"*\" or acs:mns:REGION:ACCOUNT:/PATH", res)
	}
	p := parts[4]
	if p == "*" {
		return "*", nil
	}
	if !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("the Resource %q: the path must start with / (for example acs:mns:*:*:/queues/orders)", res)
	}
	return p, nil
}

func knownActions(actions []string) string {
	if len(actions) <= 6 {
		return strings.Join(actions, ", ")
	}
	return strings.Join(actions[:6], ", ") + ", ..."
}

// Keys returns the access key ids the set names, sorted.
func (s *Set) Keys() []string {
	ids := make([]string, 0, len(s.keys))
	for id := range s.keys {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Has reports whether the set names key id (a key it does not name is
// refused everything).
func (s *Set) Has(id string) bool { _, ok := s.keys[id]; return ok }

// Attached reports whether the set attaches at least one policy to key
// id: a key it does not name, or names with no policy, is refused
// everything.
func (s *Set) Attached(id string) bool { g := s.keys[id]; return g != nil && g.policies > 0 }

// Context is what a request's conditions are checked against.
type Context struct {
	// Secure: the client's connection is TLS (acs:SecureTransport).
	Secure bool
	// SourceIP is the client's address (acs:SourceIp); the zero Addr when
	// it is not known, which no IpAddress condition matches and every
	// NotIpAddress condition does.
	SourceIP netip.Addr
}

// UsesSourceIP reports whether a statement of the set has an
// acs:SourceIp condition (a caller need not find the address otherwise).
func (s *Set) UsesSourceIP() bool { return s.sourceIP }

// Check reports whether key id may do actions[action] on the resource
// whose path is path (for example /queues/orders/messages), in context c.
func (s *Set) Check(id []byte, action int, path []byte, c Context) bool {
	g := s.keys[string(id)]
	if g == nil || action < 0 || action >= len(g.byAction) {
		return false
	}
	allowed := false
	for _, r := range g.byAction[action] {
		if !r.applies(path, c) {
			continue
		}
		if r.deny {
			return false
		}
		allowed = true
	}
	return allowed
}

// Explain says which statement decided Check's answer, for a log line.
func (s *Set) Explain(id []byte, action int, path []byte, c Context) string {
	g := s.keys[string(id)]
	if g == nil {
		return "no policy is attached to the key"
	}
	if action < 0 || action >= len(g.byAction) {
		return "unknown action"
	}
	var allow *rule
	for _, r := range g.byAction[action] {
		if !r.applies(path, c) {
			continue
		}
		if r.deny {
			return fmt.Sprintf("denied by policy %q, statement %d", r.policy, r.statement)
		}
		if allow == nil {
			allow = r
		}
	}
	if allow != nil {
		return fmt.Sprintf("allowed by policy %q, statement %d", allow.policy, allow.statement)
	}
	return "no statement allows it"
}

func (r *rule) applies(path []byte, c Context) bool {
	if r.secure >= 0 && (r.secure == 1) != c.Secure {
		return false
	}
	if r.ipIn != nil && !inAny(r.ipIn, c.SourceIP) {
		return false
	}
	if r.ipNotIn != nil && inAny(r.ipNotIn, c.SourceIP) {
		return false
	}
	if r.any {
		return true
	}
	for _, p := range r.paths {
		if Match(p, path) {
			return true
		}
	}
	return false
}

// inAny reports whether a is in one of ps; an invalid (unknown) a is in
// none.
func inAny(ps []netip.Prefix, a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	a = a.Unmap()
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Match reports whether s matches pattern, where * in the pattern stands
// for any run of bytes (empty included) and every other byte for itself.
// It runs in O(len(pattern) × len(s)) at worst and allocates nothing.
func Match(pattern, s []byte) bool {
	// The classic greedy matcher: on a mismatch, go back to the last *
	// and let it take one more byte.
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case p < len(pattern) && pattern[p] == s[i]:
			p++
			i++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

type builtin struct {
	name string
	doc  Document
}

func builtins() []builtin {
	return []builtin{
		{AdministratorAccess, Document{Version: "1", Statement: []Statement{
			{Effect: "Allow", Action: strings1{"*"}, Resource: strings1{"*"}},
		}}},
		{FullAccess, Document{Version: "1", Statement: []Statement{
			{Effect: "Allow", Action: strings1{"mns:*"}, Resource: strings1{"*"}},
		}}},
		{ReadOnlyAccess, Document{Version: "1", Statement: []Statement{
			{Effect: "Allow", Action: strings1{"mns:Get*", "mns:List*"}, Resource: strings1{"*"}},
		}}},
	}
}

// Limiter holds a key to its Limit: the generic cell rate algorithm, one
// compare-and-swap per request. Safe for concurrent use.
type Limiter struct {
	limit     Limit
	interval  int64 // nanoseconds between requests at the rate
	tolerance int64 // how far ahead of now the schedule may run: the burst
	tat       atomic.Int64
}

func newLimiter(l Limit) *Limiter {
	if l.Burst == 0 {
		l.Burst = max(1, int(math.Ceil(l.RequestsPerSecond)))
	}
	// In float64 and capped: a rate of 1e-10 made the interval overflow
	// int64 (and max(1, MinInt64) allowed a request every nanosecond),
	// and a large burst of a small rate made the tolerance overflow (and
	// refused every request). The cap, 73 years, keeps tat + interval
	// within int64 too.
	const most = float64(1 << 61)
	iv := min(max(1, float64(time.Second)/l.RequestsPerSecond), most)
	return &Limiter{limit: l, interval: int64(iv), tolerance: int64(min(float64(l.Burst-1)*iv, most))}
}

// Allow reports whether a request at now (Unix nanoseconds) is within the
// limit, and counts it if it is.
func (l *Limiter) Allow(now int64) bool {
	for {
		tat := l.tat.Load()
		t := max(tat, now)
		if t-now > l.tolerance {
			return false
		}
		if l.tat.CompareAndSwap(tat, t+l.interval) {
			return true
		}
	}
}

// Limit returns the limit l enforces (Burst filled in).
func (l *Limiter) Limit() Limit { return l.limit }

// Limiter returns key id's limiter; nil if its requests are not limited.
func (s *Set) Limiter(id []byte) *Limiter {
	if g := s.keys[string(id)]; g != nil {
		return g.limiter
	}
	return nil
}

// Inheriting returns s with the limiters of old for the keys whose limit
// did not change, so that a reload does not hand every key a fresh burst.
// s is not changed (it may be in use).
func (s *Set) Inheriting(old *Set) *Set {
	if old == nil {
		return s
	}
	out := &Set{actions: s.actions, keys: make(map[string]*grants, len(s.keys)), sourceIP: s.sourceIP}
	for id, g := range s.keys {
		if o := old.keys[id]; o != nil && o.limiter != nil && g.limiter != nil && o.limiter.limit == g.limiter.limit {
			g2 := *g
			g2.limiter = o.limiter
			g = &g2
		}
		out.keys[id] = g
	}
	return out
}
