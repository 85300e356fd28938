package server

// Authorization: what an authenticated access key may do (package access
// holds the policies and the matching; this file maps requests to
// actions and resources).
//
// Invariants:
//   - A request is authorized after its signature is verified and before
//     it changes anything: a refused request is answered 403 AccessDenied
//     and has no effect.
//   - The action is the operation as the service names it in RAM
//     (mns:BatchReceiveMessage, not mns:ReceiveMessage, for a batch), so a
//     policy written for the service means the same here. Every operation
//     is checked in serve, before it is routed to a shard's leader, except
//     the one whose name only its body tells: a send is refused there only
//     if its key may do neither form, and its form is checked in send,
//     once the body is parsed.
//   - The resource is the request's path with its names percent-decoded,
//     so that an escape cannot slip past a Deny written for the plain
//     name.
//   - A request that makes smqd write to a queue the request does not name
//     (a subscription whose endpoint is a queue, a dead-letter queue) also
//     needs mns:SendMessage on that queue: a key cannot use a topic or a
//     dead-letter policy to send where it may not.
//   - In a cluster, the node a request reaches and the shard's leader
//     each authorize it with their own policies (a forwarded request runs
//     serve again on the leader), so both must allow it; except that the
//     checks made where the operation runs (a send's form, the queue
//     endpoint and dead-letter queue) are the leader's alone. Give every
//     node the same file.

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/server/access"
	"github.com/valyala/fasthttp"
)

// actionOf maps an operation to its index in policyActions; -1 for the
// unsigned ones (health, metrics, console, status, push certificate),
// which no policy governs.
var actionOf [numOps]int

// policyActions names every action a policy may grant: "mns:" and the
// service's operation name, and "smqd:" for smqd's own signed operations.
var policyActions []string

func init() {
	for o := range numOps {
		actionOf[o] = -1
		var service string
		switch {
		case o >= opCreateQueue && o <= opChangeMessageVisibility, o.isTopic():
			service = "mns:"
		case o == opBackup, o == opCancelBackup, o == opClusterAddNode, o == opClusterRemoveNode, o == opPurgeQueue:
			service = "smqd:"
		default:
			continue
		}
		actionOf[o] = len(policyActions)
		policyActions = append(policyActions, service+o.String())
	}
}

// PolicyActions returns the actions a policy file may name, in a fixed
// order.
func PolicyActions() []string { return append([]string(nil), policyActions...) }

// ParsePolicies parses a policy file (package access) against the
// actions and the resources of this server: as an action pattern that
// matches no action, a Resource that matches no resource path
// (resourceForms) is an error, so that a typo ("/queues/secret/",
// "/queue/secret") cannot make a Deny silently match nothing.
func ParsePolicies(data []byte) (*access.Set, error) {
	p, err := access.Parse(data, policyActions)
	if err != nil {
		return nil, err
	}
	var f access.File
	if err := json.Unmarshal(data, &f); err != nil { // parsed above: no error
		return nil, fmt.Errorf("policy file: %w", err)
	}
	for _, name := range slices.Sorted(maps.Keys(f.Policies)) {
		for i, st := range f.Policies[name].Statement {
			for _, res := range st.Resource {
				// Parse checked the form: "*" or acs:mns:REGION:ACCOUNT:PATH.
				if parts := strings.SplitN(res, ":", 5); len(parts) == 5 && parts[4] != "*" && !matchesSomeResource(parts[4]) {
					return nil, fmt.Errorf("policy %q, statement %d: the Resource %q matches no resource smqd has (%s)", name, i+1, res, strings.Join(resourceForms, ", "))
				}
			}
		}
	}
	return p, nil
}

// resourceForms are the resource paths of appendResource: NAME stands for
// a name (one or more bytes, none of them '/'), ID for a node id (one or
// more digits).
var resourceForms = []string{"/queues", "/queues/NAME", "/queues/NAME/messages",
	"/topics", "/topics/NAME", "/topics/NAME/messages", "/topics/NAME/subscriptions", "/topics/NAME/subscriptions/NAME",
	"/backup", "/cluster/nodes/ID"}

