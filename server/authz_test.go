package server

// Server-level tests of access policies (authz.go, package access): every
// refusal is 403 AccessDenied in the MNS error format and has no effect,
// the action is the operation as RAM names it (single and batch differ),
// an explicit Deny wins and cannot be dodged with percent-escapes, a
// request that makes smqd write to another queue needs mns:SendMessage on
// it, and a policy costs the hot path no allocation.

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/server/access"
	"github.com/smqd/smqd/server/mnsauth"
	"github.com/valyala/fasthttp"
)

// authzPolicies parses a policy file against this server's actions.
func authzPolicies(t testing.TB, doc string) *access.Set {
	t.Helper()
	p, err := ParsePolicies([]byte(doc))
	if err != nil {
		t.Fatalf("ParsePolicies: %v\n%s", err, doc)
	}
	return p
}

// authzDoc is a policy file: testid has AliyunMNSFullAccess, other the
// policy "p" made of statements (JSON objects, comma-separated).
func authzDoc(statements string) string {
	return `{"Policies": {"p": {"Version": "1", "Statement": [` + statements + `]}},
	 "Keys": {"testid": ["AliyunMNSFullAccess"], "other": ["p"]}}`
}

// authzEnv starts a server with policies; admin signs as testid, other as
// "other".
func authzEnv(t *testing.T, p *access.Set) (env *testEnv, admin, other *client) {
	t.Helper()
	env = startEnv(t, envConfig{serverOpts: func(o *Options) { o.Policies = p }})
	admin = env.client()
	other = env.client()
	other.id, other.secret = "other", "othersecret"
	t.Cleanup(func() { admin.close(); other.close() })
	return env, admin, other
}

// authzQueue returns a queue's attributes, read by a key that may.
func authzQueue(t testing.TB, c *client, name string) xQueue {
	t.Helper()
	r := c.get("/queues/" + name)
	wantStatus(t, r, 200)
	var q xQueue
	decode(t, r, &q)
	return q
}

// authzDenied checks a refusal: 403 AccessDenied, the full MNS error
// document.
func authzDenied(t testing.TB, r *response) {
	t.Helper()
	wantError(t, r, 403, "AccessDenied")
}

// 1. A key allowed to send, receive and delete on orders-* queues only.
func TestAuthzRestrictedKey(t *testing.T) {
	p := authzPolicies(t, authzDoc(`{"Effect": "Allow",
		"Action": ["mns:SendMessage", "mns:ReceiveMessage", "mns:DeleteMessage"],
		"Resource": "acs:mns:*:*:/queues/orders-*/messages"}`))
	_, admin, other := authzEnv(t, p)
	admin.mustCreate("orders-1")
	admin.mustCreate("payments")

	sent := other.mustSend("orders-1", "o1", "")
	got := other.mustReceive("orders-1")
	if got.MessageId != sent.MessageId {
		t.Fatalf("received %+v, sent %+v", got, sent)
	}
	wantStatus(t, other.del("/queues/orders-1/messages?ReceiptHandle="+got.ReceiptHandle, ""), 204)
	// An allowed queue that does not exist: the operation's own error.
	wantError(t, other.post("/queues/orders-none/messages", sendBody("x", "")), 404, "QueueNotExist")

	// Another queue: refused, nothing stored.
	r := other.post("/queues/payments/messages", sendBody("stolen", ""))
	authzDenied(t, r)
	e := errorDocument(t, r)
	if !strings.Contains(e.Message, "mns:SendMessage") {
		t.Errorf("the refusal does not name the action: %q", e.Message)
	}
	if q := authzQueue(t, admin, "payments"); q.ActiveMessages != 0 || q.InactiveMessages != 0 || q.DelayMessages != 0 {
		t.Fatalf("a refused send stored a message: %+v", q)
	}
	wantError(t, admin.get("/queues/payments/messages?peekonly=true"), 404, "MessageNotExist")
	// Refused before the queue is looked up: a missing queue is not told
	// from an existing one.
	authzDenied(t, other.post("/queues/nosuch/messages", sendBody("x", "")))
	authzDenied(t, other.get("/queues/payments/messages"))

	// Queue management: refused, no effect.
	authzDenied(t, other.put("/queues/orders-2", ""))
	wantError(t, admin.get("/queues/orders-2"), 404, "QueueNotExist")
	authzDenied(t, other.del("/queues/orders-1", ""))
	authzDenied(t, other.del("/queues/payments", ""))
	authzQueue(t, admin, "orders-1")
	authzQueue(t, admin, "payments")
	authzDenied(t, other.get("/queues/orders-1"))
	authzDenied(t, other.get("/queues"))
	// The full-access key may do all of it.
	wantStatus(t, admin.del("/queues/payments", ""), 204)
}

