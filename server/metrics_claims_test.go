package server

// Tests of the claims of docs/operations.md, "Health and metrics", that
// no other test checked (metrics audit, 2026-12-07): each /healthz answer
// over HTTP, word for word, on both listeners; the queue counters and
// gauges moving on the events the tables name; the histograms' documented
// buckets; the error counters from 0; the accept waits; the push outcomes;
// the disk gauges with the guard off; the dashboard's labels.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/engine/cluster"
	"github.com/smqd/smqd/engine/cluster/chaos/ports"
	"github.com/smqd/smqd/wal"
)

// opsClient is a client of a ServeMetrics listener.
func opsClient(t *testing.T, env *testEnv, ln net.Listener) *client {
	return &client{env: &testEnv{t: t, addr: ln.Addr().String(), now: env.now}}
}

// serveOps serves env's metrics listener (SeparateMetrics must be set).
func serveOps(t *testing.T, env *testEnv) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go env.srv.ServeMetrics(ln)
	return ln
}

// healthzAt returns /healthz's status and body at addr, by GET, and checks
// that HEAD answers the same status with no body. The state may change
// between the two (a stall ending, a shard coming back, while a caller
// polls): a pair that disagrees is asked again, and only a disagreement
// in each of 5 pairs fails the test.
func healthzAt(t *testing.T, addr string) (int, string) {
	t.Helper()
	cl := &http.Client{Timeout: 30 * time.Second}
	var why string
	for range 5 {
		resp, err := cl.Get("http://" + addr + "/healthz")
		if err != nil {
			t.Fatalf("GET /healthz at %s: %v", addr, err)
		}
		body := readAll(t, resp)
		head, err := cl.Head("http://" + addr + "/healthz")
		if err != nil {
			t.Fatalf("HEAD /healthz at %s: %v", addr, err)
		}
		hb := readAll(t, head)
		if hb != "" {
			t.Fatalf("HEAD /healthz at %s: %d with a body %q", addr, head.StatusCode, hb)
		}
		if head.StatusCode == resp.StatusCode {
			return resp.StatusCode, body
		}
		why = fmt.Sprintf("HEAD /healthz at %s: %d, GET said %d", addr, head.StatusCode, resp.StatusCode)
	}
	t.Errorf("%s (in each of 5 pairs)", why)
	return 0, ""
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// /healthz: 200 "ok"; 503 "unhealthy: <reason>" with a failed log (and
// smqd_wal_sticky_failures_total 1); 200 "ok (disk full: ...)" below the
// reserve; 503 "draining: ..." after Drain, requests still served; 503
// "shutting down" on the metrics listener once Shutdown has started. By
// GET and HEAD, on the API listener and on the metrics listener.
func TestHealthzAnswersOverHTTP(t *testing.T) {
	both := func(t *testing.T, env *testEnv, ln net.Listener, status int, body string, prefix bool) {
		t.Helper()
		for _, addr := range []string{env.addr, ln.Addr().String()} {
			st, b := healthzAt(t, addr)
			if st != status || (prefix && !strings.HasPrefix(b, body)) || (!prefix && b != body) {
				t.Errorf("/healthz at %s: %d %q, want %d %q", addr, st, b, status, body)
			}
		}
	}
	t.Run("ok", func(t *testing.T) {
		env := startEnv(t, envConfig{serverOpts: func(o *Options) { o.SeparateMetrics = true }})
		ln := serveOps(t, env)
		both(t, env, ln, 200, "ok", false)
	})
	t.Run("unhealthy", func(t *testing.T) {
		ffs := wal.NewFaultFS(wal.OSFS())
		ffs.Filter = func(name string) bool { return strings.HasSuffix(name, ".wal") }
		env := startEnv(t, envConfig{
			engineOpts: func(o *engine.Options) { o.Dir = t.TempDir(); o.WAL.FS = ffs; o.FreeSpaceReserve = -1 },
			serverOpts: func(o *Options) { o.SeparateMetrics = true },
		})
		ln := serveOps(t, env)
		c := env.client()
		c.mustCreate("q")
		c.mustSend("q", "before", "")
		ops := opsClient(t, env, ln)
		if v := value(t, scrape(t, ops), "smqd_wal_sticky_failures_total"); v != 0 {
			t.Fatalf("smqd_wal_sticky_failures_total %v before the failure", v)
		}
		ffs.FailSyncs(syscall.EIO)
		wantError(t, c.post("/queues/q/messages", sendBody("during", "")), 500, "InternalError")
		both(t, env, ln, 503, "unhealthy: ", true)
		if v := value(t, scrape(t, ops), "smqd_wal_sticky_failures_total"); v != 1 {
			t.Errorf("smqd_wal_sticky_failures_total %v after a failed fsync, want 1", v)
		}
		ffs.Disarm()
	})
	t.Run("no next segment file", func(t *testing.T) {
		ffs := wal.NewFaultFS(wal.OSFS())
		env := startEnv(t, envConfig{
			engineOpts: func(o *engine.Options) {
				o.Dir, o.FreeSpaceReserve = t.TempDir(), -1
				o.WAL.FS, o.WAL.SegmentBytes, o.WAL.BufferBytes = ffs, 256<<10, 256<<10
				// A compacted segment recycled as the spare needs no
				// fallocate and would end the stall before it is seen.
				o.WAL.RecycleSegments = -1
			},
			serverOpts: func(o *Options) { o.SeparateMetrics = true },
		})
		ln := serveOps(t, env)
		ops := opsClient(t, env, ln)
		c := env.client()
		c.mustCreate("q")
		ffs.FailPreallocate(syscall.ENOSPC)
		// The spare made before is used by the next roll; the one after
		// cannot be made, and the roll after that waits for it.
		if !sendUntil(t, c, "q", strings.Repeat("x", 4000), 1000, "ServiceUnavailable") {
			t.Fatal("4 MB of sends never waited for a segment file")
		}
		both(t, env, ln, 503, "unhealthy: ", true)
		m := scrape(t, ops)
		if v := value(t, m, "smqd_wal_spare_failures_total"); v < 1 {
			t.Errorf("smqd_wal_spare_failures_total %v while no segment file can be made", v)
		}
		if v := value(t, m, "smqd_wal_roll_stalls_total"); v != 1 {
			t.Errorf("smqd_wal_roll_stalls_total %v, want 1", v)
		}
		if v := value(t, m, "smqd_wal_sticky_failures_total"); v != 0 {
			t.Errorf("smqd_wal_sticky_failures_total %v: a spare failure is retried, not sticky", v)
		}
		ffs.Disarm()
		waitFor(t, "/healthz ok once the segment file can be made", 30*time.Second, func() bool {
			st, b := healthzAt(t, env.addr)
			return st == 200 && b == "ok"
		})
	})
	t.Run("disk full", func(t *testing.T) {
		fs := wal.NewMemFS()
		const reserve = 8 << 20
		env := startEnv(t, envConfig{
			engineOpts: func(o *engine.Options) {
				o.Dir, o.FreeSpaceReserve, o.Stripes = t.TempDir(), reserve, 2
				o.WAL.FS, o.WAL.SegmentBytes, o.WAL.BufferBytes = fs, 256<<10, 256<<10
			},
			serverOpts: func(o *Options) { o.SeparateMetrics = true },
		})
		ln := serveOps(t, env)
		c := env.client()
		c.mustCreate("full")
		c.mustSend("full", "x", "")
		// 7 MB left, under the 8 MB reserve: the next sample (every 100 ms
		// while records are written) finds the disk full, with room left
		// for the log's next segment files (small sends cannot eat 7 MB
		// between two samples).
		fs.SetCapacity(fs.Used() + reserve - 1<<20)
		if !sendUntil(t, c, "full", "y", 100000, "DiskFull") {
			t.Fatal("100,000 sends did not see the disk full")
		}
		both(t, env, ln, 200, "ok (disk full: new messages are refused until space is freed)", false)
		m := scrape(t, opsClient(t, env, ln))
		if v := value(t, m, "smqd_disk_full"); v != 1 {
			t.Errorf("smqd_disk_full %v", v)
		}
		if v := value(t, m, "smqd_disk_full_events_total"); v != 1 {
			t.Errorf("smqd_disk_full_events_total %v", v)
		}
		if free, res := value(t, m, "smqd_disk_free_bytes"), value(t, m, "smqd_disk_reserve_bytes"); res != reserve || free >= res {
			t.Errorf("smqd_disk_free_bytes %v, smqd_disk_reserve_bytes %v on a full disk", free, res)
		}
	})
	t.Run("draining then shutting down", func(t *testing.T) {
		env := startEnv(t, envConfig{skipShutdown: true, serverOpts: func(o *Options) { o.SeparateMetrics = true }})
		ln := serveOps(t, env)
		c := env.client()
		c.mustCreate("q")
		env.srv.Drain()
		both(t, env, ln, 503, "draining: shutting down soon (requests are still served)", false)
		c.mustSend("q", "while draining", "") // still served
		// A send whose body is on its way holds the shutdown's drain.
		finish := sendUnderWay(t, env, c, "q")
		ops := opsClient(t, env, ln)
		waitFor(t, "the send under way", 10*time.Second, func() bool {
			defer ops.close()
			return value(t, scrape(t, ops), "smqd_http_connections") >= 2
		})
		stopped := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			stopped <- env.srv.Shutdown(ctx)
		}()
		waitFor(t, "/healthz 503 \"shutting down\" on the metrics listener", 10*time.Second, func() bool {
			defer ops.close()
			r, err := ops.rawErr(ops.format("GET", "/healthz", "", map[string]string{}))
			if err != nil {
				return false
			}
			return r.status == 503 && string(r.body) == "shutting down"
		})
		finish()
		if err := <-stopped; err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	})
}