// matchesSomeResource reports whether a Resource path pattern ('*': any
// run of bytes) matches at least one path of resourceForms.
func matchesSomeResource(pattern string) bool {
	for _, f := range resourceForms {
		if patternMeetsForm(pattern, strings.NewReplacer("NAME", "%", "ID", "#").Replace(f)) {
			return true
		}
	}
	return false
}

// patternMeetsForm reports whether some path matches both pattern ('*':
// any run of bytes) and form ('%': one or more bytes other than '/'; '#':
// one or more digits): a search over the pairs of positions in both,
// where in says that the form's class at j has taken a byte already.
func patternMeetsForm(pattern, form string) bool {
	type state struct {
		i, j int
		in   bool
	}
	class := func(c byte) bool { return c == '%' || c == '#' }
	member := func(k, c byte) bool { return c != '/' && (k == '%' || c >= '0' && c <= '9') }
	seen := map[state]bool{}
	todo := []state{{}}
	for len(todo) > 0 {
		s := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if seen[s] {
			continue
		}
		seen[s] = true
		i, j := s.i, s.j
		if i == len(pattern) && j == len(form) {
			return true
		}
		if i < len(pattern) && pattern[i] == '*' {
			todo = append(todo, state{i + 1, j, s.in}) // the * takes nothing more
		}
		if j < len(form) && class(form[j]) && s.in {
			todo = append(todo, state{i, j + 1, false}) // the class ends
		}
		if i == len(pattern) || j == len(form) {
			continue
		}
		// One byte, taken by both.
		switch {
		case !class(form[j]) && pattern[i] == '*':
			todo = append(todo, state{i, j + 1, false})
		case !class(form[j]) && pattern[i] == form[j]:
			todo = append(todo, state{i + 1, j + 1, false})
		case class(form[j]) && pattern[i] == '*':
			todo = append(todo, state{i, j, true})
		case class(form[j]) && member(form[j], pattern[i]):
			todo = append(todo, state{i + 1, j, true})
		}
	}
	return false
}

// LoadPolicies reads and parses the policy file at path.
func LoadPolicies(path string) (*access.Set, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParsePolicies(data)
}

// SetPolicies replaces the policies of a running server (a reload): the
// requests authorized after it returns use p. Nil allows every key
// everything. It fails on a server without authentication.
func (s *Server) SetPolicies(p *access.Set) error {
	if p != nil && s.opts.NoAuth {
		return errors.New("server: policies need authentication")
	}
	if p != nil {
		p = p.Inheriting(s.pol.Load()) // a key's limiter outlives a reload that keeps its limit
	}
	s.pol.Store(p)
	return nil
}

// refinedOp is the operation a request routed as o performs, where its
// query tells (the body decides only a single or batch send). The
// handlers reach the same answers from the same parameters.
func refinedOp(o op, qp *queryParams) op {
	set := qp.metaOverride.present && isTrue(qp.metaOverride.val)
	switch o {
	case opCreateQueue:
		if set {
			return opSetQueueAttributes
		}
	case opCreateTopic:
		if set {
			return opSetTopicAttributes
		}
	case opSubscribe:
		if set {
			return opSetSubscriptionAttributes
		}
	case opReceiveMessage:
		return receiveKind(qp)
	case opDeleteMessage:
		if isPurge(qp) {
			return opPurgeQueue
		}
		if !qp.receiptHandle.present {
			return opBatchDeleteMessage
		}
	}
	return o
}

// receiveKind tells the four GET .../messages operations apart.
func receiveKind(qp *queryParams) op {
	peek := qp.peekOnly.present && isTrue(qp.peekOnly.val)
	batch := qp.numOfMessages.present
	switch {
	case peek && batch:
		return opBatchPeekMessage
	case peek:
		return opPeekMessage
	case batch:
		return opBatchReceiveMessage
	}
	return opReceiveMessage
}

func policyContext(st *reqState) access.Context {
	return access.Context{Secure: st.tls, SourceIP: st.src}
}