// 2. The action is the operation's RAM name: a single and a batch
// operation, a peek and a receive, a Create and a Set are different
// actions, and a refused one changes nothing.
func TestAuthzSingleAndBatchAreDifferentActions(t *testing.T) {
	type state struct{ handles []string }
	sendN := func(t *testing.T, admin *client, n int) {
		for i := range n {
			admin.mustSend("q", fmt.Sprintf("m%d", i), "")
		}
	}
	receiveN := func(t *testing.T, admin *client, n int) []string {
		r := admin.get(fmt.Sprintf("/queues/q/messages?numOfMessages=%d", n))
		wantStatus(t, r, 200)
		var ms xMessages
		decode(t, r, &ms)
		if len(ms.Messages) != n {
			t.Fatalf("received %d, want %d", len(ms.Messages), n)
		}
		var hs []string
		for _, m := range ms.Messages {
			hs = append(hs, m.ReceiptHandle)
		}
		return hs
	}
	counts := func(active, inactive int) func(*testing.T, *client) {
		return func(t *testing.T, admin *client) {
			t.Helper()
			if q := authzQueue(t, admin, "q"); q.ActiveMessages != active || q.InactiveMessages != inactive {
				t.Fatalf("after the refusal: %d active, %d inactive; want %d and %d", q.ActiveMessages, q.InactiveMessages, active, inactive)
			}
		}
	}
	batch2 := batchBody(2, func(i int) string { return fmt.Sprintf("<MessageBody>b%d</MessageBody>", i) })
	for _, tc := range []struct {
		name    string
		allow   string                                  // the one action allowed (besides the setup's)
		setup   func(t *testing.T, admin *client) state // run with the full-access key
		refused func(st state) req
		after   func(t *testing.T, admin *client) // checks the refusal had no effect
		allowed func(st state) req
		status  int
	}{
		{name: "SendMessage, not BatchSendMessage", allow: "mns:SendMessage",
			refused: func(state) req { return req{method: "POST", target: "/queues/q/messages", body: batch2} },
			after:   counts(0, 0),
			allowed: func(state) req { return req{method: "POST", target: "/queues/q/messages", body: sendBody("one", "")} },
			status:  201},
		{name: "BatchSendMessage, not SendMessage", allow: "mns:BatchSendMessage",
			refused: func(state) req { return req{method: "POST", target: "/queues/q/messages", body: sendBody("one", "")} },
			after:   counts(0, 0),
			allowed: func(state) req { return req{method: "POST", target: "/queues/q/messages", body: batch2} },
			status:  201},
		{name: "ReceiveMessage, not BatchReceiveMessage", allow: "mns:ReceiveMessage",
			setup:   func(t *testing.T, admin *client) state { sendN(t, admin, 2); return state{} },
			refused: func(state) req { return req{method: "GET", target: "/queues/q/messages?numOfMessages=2"} },
			after:   counts(2, 0),
			allowed: func(state) req { return req{method: "GET", target: "/queues/q/messages"} },
			status:  200},
		{name: "BatchReceiveMessage, not ReceiveMessage", allow: "mns:BatchReceiveMessage",
			setup:   func(t *testing.T, admin *client) state { sendN(t, admin, 2); return state{} },
			refused: func(state) req { return req{method: "GET", target: "/queues/q/messages"} },
			after:   counts(2, 0),
			allowed: func(state) req { return req{method: "GET", target: "/queues/q/messages?numOfMessages=2"} },
			status:  200},
		{name: "PeekMessage, not ReceiveMessage", allow: "mns:PeekMessage",
			setup:   func(t *testing.T, admin *client) state { sendN(t, admin, 1); return state{} },
			refused: func(state) req { return req{method: "GET", target: "/queues/q/messages"} },
			after:   counts(1, 0),
			allowed: func(state) req { return req{method: "GET", target: "/queues/q/messages?peekonly=true"} },
			status:  200},
		{name: "PeekMessage, not BatchPeekMessage", allow: "mns:PeekMessage",
			setup:   func(t *testing.T, admin *client) state { sendN(t, admin, 2); return state{} },
			refused: func(state) req { return req{method: "GET", target: "/queues/q/messages?peekonly=true&numOfMessages=2"} },
			after:   counts(2, 0),
			allowed: func(state) req { return req{method: "GET", target: "/queues/q/messages?peekonly=true"} },
			status:  200},
		{name: "ReceiveMessage, not PeekMessage", allow: "mns:ReceiveMessage",
			setup:   func(t *testing.T, admin *client) state { sendN(t, admin, 1); return state{} },
			refused: func(state) req { return req{method: "GET", target: "/queues/q/messages?peekonly=true"} },
			after:   counts(1, 0),
			allowed: func(state) req { return req{method: "GET", target: "/queues/q/messages"} },
			status:  200},
		{name: "DeleteMessage, not BatchDeleteMessage", allow: "mns:DeleteMessage",
			setup: func(t *testing.T, admin *client) state {
				sendN(t, admin, 2)
				return state{handles: receiveN(t, admin, 2)}
			},
			refused: func(st state) req {
				return req{method: "DELETE", target: "/queues/q/messages", body: handlesBody(st.handles...)}
			},
			after: counts(0, 2),
			allowed: func(st state) req {
				return req{method: "DELETE", target: "/queues/q/messages?ReceiptHandle=" + st.handles[0]}
			},
			status: 204},
		{name: "BatchDeleteMessage, not DeleteMessage", allow: "mns:BatchDeleteMessage",
			setup: func(t *testing.T, admin *client) state {
				sendN(t, admin, 2)
				return state{handles: receiveN(t, admin, 2)}
			},
			refused: func(st state) req {
				return req{method: "DELETE", target: "/queues/q/messages?ReceiptHandle=" + st.handles[0]}
			},
			after: counts(0, 2),
			allowed: func(st state) req {
				return req{method: "DELETE", target: "/queues/q/messages", body: handlesBody(st.handles...)}
			},
			status: 204},
		{name: "SetQueueAttributes, not CreateQueue", allow: "mns:SetQueueAttributes",
			refused: func(state) req { return req{method: "PUT", target: "/queues/new"} },
			after: func(t *testing.T, admin *client) {
				wantError(t, admin.get("/queues/new"), 404, "QueueNotExist")
			},
			allowed: func(state) req {
				return req{method: "PUT", target: "/queues/q?metaoverride=true", body: `<Queue><VisibilityTimeout>60</VisibilityTimeout></Queue>`}
			},
			status: 204},
		{name: "CreateQueue, not SetQueueAttributes", allow: "mns:CreateQueue",
			refused: func(state) req {
				return req{method: "PUT", target: "/queues/q?metaoverride=true", body: `<Queue><VisibilityTimeout>60</VisibilityTimeout></Queue>`}
			},
			after: func(t *testing.T, admin *client) {
				if q := authzQueue(t, admin, "q"); q.VisibilityTimeout != 30 {
					t.Fatalf("a refused Set changed VisibilityTimeout to %d", q.VisibilityTimeout)
				}
			},
			allowed: func(state) req { return req{method: "PUT", target: "/queues/new"} },
			status:  201},
		{name: "SetTopicAttributes, not CreateTopic", allow: "mns:SetTopicAttributes",
			refused: func(state) req { return req{method: "PUT", target: "/topics/newt"} },
			after: func(t *testing.T, admin *client) {
				wantError(t, admin.get("/topics/newt"), 404, "TopicNotExist")
			},
			allowed: func(state) req {
				return req{method: "PUT", target: "/topics/t?metaoverride=true", body: `<Topic><LoggingEnabled>True</LoggingEnabled></Topic>`}
			},
			status: 204},
		{name: "SetSubscriptionAttributes, not Subscribe", allow: "mns:SetSubscriptionAttributes",
			setup: func(t *testing.T, admin *client) state {
				wantStatus(t, admin.put("/topics/t/subscriptions/s", subBody(qep("q"), "")), 201)
				return state{}
			},
			refused: func(state) req {
				return req{method: "PUT", target: "/topics/t/subscriptions/s2", body: subBody(qep("q"), "")}
			},
			after: func(t *testing.T, admin *client) {
				wantError(t, admin.get("/topics/t/subscriptions/s2"), 404, "SubscriptionNotExist")
			},
			allowed: func(state) req {
				return req{method: "PUT", target: "/topics/t/subscriptions/s?metaoverride=true", body: `<Subscription><NotifyStrategy>EXPONENTIAL_DECAY_RETRY</NotifyStrategy></Subscription>`}
			},
			status: 204},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// SendMessage on q too, so that a refused Subscribe is refused
			// for the Subscribe, not for its queue endpoint.
			p := authzPolicies(t, authzDoc(`{"Effect": "Allow", "Action": "`+tc.allow+`", "Resource": "*"},
				{"Effect": "Allow", "Action": "mns:SendMessage", "Resource": "acs:mns:*:*:/queues/q/messages"}`))
			if tc.allow == "mns:BatchSendMessage" { // the refused request is a single send
				p = authzPolicies(t, authzDoc(`{"Effect": "Allow", "Action": "`+tc.allow+`", "Resource": "*"}`))
			}
			_, admin, other := authzEnv(t, p)
			admin.mustCreate("q")
			wantStatus(t, admin.put("/topics/t", ""), 201)
			var st state
			if tc.setup != nil {
				st = tc.setup(t, admin)
			}
			authzDenied(t, other.do(tc.refused(st)))
			tc.after(t, admin)
			wantStatus(t, other.do(tc.allowed(st)), tc.status)
		})
	}
}