// The queue table: smqd_queue_{sent,received,deleted,expired}_total and
// the smqd_messages_*_total sums move on a send, a receive (each receive of
// a message), a delete and a retention expiry; smqd_queue_messages follows
// the states; a deleted queue's series go (no gauge stays behind) while the
// totals keep its counts.
func TestQueueMetricsMoveOnTheirEvents(t *testing.T) {
	env := startEnv(t, envConfig{fakeClock: true})
	c := env.client()
	defer c.close()
	wantStatus(t, c.put("/queues/q", `<Queue xmlns="http://mns.aliyuncs.com/doc/v1/"><MessageRetentionPeriod>60</MessageRetentionPeriod><VisibilityTimeout>30</VisibilityTimeout></Queue>`), 201)
	c.mustCreate("other")
	for i := range 4 {
		c.mustSend("q", "m"+strconv.Itoa(i), "")
	}
	c.mustSend("q", "late", "<DelaySeconds>10</DelaySeconds>")
	m1 := c.mustReceive("q")
	c.mustReceive("q")
	wantStatus(t, c.del("/queues/q/messages?ReceiptHandle="+m1.ReceiptHandle, ""), 204)

	per := func(m map[string]promSample, name string) float64 {
		t.Helper()
		return value(t, m, name, "queue", "q")
	}
	m := scrape(t, c)
	for _, w := range []struct {
		name string
		got  float64
		want float64
	}{
		{"smqd_queue_sent_total", per(m, "smqd_queue_sent_total"), 5},
		{"smqd_queue_received_total", per(m, "smqd_queue_received_total"), 2},
		{"smqd_queue_deleted_total", per(m, "smqd_queue_deleted_total"), 1},
		{"smqd_queue_expired_total", per(m, "smqd_queue_expired_total"), 0},
		{"smqd_messages_sent_total", value(t, m, "smqd_messages_sent_total"), 5},
		{"smqd_messages_received_total", value(t, m, "smqd_messages_received_total"), 2},
		{"smqd_messages_deleted_total", value(t, m, "smqd_messages_deleted_total"), 1},
		{"smqd_queue_messages active", value(t, m, "smqd_queue_messages", "queue", "q", "state", "active"), 2},
		{"smqd_queue_messages inactive", value(t, m, "smqd_queue_messages", "queue", "q", "state", "inactive"), 1},
		{"smqd_queue_messages delayed", value(t, m, "smqd_queue_messages", "queue", "q", "state", "delayed"), 1},
		{"smqd_messages active", value(t, m, "smqd_messages", "state", "active"), 2},
		{"smqd_queues", value(t, m, "smqd_queues"), 2},
	} {
		if w.got != w.want {
			t.Errorf("%s = %v, want %v", w.name, w.got, w.want)
		}
	}
	// Retention: every message of q is older than its 60 s retention.
	env.clock.Advance(2 * time.Minute)
	waitFor(t, "q's messages expired", 10*time.Second, func() bool {
		return per(scrape(t, c), "smqd_queue_expired_total") == 4
	})
	m = scrape(t, c)
	if v := value(t, m, "smqd_messages_expired_total"); v != 4 {
		t.Errorf("smqd_messages_expired_total %v, want 4", v)
	}
	if v := value(t, m, "smqd_messages", "state", "active") + value(t, m, "smqd_messages", "state", "inactive") + value(t, m, "smqd_messages", "state", "delayed"); v != 0 {
		t.Errorf("%v messages left after every one expired", v)
	}
	// The queue's deletion: its series go, the totals stay.
	wantStatus(t, c.del("/queues/q", ""), 204)
	m = scrape(t, c)
	for key, s := range m {
		if s.labels["queue"] == "q" {
			t.Errorf("series %s stays after its queue was deleted", key)
		}
	}
	if v := value(t, m, "smqd_queues"); v != 1 {
		t.Errorf("smqd_queues %v after a deletion, want 1", v)
	}
	for name, want := range map[string]float64{"smqd_messages_sent_total": 5, "smqd_messages_received_total": 2, "smqd_messages_deleted_total": 1, "smqd_messages_expired_total": 4} {
		if v := value(t, m, name); v != want {
			t.Errorf("%s %v after q's deletion, want %v (kept)", name, v, want)
		}
	}
	// Each receive of a message counts; a received message and a delayed
	// one are not waiting for a receive (the oldest-age gauges).
	wantStatus(t, c.put("/queues/r", `<Queue xmlns="http://mns.aliyuncs.com/doc/v1/"><VisibilityTimeout>30</VisibilityTimeout></Queue>`), 201)
	c.mustSend("r", "again", "")
	c.mustReceive("r")
	c.mustSend("r", "later", "<DelaySeconds>60</DelaySeconds>")
	env.clock.Advance(20 * time.Second)
	m = scrape(t, c)
	if v := value(t, m, "smqd_queue_oldest_message_age_seconds", "queue", "r"); v != 0 {
		t.Errorf("r: oldest waiting message %v s old with one received and one delayed", v)
	}
	if v := value(t, m, "smqd_oldest_message_age_seconds"); v != 0 {
		t.Errorf("oldest waiting message %v s old, none waiting", v)
	}
	env.clock.Advance(11 * time.Second) // the receive's visibility timeout ends
	c.mustReceive("r")
	if v := value(t, scrape(t, c), "smqd_queue_received_total", "queue", "r"); v != 2 {
		t.Errorf("r: smqd_queue_received_total %v after one message was received twice", v)
	}
}