// hdrClientIP carries the client's address on a forwarded request, for
// the leader's acs:SourceIp conditions. Only forwarded requests are read
// for it (a client's own is replaced when forwarded, and ignored when
// sent directly).
const hdrClientIP = "X-Smqd-Client-Ip"

// noteSource finds the client's address when the policies have an
// acs:SourceIp condition: the connection's peer (or the client a trusted
// proxy names: clientaddr.go), or for a forwarded request what the first
// node saw (not known if it did not say: an older node).
func (s *Server) noteSource(ctx *fasthttp.RequestCtx, st *reqState) {
	st.src = netip.Addr{}
	if p := s.pol.Load(); p == nil || !p.UsesSourceIP() {
		return
	}
	if st.fw != nil {
		if v := ctx.Request.Header.Peek(hdrClientIP); len(v) > 0 {
			if a, err := netip.ParseAddr(string(v)); err == nil {
				st.src = a.Unmap()
			}
		}
		return
	}
	st.src = s.clientAddr(ctx) // clientaddr.go
}

// appendClientIP appends the address of the client of a request this
// node received itself (for hdrClientIP).
func (s *Server) appendClientIP(b []byte, ctx *fasthttp.RequestCtx) []byte {
	if a := s.clientAddr(ctx); a.IsValid() {
		return a.AppendTo(b)
	}
	return b
}

// authorize checks st.op on the request's resource against the
// policies. A send's form (single or batch) is known only once its body
// is parsed, where the send runs (authorizeSend); here a key that may do
// neither is refused, before its body is parsed or forwarded.
func (s *Server) authorize(st *reqState, r *routed) error {
	p := s.pol.Load()
	if p == nil {
		return nil
	}
	st.res = appendResource(st.res[:0], st.op, r.queue, r.sub)
	if st.op == opSendMessage && p.Check(st.auth.id, actionOf[opBatchSendMessage], st.res, policyContext(st)) {
		return nil // and mns:SendMessage is checked if it is a single send
	}
	return s.check(p, st, st.op, st.res)
}

// rateLimit answers QpsLimitExceeded if the request's key is over its rate
// (the policy file's Limits). A forwarded request was counted by the node
// that forwarded it; limits are per node.
func (s *Server) rateLimit(st *reqState) error {
	p := s.pol.Load()
	if p == nil || st.fw != nil {
		return nil
	}
	l := p.Limiter(st.auth.id)
	if l == nil || l.Allow(s.opts.Now().UnixNano()) {
		return nil
	}
	lim := l.Limit()
	if s.overRate.due() {
		s.log.Warn("request over its key's rate", "access_key_id", string(st.auth.id), "op", st.op.String(),
			"requests_per_second", lim.RequestsPerSecond, "burst", lim.Burst, "request_id", string(st.reqID),
			"suppressed_since_last", s.overRate.suppressed.Swap(0))
	}
	return newAPIError(codeQpsLimitExceeded, fmt.Sprintf("the access key %s is over its request rate (%g a second, bursts of %d); retry later", st.auth.id, lim.RequestsPerSecond, lim.Burst))
}

// authorizeSend checks a send once its body has told single from batch.
func (s *Server) authorizeSend(st *reqState) error {
	p := s.pol.Load()
	if p == nil {
		return nil
	}
	st.res = append(append(append(st.res[:0], "/queues/"...), st.name...), "/messages"...) // st.name is decoded
	return s.check(p, st, st.op, st.res)
}

// authorizeSendTo checks that the request's key may send to queue, which
// the request makes smqd write to on its behalf (a queue endpoint, a
// dead-letter queue).
func (s *Server) authorizeSendTo(st *reqState, queue string, why string) error {
	p := s.pol.Load()
	if p == nil || queue == "" {
		return nil
	}
	st.res = append(append(append(st.res[:0], "/queues/"...), queue...), "/messages"...)
	if err := s.check(p, st, opSendMessage, st.res); err != nil {
		return newAPIError(codeAccessDenied, fmt.Sprintf("%s: the access key may not send to queue %q (mns:SendMessage on acs:mns:*:*:%s)", why, queue, st.res))
	}
	return nil
}