// 3. An explicit Deny wins over every Allow, for its action and resource
// only.
func TestAuthzDenyWinsOverAllow(t *testing.T) {
	p := authzPolicies(t, `{"Policies": {
		"all": {"Statement": [{"Effect": "Allow", "Action": "mns:*", "Resource": "*"}]},
		"keep": {"Statement": [{"Effect": "Deny", "Action": "mns:DeleteQueue", "Resource": "acs:mns:*:*:/queues/keep-*"}]}},
	 "Keys": {"testid": ["AliyunMNSFullAccess", "keep"], "other": ["keep", "all"]}}`)
	_, admin, other := authzEnv(t, p)
	for _, n := range []string{"keep-1", "keep-2", "tmp-1"} {
		admin.mustCreate(n)
	}
	for _, c := range []*client{admin, other} {
		authzDenied(t, c.del("/queues/keep-1", ""))
		authzQueue(t, admin, "keep-1")
	}
	// Everything else stays allowed.
	other.mustSend("keep-1", "x", "")
	wantStatus(t, other.put("/queues/keep-1?metaoverride=true", `<Queue><VisibilityTimeout>40</VisibilityTimeout></Queue>`), 204)
	wantStatus(t, other.del("/queues/tmp-1", ""), 204)
	wantError(t, admin.get("/queues/tmp-1"), 404, "QueueNotExist")
	authzDenied(t, admin.del("/queues/keep-2", ""))
	authzQueue(t, admin, "keep-2")
}

// 4. The resource is the decoded name: a percent-escaped name, or a
// trailing slash, does not slip past a Deny written for the plain name.
func TestAuthzPercentEncodedNamesCannotDodgeDeny(t *testing.T) {
	p := authzPolicies(t, `{"Policies": {"p": {"Statement": [
		{"Effect": "Allow", "Action": "mns:*", "Resource": "*"},
		{"Effect": "Deny", "Action": ["mns:DeleteQueue", "mns:SendMessage", "mns:BatchSendMessage", "mns:SetQueueAttributes"], "Resource": ["acs:mns:*:*:/queues/keep-*", "acs:mns:*:*:/queues/keep-*/messages"]},
		{"Effect": "Deny", "Action": "mns:DeleteTopic", "Resource": "acs:mns:*:*:/topics/keep-*"},
		{"Effect": "Deny", "Action": "mns:Unsubscribe", "Resource": "acs:mns:*:*:/topics/*/subscriptions/keep-*"}]}},
	 "Keys": {"testid": ["AliyunMNSFullAccess"], "other": ["p"]}}`)
	_, admin, other := authzEnv(t, p)
	admin.mustCreate("keep-1")
	wantStatus(t, admin.put("/topics/keep-t", ""), 201)
	wantStatus(t, admin.put("/topics/keep-t/subscriptions/keep-s", subBody(qep("keep-1"), "")), 201)

	// The server does decode escaped names: GET of the escaped name is the
	// queue itself.
	r := other.get("/queues/%6Beep-1")
	wantStatus(t, r, 200)
	var q xQueue
	decode(t, r, &q)
	if q.QueueName != "keep-1" {
		t.Fatalf("GET /queues/%%6Beep-1 answered queue %q", q.QueueName)
	}

	for _, name := range []string{"keep-1", "%6Beep-1", "%6beep-1", "k%65ep-1", "%6B%65%65%70%2D%31", "keep-1/"} {
		t.Run(name, func(t *testing.T) {
			authzDenied(t, other.del("/queues/"+name, ""))
			authzDenied(t, other.put("/queues/"+name+"?metaoverride=true", `<Queue><VisibilityTimeout>99</VisibilityTimeout></Queue>`))
			if !strings.HasSuffix(name, "/") {
				authzDenied(t, other.post("/queues/"+name+"/messages", sendBody("x", "")))
				authzDenied(t, other.post("/queues/"+name+"/messages", batchBody(2, func(i int) string { return "<MessageBody>x</MessageBody>" })))
			}
			q := authzQueue(t, admin, "keep-1")
			if q.ActiveMessages != 0 || q.VisibilityTimeout != 30 {
				t.Fatalf("a refused request had an effect: %+v", q)
			}
		})
	}
	// A doubled leading slash is routed as one (route.go).
	authzDenied(t, other.del("//queues/keep-1", ""))
	authzDenied(t, other.del("//queues/%6Beep-1", ""))
	authzQueue(t, admin, "keep-1")
	for _, name := range []string{"%6Beep-t", "k%65ep-t"} {
		authzDenied(t, other.del("/topics/"+name, ""))
		authzDenied(t, other.del("/topics/keep-t/subscriptions/"+strings.Replace(name, "-t", "-s", 1), ""))
	}
	wantStatus(t, admin.get("/topics/keep-t"), 200)
	wantStatus(t, admin.get("/topics/keep-t/subscriptions/keep-s"), 200)

	// A malformed escape is an error, and changes nothing.
	r = other.del("/queues/keep-1%zz", "")
	if r.status < 400 {
		t.Fatalf("DELETE with a malformed escape: %s", r)
	}
	authzQueue(t, admin, "keep-1")
	// The same escaped names work for the full-access key.
	wantStatus(t, admin.del("/queues/%6Beep-1", ""), 204)
	wantError(t, admin.get("/queues/keep-1"), 404, "QueueNotExist")
}

