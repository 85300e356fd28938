package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/smqd/smqd/engine"
	"github.com/valyala/fasthttp"
)

// refusedKeysEnv starts a server (fake clock) with queue q and three
// clients: admin (every action), other (held to GetQueueAttributes) and
// slow (every action, but its burst of one request, spent on a send to
// q, and 0.001 requests a second).
func refusedKeysEnv(t *testing.T, opts func(*Options)) (env *testEnv, admin, other, slow *client) {
	t.Helper()
	p := authzPolicies(t, `{"Policies": {"ro": {"Version": "1", "Statement": [
		{"Effect": "Allow", "Action": "mns:GetQueueAttributes", "Resource": "*"}]}},
	  "Keys": {"testid": ["AliyunMNSFullAccess"], "other": ["ro"], "slow": ["AliyunMNSFullAccess"]},
	  "Limits": {"slow": {"RequestsPerSecond": 0.001, "Burst": 1}}}`)
	env = startEnv(t, envConfig{fakeClock: true, serverOpts: func(o *Options) {
		o.Policies = p
		o.Credentials["slow"] = "slowsecret"
		if opts != nil {
			opts(o)
		}
	}})
	admin, other, slow = env.client(), env.client(), env.client()
	other.id, other.secret = "other", "othersecret"
	slow.id, slow.secret = "slow", "slowsecret"
	t.Cleanup(func() { admin.close(); other.close(); slow.close() })
	admin.mustCreate("q")
	slow.mustSend("q", "the one request of its burst", "")
	return env, admin, other, slow
}

// A key whose policies refuse an operation is refused on its headers
// alone: its body is not read, buffered or hashed first. A key held to
// GetQueueAttributes (a leaked monitoring key, say), or one over its
// request rate, made the server read and keep up to --max-body-bytes
// of body per connection before the refusal (security2 audit,
// 2026-12-07).
func TestAuthzRefusesBeforeTheBodyIsRead(t *testing.T) {
	env, admin, other, slow := refusedKeysEnv(t, func(o *Options) {
		o.HeaderTimeout = 200 * time.Millisecond
		o.ReadTimeout = 10 * time.Minute
	})

	body := sendBody("hello", "")
	badMD5 := map[string]string{"Content-MD5": hexMD5b64("not the body")}

	// The refusal, not a complaint about a body the key may not send.
	t.Run("md5", func(t *testing.T) {
		authzDenied(t, other.do(req{method: "POST", target: "/queues/q/messages", body: body, headers: badMD5}))
		wantError(t, slow.do(req{method: "POST", target: "/queues/q/messages", body: body, headers: badMD5}), 400, "QpsLimitExceeded")
	})

	// A refused key that declares a large body and sends a little of it
	// is answered without the rest (the server waited --body-timeout for
	// it, holding what had come).
	for _, c := range []*client{other, slow} {
		t.Run(c.id, func(t *testing.T) {
			const declared = 1 << 20
			date := env.now().UTC().Format(http.TimeFormat)
			h := map[string]string{"x-mns-version": apiVersion, "Date": date, "Content-Type": c.ctype}
			h["Authorization"] = sign(c.id, c.secret, "POST", "", c.ctype, date, h, "/queues/q/messages")
			var sb strings.Builder
			fmt.Fprintf(&sb, "POST /queues/q/messages HTTP/1.1\r\nHost: %s\r\n", env.addr)
			for k, v := range h {
				fmt.Fprintf(&sb, "%s: %s\r\n", k, v)
			}
			fmt.Fprintf(&sb, "Content-Length: %d\r\n\r\n", declared)
			sb.WriteString(strings.Repeat("x", 64<<10)) // of 1 MiB
			conn, err := net.Dial("tcp", env.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := io.WriteString(conn, sb.String()); err != nil {
				t.Fatal(err)
			}
			// A deadline for the answer, far above the 200 ms the drain of
			// a refused request's body may take, far below --body-timeout.
			conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer while the body is incomplete (the server is reading a refused key's body): %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != 403 && resp.StatusCode != 400 {
				t.Fatalf("status %d, want the refusal", resp.StatusCode)
			}
		})
	}
	if got := authzQueue(t, admin, "q").ActiveMessages; got != 1 {
		t.Fatalf("q holds %d messages, want 1", got)
	}
}

// A client's own X-Smqd-Wait-Ms is no cap on its long poll, sent to the
// shard's leader or to a node that forwards it (security2 audit: held).
func TestClusterClientWaitHeaderIgnored(t *testing.T) {
	c := startCluster(t, 3, 1)
	c.ready()
	c.settled() // the lead picked below stays: no balancer hand-over moves it
	wantStatus(t, c.envs[0].client().put("/queues/w", ""), 201)
	lead := c.leaderOf("w")
	lb := c.nodes[lead].Broker(0)
	polls := make([]<-chan pollResult, 0, 2)
	for _, n := range []int{lead, (lead + 1) % 3} {
		polls = append(polls, asyncReq(c.envs[n], req{method: "GET", target: "/queues/w/messages?waitseconds=30",
			headers: map[string]string{hdrWaitMs: "0", hdrNotRun: "1", hdrClientIP: "10.9.9.9"}}))
	}
	clusterEventually(t, "both polls wait on the leader", func() error {
		for _, d := range polls {
			select {
			case r := <-d:
				return fmt.Errorf("a poll ended at once (its client capped its wait): %v %v", r.r, r.err)
			default:
			}
		}
		if n := lb.Stats().LongPolls; n != 2 {
			return fmt.Errorf("%d long polls waiting", n)
		}
		return nil
	})
	admin := c.envs[lead].client()
	defer admin.close()
	admin.mustSend("w", "one", "")
	admin.mustSend("w", "two", "")
	for _, d := range polls {
		wantStatus(t, result(t, d), 200)
	}
}

// countingCollector counts the gathers that reach it.
type countingCollector struct {
	n    atomic.Int64
	desc *prometheus.Desc
}

func (c *countingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }
func (c *countingCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(c.n.Add(1)))
}