// authorizeDeadLetter checks a queue's new dead-letter queue, if the
// request sets one.
func (s *Server) authorizeDeadLetter(st *reqState, p *engine.ConfigPatch) error {
	if p.DeadLetterQueue == nil {
		return nil
	}
	return s.authorizeSendTo(st, *p.DeadLetterQueue, "the queue's dead-letter queue")
}

// check answers AccessDenied unless the key may do o on the resource.
func (s *Server) check(p *access.Set, st *reqState, o op, res []byte) error {
	a := actionOf[o]
	if a < 0 || p.Check(st.auth.id, a, res, policyContext(st)) {
		return nil
	}
	s.denied.log(s, p, st, a, res)
	return newAPIError(codeAccessDenied, fmt.Sprintf("the access key %s is not allowed %s on acs:mns:*:*:%s", st.auth.id, policyActions[a], res))
}

// appendResource appends the path a policy names the resource of o by:
// /queues, /queues/{q}, /queues/{q}/messages, /topics, /topics/{t},
// /topics/{t}/messages, /topics/{t}/subscriptions,
// /topics/{t}/subscriptions/{s}, /backup, /cluster/nodes/{id}.
func appendResource(b []byte, o op, name, sub []byte) []byte {
	switch o {
	case opListQueue:
		return append(b, "/queues"...)
	case opListTopic:
		return append(b, "/topics"...)
	case opBackup, opCancelBackup:
		return append(b, "/backup"...)
	case opClusterAddNode, opClusterRemoveNode:
		return append(append(b, "/cluster/nodes/"...), name...)
	case opCreateQueue, opSetQueueAttributes, opGetQueueAttributes, opDeleteQueue:
		return appendQueuePath(b, name)
	}
	if o.isTopic() {
		b = append(b, "/topics/"...)
		b = appendDecodedOrRaw(b, name)
		switch o {
		case opPublishMessage:
			b = append(b, "/messages"...)
		case opListSubscriptionByTopic:
			b = append(b, "/subscriptions"...)
		case opSubscribe, opSetSubscriptionAttributes, opGetSubscriptionAttributes, opUnsubscribe:
			b = append(b, "/subscriptions/"...)
			b = appendDecodedOrRaw(b, sub)
		}
		return b
	}
	return append(appendQueuePath(b, name), "/messages"...)
}

func appendQueuePath(b, name []byte) []byte {
	return appendDecodedOrRaw(append(b, "/queues/"...), name)
}

// appendDecodedOrRaw appends seg percent-decoded; a malformed escape
// appends it raw (such a name is refused by the operation anyway).
func appendDecodedOrRaw(b, seg []byte) []byte {
	n := len(b)
	b, ok := appendPercentDecoded(b, seg)
	if !ok {
		return append(b[:n], seg...)
	}
	return b
}

// everySecond lets a kind of log line through at most once a second; the
// lines it holds back are counted for the next.
type everySecond struct {
	last       atomic.Int64 // unix nanoseconds of the last line
	suppressed atomic.Int64
}

// due reports whether a line may be logged now; if not, it is counted.
func (e *everySecond) due() bool {
	now := time.Now().UnixNano()
	last := e.last.Load()
	if now-last < int64(time.Second) || !e.last.CompareAndSwap(last, now) {
		e.suppressed.Add(1)
		return false
	}
	return true
}

// deniedLog logs requests refused by policy, at most one line a second.
type deniedLog struct{ everySecond }

func (d *deniedLog) log(s *Server, p *access.Set, st *reqState, a int, res []byte) {
	if !d.due() {
		return
	}
	s.log.Warn("request refused by policy", "access_key_id", string(st.auth.id), "action", policyActions[a],
		"resource", "acs:mns:*:*:"+string(res), "source_ip", st.src, "why", p.Explain(st.auth.id, a, res, policyContext(st)),
		"request_id", string(st.reqID), "suppressed_since_last", d.suppressed.Swap(0))
}