// 5. A key the policy file does not name may do nothing; the read-only
// built-in reads attributes and listings, never a message.
func TestAuthzUnnamedKeyAndReadOnly(t *testing.T) {
	all := []req{
		{method: "GET", target: "/queues"},
		{method: "GET", target: "/queues/q"},
		{method: "PUT", target: "/queues/q2"},
		{method: "PUT", target: "/queues/q?metaoverride=true", body: `<Queue><VisibilityTimeout>60</VisibilityTimeout></Queue>`},
		{method: "DELETE", target: "/queues/q"},
		{method: "POST", target: "/queues/q/messages", body: sendBody("x", "")},
		{method: "GET", target: "/queues/q/messages"},
		{method: "GET", target: "/queues/q/messages?peekonly=true"},
		{method: "GET", target: "/topics"},
		{method: "GET", target: "/topics/t"},
		{method: "GET", target: "/topics/t/subscriptions"},
		{method: "POST", target: "/topics/t/messages", body: pubBody("x", "")},
	}
	t.Run("unnamed", func(t *testing.T) {
		p := authzPolicies(t, `{"Keys": {"testid": ["AliyunMNSFullAccess"]}}`)
		if p.Has("other") {
			t.Fatal("the set names other")
		}
		_, admin, other := authzEnv(t, p)
		admin.mustCreate("q")
		admin.mustSend("q", "m", "")
		wantStatus(t, admin.put("/topics/t", ""), 201)
		for _, r := range all {
			authzDenied(t, other.do(r))
		}
		if q := authzQueue(t, admin, "q"); q.ActiveMessages != 1 || q.VisibilityTimeout != 30 {
			t.Fatalf("refused requests had an effect: %+v", q)
		}
		wantError(t, admin.get("/queues/q2"), 404, "QueueNotExist")
	})
	t.Run("read-only", func(t *testing.T) {
		p := authzPolicies(t, `{"Keys": {"testid": ["AliyunMNSFullAccess"], "other": ["AliyunMNSReadOnlyAccess"]}}`)
		_, admin, other := authzEnv(t, p)
		admin.mustCreate("q")
		admin.mustSend("q", "m", "")
		wantStatus(t, admin.put("/topics/t", ""), 201)
		for _, r := range all {
			resp := other.do(r)
			if r.method == "GET" && !strings.Contains(r.target, "/messages") {
				wantStatus(t, resp, 200)
				continue
			}
			authzDenied(t, resp)
		}
		if q := authzQueue(t, admin, "q"); q.ActiveMessages != 1 || q.InactiveMessages != 0 || q.VisibilityTimeout != 30 {
			t.Fatalf("refused requests had an effect: %+v", q)
		}
	})
}