// smqd_queue_long_polls_waiting{queue} and smqd_long_polls_waiting count a
// receive waiting, and fall back to 0 when it ends; the request histogram
// counts a long poll's wait ("long polls count their wait").
func TestLongPollMetrics(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	defer c.close()
	c.mustCreate("w")
	c.mustCreate("idle")
	before := value(t, scrape(t, c), "smqd_http_request_duration_seconds_sum", "op", "ReceiveMessage")
	done := make(chan *response, 1)
	go func() { done <- env.client().get("/queues/w/messages?waitseconds=2") }()
	waitFor(t, "the receive waiting", 10*time.Second, func() bool {
		m := scrape(t, c)
		return value(t, m, "smqd_queue_long_polls_waiting", "queue", "w") == 1 && value(t, m, "smqd_long_polls_waiting") == 1
	})
	if v := value(t, scrape(t, c), "smqd_queue_long_polls_waiting", "queue", "idle"); v != 0 {
		t.Errorf("idle: %v waiting", v)
	}
	wantError(t, <-done, 404, "MessageNotExist")
	m := scrape(t, c)
	if v := value(t, m, "smqd_queue_long_polls_waiting", "queue", "w"); v != 0 {
		t.Errorf("w: %v waiting after the receive ended", v)
	}
	if v := value(t, m, "smqd_long_polls_waiting"); v != 0 {
		t.Errorf("%v waiting after the receive ended", v)
	}
	// The receive waited its 2 s (the server's wait, a lower bound by
	// construction, not a timing).
	if sum := value(t, m, "smqd_http_request_duration_seconds_sum", "op", "ReceiveMessage") - before; sum < 2 {
		t.Errorf("the ReceiveMessage histogram took %v s for a receive that waited 2 s", sum)
	}
}