// Unsigned scrapes of /metrics on the API listener do not each gather
// every queue's statistics: one that comes while a costly gather may
// still be reused is answered with it (security2 audit: each cost 12 ms
// of CPU and 8 MB of garbage with 10,000 queues, for anyone who reaches
// the port).
func TestUnsignedMetricsScrapesShareACostlyGather(t *testing.T) {
	cc := &countingCollector{desc: prometheus.NewDesc("security2_gathers", "gathers", nil, nil)}
	env := startEnv(t, envConfig{fakeClock: true, serverOpts: func(o *Options) {
		o.Collectors = append(o.Collectors, cc)
	}})
	for i := range 10000 {
		name := fmt.Sprintf("queue-%05d", i)
		if _, err := env.broker.CreateQueue(name, engine.DefaultQueueConfig()); err != nil {
			t.Fatal(err)
		}
		q, err := env.broker.Queue(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.Send([]engine.SendEntry{{Body: []byte("x")}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	anon := env.client()
	defer anon.close()
	get := func() string {
		t.Helper()
		r := anon.do(req{method: "GET", target: "/metrics", noSign: true})
		if r.status != 200 {
			t.Fatalf("unsigned /metrics: %s", r)
		}
		return string(r.body)
	}
	first := get()
	for range 20 {
		if get() != first {
			t.Fatal("a scrape at the same instant gathered again")
		}
	}
	if n := cc.n.Load(); n != 1 {
		t.Fatalf("21 unsigned scrapes at one instant gathered %d times, want 1", n)
	}
	env.clock.Advance(time.Minute)
	get()
	if n := cc.n.Load(); n != 2 {
		t.Fatalf("a scrape a minute later gathered %d times in all, want 2", n)
	}
}

// An unsigned GET /healthz, served on the API listener whatever
// --metrics-listen says, costs nothing that grows with the queues: it
// took a Stats snapshot of every queue (each stripe's lock, 4.6 MB with
// 10,000 queues) to tell whether the disk is full (security2 audit).
func TestHealthzCostsNothingPerQueue(t *testing.T) {
	env := startEnv(t, envConfig{})
	for i := range 10000 {
		if _, err := env.broker.CreateQueue(fmt.Sprintf("queue-%05d", i), engine.DefaultQueueConfig()); err != nil {
			t.Fatal(err)
		}
	}
	anon := env.client()
	defer anon.close()
	if r := anon.do(req{method: "GET", target: "/healthz", noSign: true}); r.status != 200 {
		t.Fatalf("unsigned /healthz: %s", r)
	}
	var ctx fasthttp.RequestCtx
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 20 {
		ctx.Response.Reset()
		env.srv.healthz(&ctx)
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Fatalf("20 /healthz allocated %d bytes with 10,000 queues (a queue snapshot each)", n)
	}
}

// A receipt handle of queue a does nothing on queue b, even for a key
// that may delete and change visibility on b (security2 audit: held).
func TestReceiptHandleOfAnotherQueue(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	defer c.close()
	c.mustCreate("a")
	c.mustCreate("b")
	c.mustSend("a", "in a", "")
	c.mustSend("b", "in b", "")
	ha := c.mustReceive("a").ReceiptHandle
	c.mustReceive("b") // b's message is in flight too: same stripe and slot numbers are likely
	if r := c.del("/queues/b/messages?ReceiptHandle="+ha, ""); r.status < 400 {
		t.Fatalf("a's handle deleted on b: %s", r)
	}
	if r := c.do(req{method: "PUT", target: "/queues/b/messages?ReceiptHandle=" + ha + "&VisibilityTimeout=10"}); r.status < 400 {
		t.Fatalf("a's handle changed visibility on b: %s", r)
	}
	if r := c.del("/queues/b/messages", "<ReceiptHandles><ReceiptHandle>"+ha+"</ReceiptHandle></ReceiptHandles>"); r.status < 400 {
		t.Fatalf("a's handle batch-deleted on b: %s", r)
	}
	if q := authzQueue(t, c, "b"); q.InactiveMessages != 1 {
		t.Fatalf("b: %+v", q)
	}
	wantStatus(t, c.del("/queues/a/messages?ReceiptHandle="+ha, ""), 204)
}

// A leader that refuses a forwarded send by its own policy answers 403
// through the node the client reached, and that connection stays open
// (the fix of TestAuthzRefusesBeforeTheBodyIsRead refuses before the
// body; a forwarded body is already in memory and needs no drain).
func TestAuthzClusterLeaderRefusesForwardedBody(t *testing.T) {
	c, lead, _, viaEntry, viaLead := authzCluster(t, "q")
	p := authzPolicies(t, `{"Policies": {"ro": {"Version": "1", "Statement": [
		{"Effect": "Allow", "Action": "mns:GetQueueAttributes", "Resource": "*"}]}},
	  "Keys": {"testid": ["ro"]}}`)
	if err := c.envs[lead].srv.SetPolicies(p); err != nil {
		t.Fatal(err)
	}
	r := viaEntry.post("/queues/q/messages", sendBody("refused by the leader", ""))
	authzDenied(t, r)
	if r.close {
		t.Fatal("the leader's refusal closed the client's connection")
	}
	wantStatus(t, viaEntry.get("/queues/q"), 200)
	if err := c.envs[lead].srv.SetPolicies(nil); err != nil {
		t.Fatal(err)
	}
	if got := authzQueue(t, viaLead, "q").ActiveMessages; got != 0 {
		t.Fatalf("q holds %d messages", got)
	}
}