// 6. Confused deputy: a subscription's queue endpoint, a queue's or a
// subscription's dead-letter queue make smqd send where the request does
// not name; the key needs mns:SendMessage there.
func TestAuthzConfusedDeputy(t *testing.T) {
	base := `{"Effect": "Allow", "Action": ["mns:Subscribe", "mns:SetSubscriptionAttributes", "mns:GetSubscriptionAttributes",
			"mns:PublishMessage", "mns:CreateQueue", "mns:SetQueueAttributes", "mns:GetQueueAttributes"], "Resource": "*"},
		{"Effect": "Allow", "Action": "mns:SendMessage", "Resource": ["acs:mns:*:*:/queues/mine/messages", "acs:mns:*:*:/queues/mine-dlq/messages"]}`
	env, admin, other := authzEnv(t, authzPolicies(t, authzDoc(base)))
	for _, n := range []string{"secret", "mine", "mine-dlq"} {
		admin.mustCreate(n)
	}
	wantStatus(t, admin.put("/topics/t", ""), 201)
	secretEP := "acs:mns:cn-hangzhou:1:queues/secret"
	dlq := func(q string) string { return `<DeadLetterTargetQueue>` + q + `</DeadLetterTargetQueue>` }
	hasDLQ := func(t *testing.T, target, q string) bool {
		t.Helper()
		r := admin.get(target)
		wantStatus(t, r, 200)
		return strings.Contains(string(r.body), "<DeadLetterTargetQueue>"+q+"</DeadLetterTargetQueue>")
	}

	// Allowed: its own queues.
	wantStatus(t, other.put("/topics/t/subscriptions/ok", subBody(qep("mine"), dlq("mine-dlq"))), 201)
	wantStatus(t, other.put("/queues/src", `<Queue>`+dlq("mine-dlq")+`<MaxReceiveCount>3</MaxReceiveCount></Queue>`), 201)

	// Subscribe with the secret queue as endpoint: refused, no subscription.
	for _, ep := range []string{secretEP, qep("secret"), "acs:mns:*:*:queues/secret"} {
		authzDenied(t, other.put("/topics/t/subscriptions/leak", subBody(ep, "")))
		wantError(t, admin.get("/topics/t/subscriptions/leak"), 404, "SubscriptionNotExist")
	}
	// ... or as the subscription's dead-letter queue.
	authzDenied(t, other.put("/topics/t/subscriptions/leak", subBody(qep("mine"), dlq("secret"))))
	authzDenied(t, other.put("/topics/t/subscriptions/leak", subBody(qep("mine"), `<DlqPolicy><Enabled>true</Enabled>`+dlq("secret")+`</DlqPolicy>`)))
	wantError(t, admin.get("/topics/t/subscriptions/leak"), 404, "SubscriptionNotExist")
	authzDenied(t, other.put("/topics/t/subscriptions/ok?metaoverride=true", `<Subscription>`+dlq("secret")+`</Subscription>`))
	if !hasDLQ(t, "/topics/t/subscriptions/ok", "mine-dlq") {
		t.Fatal("a refused SetSubscriptionAttributes changed the dead-letter queue")
	}
	// A queue's dead-letter queue, on create and on set, in both shapes.
	authzDenied(t, other.put("/queues/src2", `<Queue>`+dlq("secret")+`<MaxReceiveCount>3</MaxReceiveCount></Queue>`))
	wantError(t, admin.get("/queues/src2"), 404, "QueueNotExist")
	authzDenied(t, other.put("/queues/src2", `<Queue><DlqPolicy><Enabled>True</Enabled>`+dlq("secret")+`<MaxReceiveCount>3</MaxReceiveCount></DlqPolicy></Queue>`))
	wantError(t, admin.get("/queues/src2"), 404, "QueueNotExist")
	authzDenied(t, other.put("/queues/src?metaoverride=true", `<Queue>`+dlq("secret")+`</Queue>`))
	authzDenied(t, other.put("/queues/src?metaoverride=true", `<Queue><DlqPolicy><Enabled>True</Enabled>`+dlq("secret")+`<MaxReceiveCount>2</MaxReceiveCount></DlqPolicy></Queue>`))
	if !hasDLQ(t, "/queues/src", "mine-dlq") {
		t.Fatal("a refused SetQueueAttributes changed the dead-letter queue")
	}
	// An XML character reference spells the same name.
	authzDenied(t, other.put("/topics/t/subscriptions/leak", subBody("acs:mns:cn-hangzhou:1:queues/&#115;ecret", "")))
	wantError(t, admin.get("/topics/t/subscriptions/leak"), 404, "SubscriptionNotExist")
	if r := other.put("/queues/src?metaoverride=true", `<Queue>`+dlq("&#115;ecret")+`</Queue>`); r.status < 400 {
		t.Fatalf("dead-letter queue &#115;ecret: %s", r)
	}
	if !hasDLQ(t, "/queues/src", "mine-dlq") {
		t.Fatal("a refused SetQueueAttributes changed the dead-letter queue")
	}
	// Nothing reached the secret queue by the refused routes.
	wantStatus(t, other.post("/topics/t/messages", pubBody("hello", "")), 201)
	if q := authzQueue(t, admin, "secret"); q.ActiveMessages != 0 {
		t.Fatalf("secret holds %d messages", q.ActiveMessages)
	}
	// Turning a dead-letter policy off needs nothing.
	wantStatus(t, other.put("/queues/src?metaoverride=true", `<Queue><DlqPolicy><Enabled>False</Enabled></DlqPolicy></Queue>`), 204)

	// With mns:SendMessage on secret, all of it is allowed.
	if err := env.srv.SetPolicies(authzPolicies(t, authzDoc(base+`,
		{"Effect": "Allow", "Action": "mns:SendMessage", "Resource": "acs:mns:*:*:/queues/secret/messages"}`))); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, other.put("/topics/t/subscriptions/leak", subBody(secretEP, "")), 201)
	wantStatus(t, other.put("/topics/t/subscriptions/leak2", subBody(qep("mine"), dlq("secret"))), 201)
	wantStatus(t, other.put("/topics/t/subscriptions/ok?metaoverride=true", `<Subscription>`+dlq("secret")+`</Subscription>`), 204)
	wantStatus(t, other.put("/queues/src2", `<Queue>`+dlq("secret")+`<MaxReceiveCount>3</MaxReceiveCount></Queue>`), 201)
	wantStatus(t, other.put("/queues/src?metaoverride=true", `<Queue>`+dlq("secret")+`<MaxReceiveCount>2</MaxReceiveCount></Queue>`), 204)
	if !hasDLQ(t, "/queues/src", "secret") || !hasDLQ(t, "/topics/t/subscriptions/ok", "secret") {
		t.Fatal("the allowed Sets did not take")
	}
}

// 7. GET /backup needs smqd:Backup.
func TestAuthzBackupNeedsSmqdBackup(t *testing.T) {
	dir := t.TempDir()
	p := authzPolicies(t, authzDoc(`{"Effect": "Allow", "Action": "mns:*", "Resource": "*"}`))
	env := startEnv(t, envConfig{
		engineOpts: func(o *engine.Options) { o.Dir = dir },
		serverOpts: func(o *Options) { o.Policies = p },
	})
	admin, other := env.client(), env.client()
	other.id, other.secret = "other", "othersecret"
	defer admin.close()
	defer other.close()
	admin.mustCreate("bq")
	authzDenied(t, other.get("/backup"))
	authzDenied(t, other.get("/backup?rate=100000000"))
	if n := env.srv.backups.running.Load(); n {
		t.Fatal("a refused backup is running")
	}
	// mns:* is every MNS action, not smqd's own.
	other.mustSend("bq", "x", "")
	// AliyunMNSFullAccess is mns:*, as the service's: no backup either.
	authzDenied(t, admin.get("/backup"))
	// SmqdAdministratorAccess may (a durable broker: the backup is made).
	if err := env.srv.SetPolicies(authzPolicies(t, `{"Keys": {"testid": ["SmqdAdministratorAccess"]}}`)); err != nil {
		t.Fatal(err)
	}
	if r := admin.get("/backup?rate=100000000"); r.status != 200 {
		t.Fatalf("backup by the administrator key: %s", r)
	}
	// smqd:Backup alone is enough.
	if err := env.srv.SetPolicies(authzPolicies(t, authzDoc(`{"Effect": "Allow", "Action": "smqd:Backup", "Resource": "acs:mns:*:*:/backup"}`))); err != nil {
		t.Fatal(err)
	}
	if r := other.get("/backup?rate=100000000"); r.status != 200 {
		t.Fatalf("backup with smqd:Backup: %s", r)
	}
	// Ending one is smqd:CancelBackup's.
	authzDenied(t, other.del("/backup", ""))
	if err := env.srv.SetPolicies(authzPolicies(t, authzDoc(`{"Effect": "Allow", "Action": "smqd:CancelBackup", "Resource": "acs:mns:*:*:/backup"}`))); err != nil {
		t.Fatal(err)
	}
	wantError(t, other.del("/backup", ""), 404, "BackupNotRunning")
}