// The HTTP table: the request histogram's buckets are the documented
// 100 µs to 30 s for every operation; smqd_http_errors_total has a series
// for every code of the error table from 0, and counts an error answer by
// its code; /healthz and /metrics on the API listener count as Healthz and
// Metrics; label pairs are written in name order, le last.
func TestHTTPMetricsClaims(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	defer c.close()
	r := c.send("GET", "/metrics", "", map[string]string{})
	m := parseProm(t, string(r.body))
	want := []string{"0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "30", "+Inf"}
	for o := op(0); o < numOps; o++ {
		var got []string
		for _, s := range m {
			if s.name == "smqd_http_request_duration_seconds_bucket" && s.labels["op"] == o.String() {
				got = append(got, s.labels["le"])
			}
		}
		if len(got) != len(want) {
			t.Errorf("op %s: %d buckets %v, want %v", o, len(got), got, want)
			continue
		}
		for _, le := range want {
			value(t, m, "smqd_http_request_duration_seconds_bucket", "op", o.String(), "le", le)
		}
	}
	for code := errCode(0); code < numCodes; code++ {
		if v := value(t, m, "smqd_http_errors_total", "code", code.String()); v != 0 {
			t.Errorf("smqd_http_errors_total{code=%q} %v before any error", code, v)
		}
	}
	wantError(t, c.get("/queues/nosuch"), 404, "QueueNotExist")
	c.send("GET", "/healthz", "", map[string]string{})
	r = c.send("GET", "/metrics", "", map[string]string{})
	m = parseProm(t, string(r.body))
	if v := value(t, m, "smqd_http_errors_total", "code", "QueueNotExist"); v != 1 {
		t.Errorf("smqd_http_errors_total{code=QueueNotExist} %v after one", v)
	}
	if v := value(t, m, "smqd_http_responses_total", "op", "GetQueueAttributes", "class", "4xx"); v != 1 {
		t.Errorf("GetQueueAttributes 4xx %v", v)
	}
	if v := value(t, m, "smqd_http_responses_total", "op", "Healthz", "class", "2xx"); v != 1 {
		t.Errorf("Healthz 2xx %v", v)
	}
	if v := value(t, m, "smqd_http_responses_total", "op", "Metrics", "class", "2xx"); v != 1 {
		t.Errorf("Metrics 2xx %v (the first scrape)", v)
	}
	text := string(r.body)
	for _, line := range []string{
		`smqd_http_responses_total{class="4xx",op="GetQueueAttributes"} 1`,
		`smqd_http_request_duration_seconds_bucket{op="Healthz",le="30"} 1`,
	} {
		if !strings.Contains(text, "\n"+line+"\n") {
			t.Errorf("no line %s", line)
		}
	}
}

// smqd_http_accept_waits_total counts the API listener's stops at
// --max-conns, smqd_http_connections the connections it holds and
// smqd_http_connections_max the cap; the metrics listener's own
// connections are not in them.
func TestAcceptWaitsMetric(t *testing.T) {
	const max = 2
	env := startEnv(t, envConfig{serverOpts: func(o *Options) { o.MaxConns = max; o.SeparateMetrics = true }})
	ln := serveOps(t, env)
	ops := opsClient(t, env, ln)
	defer ops.close()
	m := scrape(t, ops)
	if v := value(t, m, "smqd_http_accept_waits_total"); v != 0 {
		t.Fatalf("smqd_http_accept_waits_total %v before the cap", v)
	}
	if v := value(t, m, "smqd_http_connections_max"); v != max {
		t.Errorf("smqd_http_connections_max %v, want %d", v, max)
	}
	for range max {
		h := env.client()
		wantStatus(t, h.get("/queues"), 200) // kept alive: holds a slot
		defer h.close()
	}
	waitFor(t, "an accept wait counted", 30*time.Second, func() bool {
		defer ops.close()
		return value(t, scrape(t, ops), "smqd_http_accept_waits_total") >= 1
	})
	if v := value(t, scrape(t, ops), "smqd_http_connections"); v != max {
		t.Errorf("smqd_http_connections %v with %d API connections held", v, max)
	}
}

// smqd_push_subscriptions, smqd_push_backlog and
// smqd_push_notifications_total{outcome}: an HTTP subscription is counted,
// a push answered 2xx is delivered, each failed attempt failed.
func TestPushMetrics(t *testing.T) {
	okc, failc := make(chan struct{}, 16), make(chan struct{}, 16)
	ep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/bad") {
			w.WriteHeader(500)
			select {
			case failc <- struct{}{}:
			default:
			}
			return
		}
		w.WriteHeader(204)
		select {
		case okc <- struct{}{}:
		default:
		}
	}))
	defer ep.Close()
	env := startEnv(t, envConfig{})
	c := env.client()
	defer c.close()
	wantStatus(t, c.put("/topics/t", ""), 201)
	wantStatus(t, c.put("/topics/t/subscriptions/good", subBody(ep.URL+"/good", "")), 201)
	m := scrape(t, c)
	if v := value(t, m, "smqd_push_subscriptions"); v != 1 {
		t.Errorf("smqd_push_subscriptions %v with one HTTP subscription", v)
	}
	for _, o := range []string{"delivered", "failed", "dead_lettered", "discarded"} {
		if v := value(t, m, "smqd_push_notifications_total", "outcome", o); v != 0 {
			t.Errorf("%s %v before any publish", o, v)
		}
	}
	wantStatus(t, c.post("/topics/t/messages", pubBody("hello", "")), 201)
	<-okc
	waitFor(t, "the push counted delivered", 10*time.Second, func() bool {
		return value(t, scrape(t, c), "smqd_push_notifications_total", "outcome", "delivered") == 1
	})
	wantStatus(t, c.put("/topics/t/subscriptions/bad", subBody(ep.URL+"/bad", "")), 201)
	wantStatus(t, c.post("/topics/t/messages", pubBody("again", "")), 201)
	<-failc
	waitFor(t, "the failed push counted", 10*time.Second, func() bool {
		return value(t, scrape(t, c), "smqd_push_notifications_total", "outcome", "failed") >= 1
	})
	m = scrape(t, c)
	if v := value(t, m, "smqd_push_subscriptions"); v != 2 {
		t.Errorf("smqd_push_subscriptions %v with two", v)
	}
	if v := value(t, m, "smqd_push_backlog"); v < 1 {
		t.Errorf("smqd_push_backlog %v with a push being retried", v)
	}
	if v := value(t, m, "smqd_push_notifications_total", "outcome", "delivered"); v != 2 {
		t.Errorf("delivered %v, want 2 (good got both publishes)", v)
	}
}

