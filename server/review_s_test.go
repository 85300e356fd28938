package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/smqd/smqd/engine"
)

// review-s: TestClusterPeekInAClosedBrokerRunsOnTheLeader (9a1da09) peeks
// a queue the leader's server had looked up before (its queue cache holds
// it). A peek of a queue it has not looked up yet (a queue only sent to
// through another path, or one whose cache entry the sweep dropped, which
// it does to every entry of a closed broker) fails in s.queue, before
// retryClosedRead, and is still answered 503 "the broker is shutting down",
// directly and forwarded.
func TestPeekOfAnUncachedQueueInAClosedBrokerRunsOnTheLeader(t *testing.T) {
	// The peeks wait for the next leader within the leader wait: the
	// closed broker's shard restarts and its lead moves, which took longer
	// than the tests' 500 ms on a loaded machine (503 "no reachable leader").
	c := startCluster(t, 3, 1, func(c *clusterEnv) {
		c.srvOpts = func(o *Options) { o.ClusterLeaderWait = 20 * time.Second }
	})
	c.ready()
	c.settled() // the lead picked below stays: no balancer hand-over moves it
	cl := c.envs[0].client()
	defer cl.close()
	wantStatus(t, cl.put("/queues/uncached", ""), 201)
	lead := c.leaderOf("uncached")
	// Sent on the engine: no server has the queue in its cache.
	q, err := c.nodes[lead].Broker(0).Queue("uncached")
	if err != nil {
		t.Fatal(err)
	}
	res, err := q.Send([]engine.SendEntry{{Body: []byte("peek me")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := string(res[0].ID.AppendText(nil))
	c.nodes[lead].Broker(0).Close() // what a rebuild does to the broker it replaces
	direct := async(c.envs[lead], "/queues/uncached/messages?peekonly=true")
	forwarded := async(c.envs[(lead+1)%3], "/queues/uncached/messages?peekonly=true")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go c.nodes[lead].HandOverLeads(ctx) //nolint:errcheck // the peeks' answers are the check
	for _, r := range []*response{result(t, direct), result(t, forwarded)} {
		if r.status != 200 || !strings.Contains(string(r.body), id) {
			t.Errorf("peek: %d %s; want 200 with %s", r.status, r.body, id)
		}
	}
}

// review-s: the API listener's unsigned /metrics shares a gather only when
// the gather exposed 1,000 queues (11cc973), but a cluster node exposes
// the queues of the shards it leads while its gather walks every queue of
// every shard it holds (metricStats: Stats() of each broker, replicas
// too). A node that leads no shard, or few, gathers O(all queues) at
// every unsigned scrape, as before the fix.
func TestFollowerMetricsScrapesShareACostlyGather(t *testing.T) {
	cc := &countingCollector{desc: prometheus.NewDesc("review_s_gathers", "gathers", nil, nil)}
	frozen := time.Now()
	c := startCluster(t, 3, 1, func(c *clusterEnv) {
		c.srvOpts = func(o *Options) {
			o.Now = func() time.Time { return frozen } // every scrape at one instant, as the single-node test's fake clock
			o.Collectors = append(o.Collectors, cc)
		}
	})
	c.ready()
	c.settled() // the lead picked below stays: no balancer hand-over moves it
	cl := c.envs[0].client()
	defer cl.close()
	wantStatus(t, cl.put("/queues/first", ""), 201)
	lead := c.leaderOf("first")
	lb := c.nodes[lead].Broker(0)
	const n = 1200
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				if _, err := lb.CreateQueue(fmt.Sprintf("queue-%05d", i), engine.DefaultQueueConfig()); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	f := (lead + 1) % 3
	clusterEventually(t, "the follower holds every queue", func() error {
		if got := len(c.nodes[f].Broker(0).Stats().Queues); got < n {
			return fmt.Errorf("%d queues", got)
		}
		return nil
	})
	anon := c.envs[f].client()
	defer anon.close()
	before := cc.n.Load()
	for range 21 {
		if r := anon.do(req{method: "GET", target: "/metrics", noSign: true}); r.status != 200 {
			t.Fatalf("unsigned /metrics: %s", r)
		}
	}
	if got := cc.n.Load() - before; got != 1 {
		t.Fatalf("21 unsigned scrapes at one instant of a node holding %d queues (leading none) gathered %d times, want 1", n, got)
	}
}

// review-s (sound): a request refused on its key's policies or rate before
// its body is read (refuseAuthenticated) keeps its connection only when its
// body was drained to its end: pipelined behind it on one connection, a
// request whose body looks like a request (Content-Length and chunked, with
// a trailer, and a body over fasthttp's 8 KiB prefetch) is not parsed from
// that body, and the next real request is answered as it should be.
func TestRefusedBodyKeepsTheFraming(t *testing.T) {
	env, admin, other, slow := refusedKeysEnv(t, nil)
	smuggled := "DELETE /queues/q HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
	chunked := func(raw string) string {
		head, body, _ := strings.Cut(raw, "\r\n\r\n")
		var hb strings.Builder
		for _, l := range strings.Split(head, "\r\n") {
			if !strings.HasPrefix(l, "Content-Length:") {
				hb.WriteString(l + "\r\n")
			}
		}
		hb.WriteString("Transfer-Encoding: chunked\r\n\r\n")
		fmt.Fprintf(&hb, "%x\r\n%s\r\n0\r\nX-Trailer: t\r\n\r\n", len(body), body)
		return hb.String()
	}
	big := sendBody(strings.Repeat("y", 20<<10)+smuggled, "")
	var pipeline strings.Builder
	want := []int{}
	for _, c := range []*client{other, slow} {
		for _, body := range []string{smuggled, big} {
			raw := c.build(req{method: "POST", target: "/queues/q/messages", body: body})
			pipeline.WriteString(raw)
			pipeline.WriteString(chunked(raw))
			want = append(want, map[*client]int{other: 403, slow: 400}[c], map[*client]int{other: 403, slow: 400}[c])
		}
	}
	pipeline.WriteString(admin.build(req{method: "GET", target: "/queues/q"}))
	want = append(want, 200)
	conn, err := net.Dial("tcp", env.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	go io.WriteString(conn, pipeline.String()) //nolint:errcheck
	br := bufio.NewReader(conn)
	for i, w := range want {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != w {
			t.Fatalf("response %d: %d %s, want %d", i, resp.StatusCode, b, w)
		}
		if resp.Close && i < len(want)-1 {
			t.Fatalf("response %d closed the connection", i)
		}
	}
	conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if resp, err := http.ReadResponse(br, nil); err == nil {
		t.Fatalf("a response more than the requests: %d", resp.StatusCode)
	}
	if q := authzQueue(t, admin, "q"); q.ActiveMessages != 1 {
		t.Fatalf("q: %+v", q)
	}
}

// stallingCollector waits once, on its first gather, as a cluster node's
// clusterCollector waits up to a second in Node.Status for a shard loop
// that does not answer (engine/cluster/status.go): wall time, no CPU.
type stallingCollector struct {
	once  sync.Once
	stall time.Duration
	desc  *prometheus.Desc
}

func (c *stallingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }
func (c *stallingCollector) Collect(ch chan<- prometheus.Metric) {
	c.once.Do(func() { time.Sleep(c.stall) })
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, 1)
}

// review-s: a gather is reused for 9 times its wall time, waits included,
// not for 9 times what it cost the CPU (11cc973's aim: "scrapes use at
// most about a tenth of a CPU"). A gather that waited a second for a
// stalled shard loop (and used a few ms of CPU) is served again for 9 s:
// a scrape 5 s later (a 5 s scrape interval) gets the same text, without
// a request answered in between.
func TestSharedMetricsWindowIsNotItsWaits(t *testing.T) {
	sc := &stallingCollector{stall: time.Second, desc: prometheus.NewDesc("review_s_stalled", "stalled", nil, nil)}
	env := startEnv(t, envConfig{fakeClock: true, serverOpts: func(o *Options) {
		o.Collectors = append(o.Collectors, sc)
	}})
	for i := range 1000 {
		if _, err := env.broker.CreateQueue(fmt.Sprintf("queue-%05d", i), engine.DefaultQueueConfig()); err != nil {
			t.Fatal(err)
		}
	}
	admin, anon := env.client(), env.client()
	defer admin.close()
	defer anon.close()
	admin.mustCreate("q")
	scrape := func() string {
		t.Helper()
		r := anon.do(req{method: "GET", target: "/metrics", noSign: true})
		if r.status != 200 {
			t.Fatalf("unsigned /metrics: %s", r)
		}
		return string(r.body)
	}
	first := scrape() // waits its second
	const sent = `smqd_http_responses_total{class="2xx",op="SendMessage"}`
	if strings.Contains(first, sent) {
		t.Fatalf("a send counted before any: %s", sent)
	}
	admin.mustSend("q", "counted", "")
	env.clock.Advance(5 * time.Second)
	if !strings.Contains(scrape(), sent) {
		t.Fatal("a scrape 5 s after a gather that waited 1 s (and used a few ms of CPU) got that gather's text: the send since is not in it")
	}
}

// review-s (sound): a HEAD /metrics that gathers first does not leave an
// empty text to be shared: the GET after it gets the whole exposition.
func TestSharedMetricsAfterAHead(t *testing.T) {
	env := startEnv(t, envConfig{fakeClock: true})
	for i := range 1000 {
		if _, err := env.broker.CreateQueue(fmt.Sprintf("queue-%05d", i), engine.DefaultQueueConfig()); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := net.Dial("tcp", env.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, "HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	head, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: "HEAD"})
	if err != nil || head.StatusCode != 200 {
		t.Fatalf("HEAD /metrics: %v %v", head, err)
	}
	anon := env.client()
	defer anon.close()
	r := anon.do(req{method: "GET", target: "/metrics", noSign: true})
	if r.status != 200 || !strings.Contains(string(r.body), "smqd_queues ") {
		t.Fatalf("GET /metrics after a HEAD: %d, %d bytes", r.status, len(r.body))
	}
}

// review-s (sound): a request over its key's rate sent with Expect:
// 100-continue (the expect handler checks policies, not rates) is asked
// for its body, refused, and its connection kept and well framed.
func TestOverRateWithExpectContinue(t *testing.T) {
	_, _, _, slow := refusedKeysEnv(t, nil)
	r := slow.do(req{method: "POST", target: "/queues/q/messages", body: sendBody(strings.Repeat("z", 20<<10), ""),
		headers: map[string]string{"Expect": "100-continue"}})
	wantError(t, r, 400, "QpsLimitExceeded")
	if r.close {
		t.Fatal("the refusal closed a connection whose body was drained")
	}
	wantError(t, slow.get("/queues/q"), 400, "QpsLimitExceeded")
}