// 8. SetPolicies takes effect for the next request, on the same
// connection; nil allows everything.
func TestAuthzSetPoliciesReload(t *testing.T) {
	env, admin, other := authzEnv(t, nil)
	admin.mustCreate("q")
	admin.mustCreate("tmp")
	// No policies: every key may do everything.
	wantStatus(t, other.put("/queues/tmp?metaoverride=true", `<Queue><VisibilityTimeout>31</VisibilityTimeout></Queue>`), 204)

	sendOnly := authzPolicies(t, authzDoc(`{"Effect": "Allow", "Action": "mns:SendMessage", "Resource": "acs:mns:*:*:/queues/q/messages"}`))
	noSend := authzPolicies(t, authzDoc(`{"Effect": "Allow", "Action": "mns:*", "Resource": "*"},
		{"Effect": "Deny", "Action": "mns:SendMessage", "Resource": "*"}`))
	set := func(p *access.Set) {
		t.Helper()
		if err := env.srv.SetPolicies(p); err != nil {
			t.Fatal(err)
		}
	}
	set(sendOnly)
	other.mustSend("q", "1", "")
	authzDenied(t, other.put("/queues/tmp?metaoverride=true", `<Queue><VisibilityTimeout>32</VisibilityTimeout></Queue>`))
	authzDenied(t, other.del("/queues/tmp", ""))
	set(noSend)
	authzDenied(t, other.post("/queues/q/messages", sendBody("2", "")))
	wantStatus(t, other.put("/queues/tmp?metaoverride=true", `<Queue><VisibilityTimeout>33</VisibilityTimeout></Queue>`), 204)
	set(sendOnly)
	other.mustSend("q", "3", "")
	set(nil)
	other.mustSend("q", "4", "")
	wantStatus(t, other.del("/queues/tmp", ""), 204)
	if q := authzQueue(t, admin, "q"); q.ActiveMessages != 3 {
		t.Fatalf("q holds %d messages, want 3 (1, 3 and 4)", q.ActiveMessages)
	}
	if other.conn == nil {
		t.Fatal("the client's connection was closed: the reloads were not seen on one connection")
	}
}

// 9. acs:SecureTransport: a plain-HTTP request is not a secure transport;
// a TLS one is.
func TestAuthzSecureTransportCondition(t *testing.T) {
	denyPlain := `{"Effect": "Allow", "Action": "mns:*", "Resource": "*"},
		{"Effect": "Deny", "Action": "mns:*", "Resource": "*", "Condition": {"Bool": {"acs:SecureTransport": "false"}}}`
	onlyTLS := `{"Effect": "Allow", "Action": "mns:*", "Resource": "*", "Condition": {"Bool": {"acs:SecureTransport": "true"}}}`
	denyTLS := `{"Effect": "Allow", "Action": "mns:*", "Resource": "*"},
		{"Effect": "Deny", "Action": "mns:*", "Resource": "*", "Condition": {"Bool": {"acs:SecureTransport": "true"}}}`
	t.Run("plain HTTP", func(t *testing.T) {
		env, admin, other := authzEnv(t, authzPolicies(t, authzDoc(denyPlain)))
		admin.mustCreate("q")
		authzDenied(t, other.post("/queues/q/messages", sendBody("x", "")))
		authzDenied(t, other.get("/queues/q"))
		authzDenied(t, other.get("/queues"))
		if q := authzQueue(t, admin, "q"); q.ActiveMessages != 0 {
			t.Fatalf("a refused send stored: %+v", q)
		}
		for _, doc := range []string{onlyTLS} {
			if err := env.srv.SetPolicies(authzPolicies(t, authzDoc(doc))); err != nil {
				t.Fatal(err)
			}
			authzDenied(t, other.post("/queues/q/messages", sendBody("x", "")))
		}
		if err := env.srv.SetPolicies(authzPolicies(t, authzDoc(denyTLS))); err != nil {
			t.Fatal(err)
		}
		other.mustSend("q", "plain", "")
	})
	t.Run("TLS", func(t *testing.T) {
		cert, pool := selfSigned(t)
		env := startEnv(t, envConfig{serverOpts: func(o *Options) {
			o.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
			o.Policies = authzPolicies(t, authzDoc(denyPlain))
		}})
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
		defer tr.CloseIdleConnections()
		hc := &http.Client{Transport: tr}
		do := func(id, secret, method, path, body string) int {
			t.Helper()
			return doHTTPS(t, hc, mnsauth.NewKey(id, secret), method, "https://"+env.addr+path, body).StatusCode
		}
		if s := do(testKeyID, testSecret, "PUT", "/queues/q", ""); s != 201 {
			t.Fatalf("create: %d", s)
		}
		if s := do("other", "othersecret", "POST", "/queues/q/messages", sendBody("x", "")); s != 201 {
			t.Fatalf("send over TLS with Deny on plain transport: %d", s)
		}
		if err := env.srv.SetPolicies(authzPolicies(t, authzDoc(denyTLS))); err != nil {
			t.Fatal(err)
		}
		if s := do("other", "othersecret", "POST", "/queues/q/messages", sendBody("x", "")); s != 403 {
			t.Fatalf("send over TLS with Deny on TLS: %d", s)
		}
	})
}