// smqd_disk_free_bytes and smqd_disk_reserve_bytes: with the guard off
// (--free-space-reserve -1) both are 0; with it on (the sized default) the
// reserve is what the engine sizes and the free bytes are sampled.
func TestDiskGauges(t *testing.T) {
	t.Run("guard off", func(t *testing.T) {
		env := startEnv(t, envConfig{engineOpts: func(o *engine.Options) { o.Dir = t.TempDir(); o.FreeSpaceReserve = -1 }})
		c := env.client()
		c.mustCreate("q")
		c.mustSend("q", "x", "")
		m := scrape(t, c)
		if free, reserve := value(t, m, "smqd_disk_free_bytes"), value(t, m, "smqd_disk_reserve_bytes"); free != 0 || reserve != 0 {
			t.Errorf("guard off: smqd_disk_free_bytes %v, smqd_disk_reserve_bytes %v, want 0 and 0", free, reserve)
		}
	})
	t.Run("guard on", func(t *testing.T) {
		var eo engine.Options
		env := startEnv(t, envConfig{engineOpts: func(o *engine.Options) { o.Dir = t.TempDir(); eo = *o }})
		c := env.client()
		c.mustCreate("q")
		c.mustSend("q", "x", "")
		m := scrape(t, c)
		if reserve, want := value(t, m, "smqd_disk_reserve_bytes"), float64(engine.SizedFreeSpaceReserve(eo)); reserve != want || reserve <= 0 {
			t.Errorf("smqd_disk_reserve_bytes %v, want %v", reserve, want)
		}
		if v := value(t, m, "smqd_disk_free_bytes"); v <= 0 {
			t.Errorf("smqd_disk_free_bytes %v after a write", v)
		}
	})
}

// Every label the Grafana dashboard selects on or groups by (but job,
// which Prometheus adds, and a histogram's le) is a label of the family it
// names: TestGrafanaDashboardMetrics checks the names only, so a renamed
// label left the panel empty with every test passing.
func TestGrafanaDashboardLabels(t *testing.T) {
	raw, err := os.ReadFile("../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct{ Panels []dashPanel }
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	env := startEnv(t, envConfig{})
	c := env.client()
	c.mustCreate("q")
	c.mustSend("q", "x", "")
	wantError(t, c.get("/queues/nosuch"), 404, "QueueNotExist")
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(string(c.send("GET", "/metrics", "", map[string]string{}).body)))
	if err != nil {
		t.Fatal(err)
	}
	labelsOf := func(name string) map[string]bool {
		base := name
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if f, ok := strings.CutSuffix(name, suf); ok && mfs[f] != nil {
				base = f
			}
		}
		mf := mfs[base]
		if mf == nil {
			return nil
		}
		out := map[string]bool{"job": true, "instance": true}
		if strings.HasSuffix(name, "_bucket") {
			out["le"] = true
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				out[lp.GetName()] = true
			}
		}
		return out
	}
	sel := regexp.MustCompile(`\b((?:smqd|process|go)_[a-z_]+)(\{[^}]*\})?`)
	matcher := regexp.MustCompile(`([a-zA-Z_]+)\s*(?:=~|!~|!=|=)`)
	by := regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	checked := 0
	for _, panel := range flattenPanels(dash.Panels) {
		for _, target := range panel.Targets {
			var names []string
			for _, s := range sel.FindAllStringSubmatch(target.Expr, -1) {
				have := labelsOf(s[1])
				if have == nil {
					continue // TestGrafanaDashboardMetrics reports a missing family
				}
				names = append(names, s[1])
				for _, l := range matcher.FindAllStringSubmatch(s[2], -1) {
					checked++
					if !have[l[1]] {
						t.Errorf("panel %q: %s has no label %q: %s", panel.Title, s[1], l[1], target.Expr)
					}
				}
			}
			for _, g := range by.FindAllStringSubmatch(target.Expr, -1) {
				for _, l := range strings.Split(g[1], ",") {
					l = strings.TrimSpace(l)
					checked++
					found := false
					for _, n := range names {
						if labelsOf(n)[l] {
							found = true
						}
					}
					if !found {
						t.Errorf("panel %q groups by %q, a label of none of %v: %s", panel.Title, l, names, target.Expr)
					}
				}
			}
		}
	}
	if checked < 30 {
		t.Errorf("only %d label references checked", checked)
	}
}

// dashPanel is a dashboard panel; a collapsed row holds its panels.
type dashPanel struct {
	Title   string
	Targets []struct{ Expr string }
	Panels  []dashPanel
}

// flattenPanels returns ps and the panels of their rows, depth first.
func flattenPanels(ps []dashPanel) []dashPanel {
	var out []dashPanel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, flattenPanels(p.Panels)...)
	}
	return out
}

