package server

// Access policies in a cluster (authz.go): the node a request reaches and
// the shard's leader each authorize it with their own policies; a send's
// form only the leader checks.

import (
	"testing"
)

// authzClusterDeny allows testid everything but changing or reading the
// messages of queue "locked" and deleting it.
const authzClusterDeny = `{"Policies": {"p": {"Statement": [
	{"Effect": "Allow", "Action": "*", "Resource": "*"},
	{"Effect": "Deny", "Action": ["mns:SendMessage", "mns:BatchSendMessage", "mns:ReceiveMessage", "mns:DeleteQueue", "mns:SetQueueAttributes"],
	 "Resource": ["acs:mns:*:*:/queues/locked", "acs:mns:*:*:/queues/locked/messages"]}]}},
 "Keys": {"testid": ["p"]}}`

func TestAuthzCluster(t *testing.T) {
	c, lead, entry, viaEntry, viaLead := authzCluster(t, "locked")
	viaLead.mustSend("locked", "before", "")
	deny := authzPolicies(t, authzClusterDeny)
	setPolicies := func(entryP, leadP bool) {
		t.Helper()
		for i, e := range c.envs {
			on := (i == entry && entryP) || (i == lead && leadP)
			p := deny
			if !on {
				p = nil
			}
			if err := e.srv.SetPolicies(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	forwarded := func() int64 { return c.nodes[entry].Status().Forwarded }
	unchanged := func(t *testing.T) {
		t.Helper()
		q := authzQueue(t, viaLead, "locked")
		if q.ActiveMessages != 1 || q.InactiveMessages != 0 || q.VisibilityTimeout != 30 {
			t.Fatalf("a refused request had an effect: %+v", q)
		}
	}
	refusedOps := []req{
		{method: "DELETE", target: "/queues/locked"},
		{method: "PUT", target: "/queues/locked?metaoverride=true", body: `<Queue><VisibilityTimeout>60</VisibilityTimeout></Queue>`},
		{method: "GET", target: "/queues/locked/messages"},
	}

	// The entry node's policy refuses: answered there, not forwarded.
	t.Run("entry refuses", func(t *testing.T) {
		setPolicies(true, false)
		before := forwarded()
		for _, r := range refusedOps {
			authzDenied(t, viaEntry.do(r))
		}
		if n := forwarded() - before; n != 0 {
			t.Errorf("%d refused requests were forwarded to the leader", n)
		}
		unchanged(t)
		// Allowed ones still go to the leader.
		wantStatus(t, viaEntry.get("/queues/locked"), 200)
		if forwarded() == before {
			t.Error("GetQueueAttributes was not forwarded: this test does not exercise forwarding")
		}
	})

	// A forwarded request is checked again on the leader, by its policy.
	t.Run("leader refuses forwarded", func(t *testing.T) {
		setPolicies(false, true)
		before := forwarded()
		for _, r := range append(refusedOps,
			req{method: "POST", target: "/queues/locked/messages", body: sendBody("x", "")},
			req{method: "POST", target: "/queues/locked/messages", body: batchBody(2, func(int) string { return "<MessageBody>x</MessageBody>" })},
		) {
			authzDenied(t, viaEntry.do(r))
		}
		if forwarded() == before {
			t.Fatal("nothing was forwarded: the refusals were not the leader's")
		}
		setPolicies(false, false)
		unchanged(t)
	})

	// A send's form is known only once its body is parsed, on the leader;
	// the entry node refuses a send whose key may do neither form, and
	// does not forward it.
	t.Run("entry refuses send", func(t *testing.T) {
		setPolicies(true, false)
		before := forwarded()
		authzDenied(t, viaEntry.post("/queues/locked/messages", sendBody("x", "")))
		authzDenied(t, viaEntry.post("/queues/locked/messages", batchBody(2, func(int) string { return "<MessageBody>x</MessageBody>" })))
		if n := forwarded() - before; n != 0 {
			t.Errorf("%d refused sends were forwarded to the leader", n)
		}
		setPolicies(false, false)
		unchanged(t)
	})
}

// acs:SourceIp in a cluster: the first node tells the leader the client's
// address, and replaces any the client sent.
func TestAuthzClusterSourceIP(t *testing.T) {
	c, lead, entry, viaEntry, viaLead := authzCluster(t, "q")
	// Only the leader has a policy: testid may do anything from
	// loopback, or from 10/8.
	leaderPolicy := func(prefix string) {
		t.Helper()
		p := authzPolicies(t, `{"Policies": {"p": {"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*",
			"Condition": {"IpAddress": {"acs:SourceIp": "`+prefix+`"}}}]}}, "Keys": {"testid": ["p"]}}`)
		if err := c.envs[lead].srv.SetPolicies(p); err != nil {
			t.Fatal(err)
		}
	}
	forwarded := func() int64 { return c.nodes[entry].Status().Forwarded }
	leaderPolicy("127.0.0.0/8")
	before := forwarded()
	viaEntry.mustSend("q", "forwarded from loopback", "")
	if forwarded() == before {
		t.Fatal("the send was not forwarded: this test does not exercise forwarding")
	}
	leaderPolicy("10.0.0.0/8")
	authzDenied(t, viaEntry.post("/queues/q/messages", sendBody("x", "")))
	authzDenied(t, viaEntry.do(req{method: "POST", target: "/queues/q/messages", body: sendBody("spoofed", ""),
		headers: map[string]string{hdrClientIP: "10.1.2.3"}}))
	if err := c.envs[lead].srv.SetPolicies(nil); err != nil {
		t.Fatal(err)
	}
	if got := authzQueue(t, viaLead, "q").ActiveMessages; got != 1 {
		t.Fatalf("q holds %d messages, want the 1 allowed", got)
	}
}

// Limits are per node: the node a request reaches counts it, and the
// leader it is forwarded to does not count it again.
func TestAuthzClusterRateLimit(t *testing.T) {
	c, lead, _, viaEntry, viaLead := authzCluster(t, "q")
	p := authzPolicies(t, `{"Keys": {"testid": ["AliyunMNSFullAccess"]}, "Limits": {"testid": {"RequestsPerSecond": 0.001, "Burst": 1}}}`)
	if err := c.envs[lead].srv.SetPolicies(p); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		wantStatus(t, viaEntry.get("/queues/q"), 200) // forwarded: not counted by the leader
	}
	wantStatus(t, viaLead.get("/queues/q"), 200)
	wantError(t, viaLead.get("/queues/q"), 400, "QpsLimitExceeded")
}

// authzCluster starts three nodes with one shard and creates queue
// through its leader; a request through viaEntry is forwarded to lead.
func authzCluster(t *testing.T, queue string) (c *clusterEnv, lead, entry int, viaEntry, viaLead *client) {
	t.Helper()
	c = startCluster(t, 3, 1)
	c.ready()
	c.settled() // the lead picked below stays: no balancer hand-over moves it
	lead = c.leaderOf(queue)
	entry = (lead + 1) % 3
	t.Logf("shard led by node %d; requests enter at node %d", lead+1, entry+1)
	viaEntry, viaLead = c.envs[entry].client(), c.envs[lead].client()
	t.Cleanup(func() { viaEntry.close(); viaLead.close() })
	wantStatus(t, viaLead.put("/queues/"+queue, ""), 201)
	return c, lead, entry, viaEntry, viaLead
}