// 10. Policies need authentication.
func TestAuthzPoliciesNeedAuth(t *testing.T) {
	p := authzPolicies(t, authzDoc(`{"Effect": "Allow", "Action": "mns:*", "Resource": "*"}`))
	if err := (Options{NoAuth: true, Policies: p}).Validate(); err == nil {
		t.Fatal("Validate accepted NoAuth with Policies")
	}
	if err := (Options{NoAuth: true}).Validate(); err != nil {
		t.Fatalf("NoAuth alone: %v", err)
	}
	if err := (Options{Credentials: map[string]string{testKeyID: testSecret}, Policies: p}).Validate(); err != nil {
		t.Fatalf("credentials with policies: %v", err)
	}
	b, err := engine.Open(engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := New(b, Options{NoAuth: true, Policies: p}); err == nil {
		t.Fatal("New accepted NoAuth with Policies")
	}
	s, err := New(b, Options{NoAuth: true, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetPolicies(p); err == nil {
		t.Fatal("SetPolicies accepted policies on a server without authentication")
	}
	if err := s.SetPolicies(nil); err != nil {
		t.Fatalf("SetPolicies(nil) without authentication: %v", err)
	}
}

// ParsePolicies knows this server's actions: the MNS operations by their
// RAM names and smqd's own; a typo is an error.
func TestAuthzPolicyActions(t *testing.T) {
	acts := PolicyActions()
	for _, want := range []string{"mns:SendMessage", "mns:BatchSendMessage", "mns:ReceiveMessage", "mns:BatchReceiveMessage",
		"mns:PeekMessage", "mns:BatchPeekMessage", "mns:DeleteMessage", "mns:BatchDeleteMessage", "mns:ChangeMessageVisibility",
		"mns:CreateQueue", "mns:SetQueueAttributes", "mns:GetQueueAttributes", "mns:DeleteQueue", "mns:ListQueue",
		"mns:CreateTopic", "mns:SetTopicAttributes", "mns:GetTopicAttributes", "mns:DeleteTopic", "mns:ListTopic",
		"mns:Subscribe", "mns:SetSubscriptionAttributes", "mns:GetSubscriptionAttributes", "mns:Unsubscribe",
		"mns:ListSubscriptionByTopic", "mns:PublishMessage", "smqd:Backup", "smqd:CancelBackup", "smqd:ClusterAddNode", "smqd:ClusterRemoveNode"} {
		found := false
		for _, a := range acts {
			found = found || a == want
		}
		if !found {
			t.Errorf("no action %s in %v", want, acts)
		}
	}
	for _, a := range acts {
		for _, unsigned := range []string{"Healthz", "Metrics", "Console", "ClusterStatus", "PushCertificate", "Unknown"} {
			if strings.HasSuffix(a, ":"+unsigned) {
				t.Errorf("action %s: the operation is not signed, no policy governs it", a)
			}
		}
	}
	for _, bad := range []string{
		authzDoc(`{"Effect": "Allow", "Action": "mns:SendMesage", "Resource": "*"}`),
		authzDoc(`{"Effect": "Allow", "Action": "mns:Healthz", "Resource": "*"}`),
		authzDoc(`{"Effect": "Allow", "Action": "mns:*", "Resource": "acs:mns:*:*:queues/q"}`),
		`{"Keys": {"other": ["nosuch"]}}`,
	} {
		if _, err := ParsePolicies([]byte(bad)); err == nil {
			t.Errorf("ParsePolicies accepted %s", bad)
		}
	}
}

// 11. A policy costs the hot path no allocation.

// raceBuild reports whether the test binary runs with the race detector,
// under which sync.Pool drops items at random and allocation counts of
// pooled paths are not exact.
func raceBuild() bool {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-race" {
				return s.Value == "true"
			}
		}
	}
	return false
}

// authzBenchPolicy is a realistic policy for testid: allows on a
// wildcard, a Deny that does not apply, a condition.
const authzBenchPolicy = `{"Policies": {"worker": {"Statement": [
	{"Effect": "Allow", "Action": ["mns:SendMessage", "mns:ReceiveMessage", "mns:DeleteMessage", "mns:BatchSendMessage", "mns:BatchReceiveMessage", "mns:BatchDeleteMessage"],
	 "Resource": ["acs:mns:*:*:/queues/other-*/messages", "acs:mns:*:*:/queues/b*/messages"]},
	{"Effect": "Deny", "Action": "mns:*", "Resource": "acs:mns:*:*:/queues/secret*"},
	{"Effect": "Deny", "Action": "mns:SendMessage", "Resource": "*", "Condition": {"Bool": {"acs:SecureTransport": "true"}}}]}},
 "Keys": {"testid": ["worker"], "other": ["AliyunMNSReadOnlyAccess"]}}`