// smqd_storage_reopens_total counts a single node's reopen in place, and
// the smqd_messages_*_total sums neither fall nor count again what the
// reopened broker's queues bring back.
func TestReopenMetrics(t *testing.T) {
	env, ffs := reopeningEnv(t)
	c := env.client()
	c.mustCreate("r")
	for i := range 10 {
		c.mustSend("r", "m"+strconv.Itoa(i), "")
	}
	c.mustReceive("r")
	m := scrape(t, c)
	if v := value(t, m, "smqd_storage_reopens_total"); v != 0 {
		t.Fatalf("smqd_storage_reopens_total %v", v)
	}
	sentBefore := value(t, m, "smqd_messages_sent_total")
	ffs.FailSyncs(syscall.EIO)
	wantError(t, c.post("/queues/r/messages", sendBody("during", "")), 500, "InternalError")
	ffs.Disarm()
	waitFor(t, "the reopen", 30*time.Second, func() bool {
		r := c.post("/queues/r/messages", sendBody("after", ""))
		return r.status == 201
	})
	m = scrape(t, c)
	if v := value(t, m, "smqd_storage_reopens_total"); v != 1 {
		t.Errorf("smqd_storage_reopens_total %v after a reopen, want 1", v)
	}
	// 10 sends before, 1 after (the failed one may or may not count).
	if v := value(t, m, "smqd_messages_sent_total"); v < sentBefore+1 || v > sentBefore+2 {
		t.Errorf("smqd_messages_sent_total %v after the reopen, was %v before and one send since", v, sentBefore)
	}
	t.Logf("after the reopen: sent total %v, per-queue %v, checkpoints %v, wal records %v, sticky %v",
		value(t, m, "smqd_messages_sent_total"), value(t, m, "smqd_queue_sent_total", "queue", "r"),
		value(t, m, "smqd_checkpoints_total"), value(t, m, "smqd_wal_records_total"), value(t, m, "smqd_wal_sticky_failures_total"))
}

// On a cluster node the storage counters (smqd_wal_*_total,
// smqd_checkpoints_total, the WAL histograms) and the push counters are
// sums over the node's shard brokers. A shard's rebuild (a step-down that
// left uncommitted changes) replaces its broker: the counters must not fall
// ("Counters stay monotonic across a shard's broker rebuilds"), for a fall
// of one shard's share in a sum is read by rate() as a reset of the whole
// sum, a spike of everything the other shards counted.
func TestClusterStorageCountersSurviveARebuild(t *testing.T) {
	c := startCluster(t, 3, 2)
	c.ready()
	c.settled() // the lead picked below stays: no balancer hand-over moves it
	wantStatus(t, c.envs[0].client().put("/queues/rb", ""), 201)
	li := c.leaderOf("rb")
	cl := c.envs[li].client()
	for i := range 30 {
		cl.mustSend("rb", fmt.Sprint(i), "")
	}
	counters := []string{"smqd_wal_records_total", "smqd_wal_bytes_total", "smqd_wal_writes_total", "smqd_wal_fsyncs_total", "smqd_wal_fsync_duration_seconds_count", "smqd_wal_batch_records_count"}
	shard := ""
	if b, _, err := c.nodes[li].Route("rb"); err == nil && b != nil {
		for i, sb := range c.nodes[li].Brokers() {
			if sb == b {
				shard = fmt.Sprint(i)
			}
		}
	}
	if shard == "" {
		t.Fatal("rb's shard not found")
	}
	before := scrape(t, cl)
	// Alone, the leader takes a send it can never commit, then steps down
	// and rebuilds the shard's broker. A sender keeps a send in flight from
	// before the last follower stops: a first send made after the stop
	// came after the leader's step-down (CheckQuorum, an election timeout
	// of 200 ms) on a loaded machine, found no leader, left nothing to
	// roll back and so no rebuild (seen: "0 rebuilds").
	var others []int
	for i := range c.nodes {
		if i != li {
			others = append(others, i)
		}
	}
	c.stop(others[0])
	stopSends, sending := make(chan struct{}), make(chan struct{})
	defer func() { close(stopSends); <-sending }()
	go func() {
		defer close(sending)
		sc := c.envs[li].client()
		defer sc.close()
		for {
			select {
			case <-stopSends:
				return
			default:
			}
			sc.doErr(req{method: "POST", target: "/queues/rb/messages", body: sendBody("maybe never committed", "")}) //nolint:errcheck // the rebuild is the check
		}
	}()
	c.stop(others[1])
	clusterEventually(t, "the lone leader's rebuild", func() error {
		if v := value(t, scrape(t, cl), "smqd_cluster_shard_rebuilds_total", "shard", shard); v < 1 {
			return fmt.Errorf("%v rebuilds", v)
		}
		return nil
	})
	after := scrape(t, cl)
	for _, name := range counters {
		b, a := value(t, before, name), value(t, after, name)
		t.Logf("%s: %v before the rebuild, %v after", name, b, a)
		if a < b {
			t.Errorf("%s fell from %v to %v at shard %s's rebuild", name, b, a, shard)
		}
	}
}

// slowCollector counts its gathers and takes at least delay over each.
type slowCollector struct {
	countingCollector
	delay time.Duration
}

func (c *slowCollector) Collect(ch chan<- prometheus.Metric) {
	time.Sleep(c.delay)
	c.countingCollector.Collect(ch)
}

// The API listener's scrapes reuse a gather only on a node whose last
// gather walked 1,000 queues or more, for 9 times its duration and at most
// 2 s; the metrics listener (--metrics-listen) gathers at every scrape.
func TestMetricsGatherReuseBounds(t *testing.T) {
	queues := func(t *testing.T, env *testEnv, from, to int) {
		for i := from; i < to; i++ {
			if _, err := env.broker.CreateQueue(fmt.Sprintf("queue-%05d", i), engine.DefaultQueueConfig()); err != nil {
				t.Fatal(err)
			}
		}
	}
	scrapes := func(t *testing.T, c *client, n int) {
		t.Helper()
		for range n {
			if r := c.do(req{method: "GET", target: "/metrics", noSign: true}); r.status != 200 {
				t.Fatalf("/metrics: %s", r)
			}
		}
	}
	t.Run("threshold", func(t *testing.T) {
		cc := &countingCollector{desc: prometheus.NewDesc("claims_gathers", "gathers", nil, nil)}
		env := startEnv(t, envConfig{fakeClock: true, serverOpts: func(o *Options) { o.Collectors = append(o.Collectors, cc) }})
		queues(t, env, 0, 999)
		c := env.client()
		defer c.close()
		scrapes(t, c, 3)
		if n := cc.n.Load(); n != 3 {
			t.Fatalf("3 scrapes at one instant with 999 queues gathered %d times, want 3 (never reused)", n)
		}
		queues(t, env, 999, 1000)
		scrapes(t, c, 3) // the first walks 1,000 queues: the next two reuse it
		if n := cc.n.Load(); n != 4 {
			t.Fatalf("3 scrapes at one instant with 1,000 queues gathered %d times, want 1", n-3)
		}
	})
	t.Run("at most 2 s", func(t *testing.T) {
		cc := &slowCollector{countingCollector{desc: prometheus.NewDesc("claims_gathers", "gathers", nil, nil)}, 300 * time.Millisecond}
		env := startEnv(t, envConfig{fakeClock: true, serverOpts: func(o *Options) { o.Collectors = append(o.Collectors, cc) }})
		queues(t, env, 0, 1000)
		c := env.client()
		defer c.close()
		scrapes(t, c, 1) // at least 300 ms: 9 times that is over 2 s
		env.clock.Advance(1900 * time.Millisecond)
		scrapes(t, c, 1)
		if n := cc.n.Load(); n != 1 {
			t.Fatalf("a scrape 1.9 s after a 300 ms gather gathered again (%d gathers)", n)
		}
		env.clock.Advance(101 * time.Millisecond)
		scrapes(t, c, 1)
		if n := cc.n.Load(); n != 2 {
			t.Fatalf("a scrape 2.001 s after a gather reused it (%d gathers)", n)
		}
	})
	t.Run("metrics listener", func(t *testing.T) {
		cc := &countingCollector{desc: prometheus.NewDesc("claims_gathers", "gathers", nil, nil)}
		env := startEnv(t, envConfig{fakeClock: true, serverOpts: func(o *Options) {
			o.Collectors = append(o.Collectors, cc)
			o.SeparateMetrics = true
		}})
		queues(t, env, 0, 1000)
		ops := opsClient(t, env, serveOps(t, env))
		defer ops.close()
		scrapes(t, ops, 3)
		if n := cc.n.Load(); n != 3 {
			t.Fatalf("3 scrapes of the metrics listener at one instant gathered %d times, want 3", n)
		}
	})
}