// authzHandlerAllocs counts the allocations of one request of bc run
// through the handler on a hand-built RequestCtx, as BenchmarkHandler does.
func authzHandlerAllocs(t *testing.T, bc benchCase, p *access.Set) float64 {
	const runs = 200
	br, err := engine.Open(engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	cfg := engine.DefaultQueueConfig()
	cfg.VisibilityTimeout = 12 * time.Hour
	if _, err := br.CreateQueue("bench", cfg); err != nil {
		t.Fatal(err)
	}
	q, err := br.Queue("bench")
	if err != nil {
		t.Fatal(err)
	}
	if bc.name == "ReceiveMessage" {
		for i := range runs + 1 {
			if _, err := q.Send([]engine.SendEntry{{Body: []byte(benchBody(i))}}, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	s, err := New(br, Options{Credentials: map[string]string{testKeyID: testSecret}, Policies: p, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	var raw []byte
	switch bc.name {
	case "SendMessage":
		raw = rawRequest("POST", "/queues/bench/messages", sendBody(benchBody(0), ""), time.Now())
	case "ReceiveMessage":
		raw = rawRequest("GET", "/queues/bench/messages", "", time.Now())
	}
	var parsed fasthttp.Request
	if err := parsed.Read(bufio.NewReader(strings.NewReader(string(raw)))); err != nil {
		t.Fatal(err)
	}
	var ctx fasthttp.RequestCtx
	ctx.Init(&parsed, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, nil)
	return testing.AllocsPerRun(runs, func() {
		ctx.Response.Header.Reset()
		s.handle(&ctx)
		if ctx.Response.StatusCode() != bc.status {
			t.Fatalf("%s: status %d: %s", bc.name, ctx.Response.StatusCode(), ctx.Response.Body())
		}
	})
}

func TestAuthzPolicyCostsNoAllocation(t *testing.T) {
	p := authzPolicies(t, authzBenchPolicy)

	// The checks themselves, on a reused request state: no allocation
	// (exact under -race too: no pool involved).
	b, err := engine.Open(engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s, err := New(b, Options{Credentials: map[string]string{testKeyID: testSecret}, Policies: p, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	st := new(reqState)
	st.auth.id = []byte(testKeyID)
	st.name = []byte("bench")
	for _, o := range []op{opSendMessage, opBatchSendMessage, opReceiveMessage, opBatchReceiveMessage, opDeleteMessage} {
		st.op = o
		r := routed{op: o, queue: []byte("bench")}
		check := func() {
			if o == opSendMessage || o == opBatchSendMessage {
				if err := s.authorizeSend(st); err != nil {
					t.Fatalf("%v: %v", o, err)
				}
				return
			}
			if err := s.authorize(st, &r); err != nil {
				t.Fatalf("%v: %v", o, err)
			}
		}
		if n := testing.AllocsPerRun(100, check); n != 0 {
			t.Errorf("authorizing %v: %v allocations, want 0", o, n)
		}
	}
	// The same checks do refuse (the counts above are of real checks).
	st.op, st.name = opSendMessage, []byte("secret-1")
	if err := s.authorizeSend(st); err == nil {
		t.Fatal("a send to secret-1 was allowed")
	}
	st.op = opDeleteQueue
	if err := s.authorize(st, &routed{op: opDeleteQueue, queue: []byte("bench")}); err == nil {
		t.Fatal("DeleteQueue was allowed")
	}
}

func TestAuthzPolicyHandlerAllocs(t *testing.T) {
	if raceBuild() {
		t.Skip("-race: sync.Pool drops items at random, so the handler's allocation counts are not exact (TestAuthzPolicyCostsNoAllocation checks the checks)")
	}
	p := authzPolicies(t, authzBenchPolicy)
	for _, bc := range benchCases {
		if bc.name != "SendMessage" && bc.name != "ReceiveMessage" {
			continue
		}
		t.Run(bc.name, func(t *testing.T) {
			without := authzHandlerAllocs(t, bc, nil)
			with := authzHandlerAllocs(t, bc, p)
			t.Logf("%s: %v allocations without a policy, %v with", bc.name, without, with)
			if with != without {
				t.Errorf("%s: %v allocations with a policy, %v without", bc.name, with, without)
			}
		})
	}
}

// BenchmarkHandlerPolicy is BenchmarkHandler's SendMessage and
// ReceiveMessage without and with a policy, side by side.
func BenchmarkHandlerPolicy(b *testing.B) {
	p, err := ParsePolicies([]byte(authzBenchPolicy))
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range benchCases {
		if bc.name != "SendMessage" && bc.name != "ReceiveMessage" {
			continue
		}
		for _, v := range []struct {
			name string
			p    *access.Set
		}{{"none", nil}, {"policy", p}} {
			b.Run(bc.name+"/"+v.name, func(b *testing.B) {
				br := benchBroker(b)
				s, err := New(br, Options{Credentials: map[string]string{testKeyID: testSecret}, Policies: v.p})
				if err != nil {
					b.Fatal(err)
				}
				reqs := bc.setup(b, br, b.N, time.Now())
				var parsed fasthttp.Request
				if err := parsed.Read(bufio.NewReader(strings.NewReader(string(reqs[0])))); err != nil {
					b.Fatal(err)
				}
				var ctx fasthttp.RequestCtx
				ctx.Init(&parsed, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, nil)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					ctx.Response.Header.Reset()
					s.handle(&ctx)
					if ctx.Response.StatusCode() != bc.status {
						b.Fatalf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
					}
				}
			})
		}
	}
}

// acs:SourceIp: the connection's peer is the source; a client cannot
// claim another with the forwarding header.
func TestAuthzSourceIPCondition(t *testing.T) {
	from := func(prefix string) *access.Set {
		return authzPolicies(t, authzDoc(`{"Effect": "Allow", "Action": "mns:*", "Resource": "*",
			"Condition": {"IpAddress": {"acs:SourceIp": "`+prefix+`"}}}`))
	}
	env, admin, other := authzEnv(t, from("127.0.0.0/8"))
	admin.mustCreate("q")
	other.mustSend("q", "from loopback", "")
	if err := env.srv.SetPolicies(from("10.0.0.0/8")); err != nil {
		t.Fatal(err)
	}
	authzDenied(t, other.post("/queues/q/messages", sendBody("from elsewhere", "")))
	authzDenied(t, other.do(req{method: "POST", target: "/queues/q/messages", body: sendBody("spoofed", ""),
		headers: map[string]string{hdrClientIP: "10.1.2.3"}}))
	if got := authzQueue(t, admin, "q").ActiveMessages; got != 1 {
		t.Fatalf("q holds %d messages, want 1", got)
	}
	// NotIpAddress in a Deny: loopback is outside 10/8, so refused.
	if err := env.srv.SetPolicies(authzPolicies(t, authzDoc(`{"Effect": "Allow", "Action": "mns:*", "Resource": "*"},
		{"Effect": "Deny", "Action": "mns:*", "Resource": "*", "Condition": {"NotIpAddress": {"acs:SourceIp": ["10.0.0.0/8", "::1"]}}}`))); err != nil {
		t.Fatal(err)
	}
	authzDenied(t, other.get("/queues/q"))
}

// Limits: a key over its rate gets 400 QpsLimitExceeded and its request
// changes nothing; the rate comes back with time (a fake clock); other
// keys are not held back; a reload that keeps the limit keeps the state.
func TestAuthzRateLimit(t *testing.T) {
	doc := func(rate string) *access.Set {
		return authzPolicies(t, `{"Keys": {"testid": ["AliyunMNSFullAccess"], "other": ["AliyunMNSFullAccess"]},
		  "Limits": {"other": {"RequestsPerSecond": `+rate+`, "Burst": 2}}}`)
	}
	var logs lockedBuffer
	env := startEnv(t, envConfig{fakeClock: true, serverOpts: func(o *Options) {
		o.Policies = doc("1")
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}})
	admin, other := env.client(), env.client()
	other.id, other.secret = "other", "othersecret"
	defer admin.close()
	defer other.close()
	admin.mustCreate("q")
	other.mustSend("q", "1", "")
	other.mustSend("q", "2", "")
	wantError(t, other.post("/queues/q/messages", sendBody("3", "")), 400, "QpsLimitExceeded")
	wantError(t, other.get("/queues/q"), 400, "QpsLimitExceeded") // every request counts
	for range 10 {
		wantStatus(t, admin.get("/queues/q"), 200) // no limit for testid
	}
	if got := authzQueue(t, admin, "q").ActiveMessages; got != 2 {
		t.Fatalf("q holds %d messages, want the 2 allowed", got)
	}
	// Logged once (at most a line a second), with the key.
	if got := logs.lines(`"request over its key's rate"`); len(got) != 1 || !strings.Contains(got[0], "access_key_id=other") {
		t.Errorf("the log of requests over the rate: %q", got)
	}
	// A reload with the same limit: still over it.
	if err := env.srv.SetPolicies(doc("1")); err != nil {
		t.Fatal(err)
	}
	wantError(t, other.get("/queues/q"), 400, "QpsLimitExceeded")
	env.clock.Advance(time.Second)
	other.mustSend("q", "3", "")
	wantError(t, other.post("/queues/q/messages", sendBody("4", "")), 400, "QpsLimitExceeded")
	// A new limit starts afresh.
	if err := env.srv.SetPolicies(doc("5")); err != nil {
		t.Fatal(err)
	}
	other.mustSend("q", "4", "")
	other.mustSend("q", "5", "")
	wantError(t, other.post("/queues/q/messages", sendBody("6", "")), 400, "QpsLimitExceeded")
	if got := authzQueue(t, admin, "q").ActiveMessages; got != 5 {
		t.Fatalf("q holds %d messages, want the 5 allowed", got)
	}
}