// carry (a cluster node's storage and push counters across its shard
// brokers' replacements): a replaced broker's counters as of the last
// scrape stay in the sums, and so do those of a shard with no broker for
// a while; a broker seen again adds nothing.
func TestCarryKeepsReplacedBrokersCounters(t *testing.T) {
	open := func() *engine.Broker {
		b, err := engine.Open(engine.Options{Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	sample := func(b *engine.Broker, records uint64, delivered int64) brokerSample {
		var st engine.StorageStats
		st.WAL.Records, st.Checkpoints = records, int64(records)
		return brokerSample{b: b, storage: st, push: engine.PushStats{Delivered: delivered}}
	}
	a0, b0, b1 := open(), open(), open()
	c := &brokerCollector{seen: map[string]seenQueue{}}
	for i, s := range []struct {
		now           []brokerSample
		wantRecords   uint64 // the node's sum: the brokers' and carry's
		wantDelivered int64
	}{
		{[]brokerSample{sample(a0, 100, 1), sample(b0, 50, 2)}, 150, 3},
		{[]brokerSample{sample(a0, 110, 1), sample(b0, 60, 2)}, 170, 3},
		{[]brokerSample{sample(a0, 120, 1), {}}, 180, 3},               // shard 1 being replaced: its last counts held
		{[]brokerSample{sample(a0, 130, 1), sample(b1, 5, 0)}, 195, 3}, // its new broker counts from 0
		{[]brokerSample{sample(a0, 130, 1), sample(b1, 9, 1)}, 199, 4},
	} {
		held, push := c.carry(s.now)
		records, delivered := held.WAL.Records, push.Delivered
		for _, x := range s.now {
			records += x.storage.WAL.Records
			delivered += x.push.Delivered
		}
		if records != s.wantRecords || delivered != s.wantDelivered {
			t.Fatalf("scrape %d: records %d, delivered %d; want %d and %d", i+1, records, delivered, s.wantRecords, s.wantDelivered)
		}
		if held.Checkpoints != int64(held.WAL.Records) {
			t.Fatalf("scrape %d: checkpoints carried %d, records %d", i+1, held.Checkpoints, held.WAL.Records)
		}
	}
}

// addStorageCounters carries every counter of the WAL's stats (all of its
// integer fields are counters): one added to wal.Stats later without a
// line there would fall at a shard's rebuild again.
func TestAddStorageCountersCarriesEveryWALCounter(t *testing.T) {
	var one engine.StorageStats
	v := reflect.ValueOf(&one.WAL).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Uint64 {
			f.SetUint(1)
		}
	}
	var sum engine.StorageStats
	addStorageCounters(&sum, one)
	got := reflect.ValueOf(sum.WAL)
	for i := range got.NumField() {
		if f := got.Field(i); f.Kind() == reflect.Uint64 && f.Uint() != 1 {
			t.Errorf("wal.Stats.%s is not carried across a shard's rebuild (addStorageCounters)", got.Type().Field(i).Name)
		}
	}
}

// "The _total totals stay monotonic when queues are deleted (a deleted
// queue's counts, as of the last scrape before its deletion, are kept)":
// also when the queue is made again under the same name and counts past
// its old figures before the next scrape.
func TestTotalsKeepADeletedQueueRecreatedBetweenScrapes(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	defer c.close()
	c.mustCreate("q")
	c.mustSend("q", "one", "")
	if v := value(t, scrape(t, c), "smqd_messages_sent_total"); v != 1 {
		t.Fatalf("sent total %v, want 1", v)
	}
	wantStatus(t, c.del("/queues/q", ""), 204)
	c.mustCreate("q")
	c.mustSend("q", "two", "")
	c.mustSend("q", "three", "")
	if v := value(t, scrape(t, c), "smqd_messages_sent_total"); v != 3 {
		t.Errorf("sent total %v after q was deleted with 1 sent and made again with 2, want 3", v)
	}
}

// smqd_cluster_healthy is "1 while this node can serve every shard
// (/healthz ready)": on a one-node cluster whose shard log cannot make its
// next segment file, /healthz and the gauge agree.
func TestClusterHealthyGaugeFollowsHealthz(t *testing.T) {
	addr, err := ports.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	ffs := wal.NewFaultFS(wal.OSFS())
	eo := engine.Options{Stripes: 2, FreeSpaceReserve: -1}
	eo.WAL.SegmentBytes, eo.WAL.BufferBytes, eo.WAL.FS = 256<<10, 256<<10, ffs
	log := testLogger(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	node, err := cluster.Start(cluster.Config{NodeID: 1, RaftListen: addr, Peers: map[uint64]string{1: addr},
		APIAddr: ln.Addr().String(), Shards: 1, Dir: t.TempDir(), Key: clusterTestKey, Engine: eo, SyncAlways: true,
		Tick: 20 * time.Millisecond, ElectionTicks: 10, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	srv, err := NewCluster(node, Options{Credentials: map[string]string{testKeyID: testSecret}, Logger: log, ClusterLeaderWait: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	env := &testEnv{t: t, srv: srv, addr: ln.Addr().String(), now: time.Now, served: make(chan error, 1)}
	go func() { env.served <- srv.Serve(ln) }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}()
	clusterEventually(t, "the shard led", node.Health)
	c := env.client()
	defer c.close()
	c.mustCreate("q")
	ffs.FailPreallocate(syscall.ENOSPC)
	body := strings.Repeat("x", 4000)
	refused := false
	for i := 0; i < 1000 && !refused; i++ {
		refused = c.post("/queues/q/messages", sendBody(body, "")).status != 201
	}
	if !refused {
		t.Fatal("4 MB of sends never waited for a segment file")
	}
	// While the fault lasts the shard cannot serve: both say so.
	st, hb := healthzAt(t, env.addr)
	if st != 503 || !strings.HasPrefix(hb, "unhealthy: ") {
		t.Fatalf("/healthz %d %q with the shard's log out of segment files", st, hb)
	}
	if healthy := value(t, scrape(t, c), "smqd_cluster_healthy"); healthy != 0 {
		t.Errorf("/healthz %d %q but smqd_cluster_healthy %v", st, hb, healthy)
	}
	ffs.Disarm()
	// The node's disk-full mark (from the shard's ENOSPC) is polled every
	// second: "ok (disk full: ...)" may come first.
	clusterEventually(t, "/healthz ok and smqd_cluster_healthy 1 once the shard is back", func() error {
		st, hb := healthzAt(t, env.addr)
		healthy := value(t, scrape(t, c), "smqd_cluster_healthy")
		if st != 200 || hb != "ok" || healthy != 1 {
			return fmt.Errorf("/healthz %d %q, smqd_cluster_healthy %v", st, hb, healthy)
		}
		return nil
	})
}

// sendUntil sends body to queue up to n times, until a send is answered
// 503 code (true); any answer but 201 and that fails the test.
func sendUntil(t *testing.T, c *client, queue, body string, n int, code string) bool {
	t.Helper()
	for i := 0; i < n; i++ {
		r := c.post("/queues/"+queue+"/messages", sendBody(body, ""))
		switch r.status {
		case 201:
		case 503:
			wantError(t, r, 503, code)
			return true
		default:
			t.Fatalf("send %d: %s", i, r)
		}
	}
	return false
}

// smqd_http_connections is the connections the API listener holds, not
// the slots of the cap: the listener's pending Accept takes its slot
// before a connection arrives, and a server with one client reported 2
// connections, an idle one 1 (metrics audit, 2026-12-07).
func TestConnectionsMetricCountsConnections(t *testing.T) {
	env := startEnv(t, envConfig{serverOpts: func(o *Options) { o.SeparateMetrics = true }})
	ln := serveOps(t, env)
	ops := opsClient(t, env, ln)
	defer ops.close()
	h := env.client()
	wantStatus(t, h.get("/queues"), 200) // kept alive: the one API connection
	if v := value(t, scrape(t, ops), "smqd_http_connections"); v != 1 {
		t.Errorf("smqd_http_connections %v with 1 API connection open, want 1", v)
	}
	h.close()
	// The server sees the close when it next reads the connection.
	waitFor(t, "smqd_http_connections 0 with no API connection open", 30*time.Second, func() bool {
		defer ops.close()
		return value(t, scrape(t, ops), "smqd_http_connections") == 0
	})
}

// A request fasthttp could not read (a malformed request line, headers
// over the read buffer or too slow) is answered 400 before it is routed: counted in smqd_http_errors_total, it was missing from
// smqd_http_responses_total, so the errors by code outnumbered the error
// responses (metrics audit, 2026-12-07). It counts as op Unknown.
func TestUnreadableRequestCountsAsAResponse(t *testing.T) {
	env := startEnv(t, envConfig{})
	c, err := net.Dial("tcp", env.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("GARBAGE\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 400 ") {
		t.Fatalf("answer %q, %v; want a 400", line, err)
	}
	h := env.client()
	defer h.close()
	m := scrape(t, h)
	if v := value(t, m, "smqd_http_errors_total", "code", "InvalidArgument"); v != 1 {
		t.Errorf("smqd_http_errors_total{code=InvalidArgument} %v, want 1", v)
	}
	if s, ok := m[seriesKey("smqd_http_responses_total", map[string]string{"op": "Unknown", "class": "4xx"})]; !ok || s.value != 1 {
		t.Errorf("smqd_http_responses_total{op=Unknown,class=4xx} %v (present %v), want 1", s.value, ok)
	}
}
