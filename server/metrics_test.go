package server

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/engine/cluster"
)

// promSample is one sample of the exposition.
type promSample struct {
	name   string
	labels map[string]string
	value  float64
}

// parseProm parses a whole exposition with the Prometheus library's own
// text parser (expfmt), which refuses malformed lines, samples without
// their family, repeated families and histograms whose buckets do not add
// up, and flattens it into samples by series key (name plus sorted
// labels): histograms as _bucket{le}, _sum and _count, summaries as
// {quantile}, _sum and _count. It also checks what the parser lets pass:
// counters are named *_total and not negative, no series repeats, every
// family has help text, and the exposition ends with a newline.
func parseProm(t *testing.T, text string) map[string]promSample {
	t.Helper()
	if !strings.HasSuffix(text, "\n") {
		t.Fatal("metrics text does not end with a newline")
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("the Prometheus text parser refuses the exposition: %v", err)
	}
	out := map[string]promSample{}
	add := func(name string, labels map[string]string, v float64) {
		key := seriesKey(name, labels)
		if _, dup := out[key]; dup {
			t.Fatalf("series %s repeated", key)
		}
		out[key] = promSample{name: name, labels: labels, value: v}
	}
	for name, mf := range mfs {
		if mf.GetHelp() == "" {
			t.Errorf("family %s has no help", name)
		}
		if mf.GetType() == dto.MetricType_COUNTER && !strings.HasSuffix(name, "_total") {
			t.Errorf("counter %s does not end in _total", name)
		}
		for _, m := range mf.GetMetric() {
			labels := func(extra ...string) map[string]string {
				l := map[string]string{}
				for _, lp := range m.GetLabel() {
					l[lp.GetName()] = lp.GetValue()
				}
				for i := 0; i+1 < len(extra); i += 2 {
					l[extra[i]] = extra[i+1]
				}
				return l
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				if m.GetCounter().GetValue() < 0 {
					t.Errorf("negative counter %s %v", name, labels())
				}
				add(name, labels(), m.GetCounter().GetValue())
			case dto.MetricType_GAUGE:
				add(name, labels(), m.GetGauge().GetValue())
			case dto.MetricType_UNTYPED:
				add(name, labels(), m.GetUntyped().GetValue())
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				inf := false
				prev := uint64(0)
				for _, b := range h.GetBucket() {
					if b.GetCumulativeCount() < prev {
						t.Errorf("%s: buckets not cumulative", name)
					}
					prev = b.GetCumulativeCount()
					le := strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)
					if math.IsInf(b.GetUpperBound(), 1) {
						le, inf = "+Inf", true
						if b.GetCumulativeCount() != h.GetSampleCount() {
							t.Errorf("%s: +Inf bucket %d, count %d", name, b.GetCumulativeCount(), h.GetSampleCount())
						}
					}
					add(name+"_bucket", labels("le", le), float64(b.GetCumulativeCount()))
				}
				if !inf {
					// The parser folds the +Inf bucket into the count.
					add(name+"_bucket", labels("le", "+Inf"), float64(h.GetSampleCount()))
				}
				add(name+"_sum", labels(), h.GetSampleSum())
				add(name+"_count", labels(), float64(h.GetSampleCount()))
			case dto.MetricType_SUMMARY:
				sm := m.GetSummary()
				for _, q := range sm.GetQuantile() {
					add(name, labels("quantile", strconv.FormatFloat(q.GetQuantile(), 'g', -1, 64)), q.GetValue())
				}
				add(name+"_sum", labels(), sm.GetSampleSum())
				add(name+"_count", labels(), float64(sm.GetSampleCount()))
			default:
				t.Errorf("family %s of type %v", name, mf.GetType())
			}
		}
	}
	return out
}

func seriesKey(name string, labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(name)
	for _, k := range keys {
		b.WriteString("|" + k + "=" + labels[k])
	}
	return b.String()
}

func scrape(t *testing.T, c *client) map[string]promSample {
	t.Helper()
	r := c.send("GET", "/metrics", "", map[string]string{})
	if r.status != 200 {
		t.Fatalf("metrics: %s", r)
	}
	return parseProm(t, string(r.body))
}

// value returns the value of a series given as name and label pairs; it
// fails the test if the series is missing.
func value(t *testing.T, m map[string]promSample, name string, labels ...string) float64 {
	t.Helper()
	l := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		l[labels[i]] = labels[i+1]
	}
	s, ok := m[seriesKey(name, l)]
	if !ok {
		t.Fatalf("no series %s %v", name, labels)
	}
	return s.value
}

// Durable mode: the storage metrics of engine.StorageStats, with the WAL's
// fsync latency and group-commit batch histograms, reach /metrics.
func TestStorageMetrics(t *testing.T) {
	env := startEnv(t, envConfig{engineOpts: func(o *engine.Options) {
		o.Dir = t.TempDir()
		o.CheckpointInterval = 20 * time.Millisecond
	}})
	c := env.client()
	c.mustCreate("q")
	for i := 0; i < 5; i++ {
		c.mustSend("q", "body "+strconv.Itoa(i), "")
	}
	c.mustReceive("q")

	var m map[string]promSample
	deadline := time.Now().Add(10 * time.Second)
	for {
		m = scrape(t, c)
		if value(t, m, "smqd_checkpoints_total") >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	st := env.broker.Stats().Storage

	if v := value(t, m, "smqd_storage_durable"); v != 1 {
		t.Errorf("smqd_storage_durable %v", v)
	}
	for _, name := range []string{"smqd_log_segments", "smqd_log_bytes", "smqd_log_live_bytes", "smqd_log_end_position", "smqd_index_bytes", "smqd_checkpoint_position"} {
		if v := value(t, m, name); v <= 0 {
			t.Errorf("%s = %v, want > 0", name, v)
		}
	}
	if lag := value(t, m, "smqd_checkpoint_lag_bytes"); lag != value(t, m, "smqd_log_end_position")-value(t, m, "smqd_checkpoint_position") {
		t.Errorf("checkpoint lag %v", lag)
	}
	// The start-up of an empty directory: timed, nothing replayed,
	// rewritten or lost (engine TestLostWritebackAcrossRestart checks the
	// figures after a crash).
	if v := value(t, m, "smqd_recovery_duration_seconds"); v <= 0 || v != st.Recovery.Took.Seconds() {
		t.Errorf("smqd_recovery_duration_seconds %v, engine says %v", v, st.Recovery.Took)
	}
	for _, name := range []string{"smqd_recovery_replayed_records", "smqd_recovery_resynced_bytes", "smqd_recovery_lost_messages"} {
		if v := value(t, m, name); v != 0 {
			t.Errorf("%s = %v after starting on an empty directory", name, v)
		}
	}
	// The WAL counters: 5 sends, a create and a receive were appended; the
	// sends were fsynced (--sync always).
	if v := value(t, m, "smqd_wal_records_total"); v < 7 {
		t.Errorf("smqd_wal_records_total %v, want >= 7", v)
	}
	for _, name := range []string{"smqd_wal_payload_bytes_total", "smqd_wal_bytes_total", "smqd_wal_writes_total", "smqd_wal_write_calls_total", "smqd_wal_fsyncs_total"} {
		if v := value(t, m, name); v <= 0 {
			t.Errorf("%s = %v, want > 0", name, v)
		}
	}
	for _, name := range []string{"smqd_wal_compressed_records_total", "smqd_wal_segment_rolls_total", "smqd_wal_append_stalls_total", "smqd_wal_ring_reads_total", "smqd_wal_file_reads_total"} {
		value(t, m, name) // present
	}
	// Compaction has had nothing to do on a fresh log.
	for _, name := range []string{"smqd_compaction_segments_removed_total", "smqd_compaction_relocated_bodies_total", "smqd_compaction_relocated_bytes_total", "smqd_compaction_waiting_segments"} {
		if v := value(t, m, name); v != 0 {
			t.Errorf("%s = %v on a fresh log", name, v)
		}
	}
	// Histograms: the bounds are the WAL's, counts and sums are there.
	fs := st.WAL.FsyncSeconds
	if len(fs.Bounds) < 2 {
		t.Fatalf("engine reports no fsync histogram: %+v", fs)
	}
	for _, b := range fs.Bounds[:len(fs.Bounds)-1] {
		value(t, m, "smqd_wal_fsync_duration_seconds_bucket", "le", strconv.FormatFloat(b, 'g', -1, 64))
	}
	if n := value(t, m, "smqd_wal_fsync_duration_seconds_count"); n < 1 {
		t.Errorf("fsync histogram count %v", n)
	}
	if sum := value(t, m, "smqd_wal_fsync_duration_seconds_sum"); sum <= 0 || sum > 60 {
		t.Errorf("fsync histogram sum %v s", sum)
	}
	value(t, m, "smqd_wal_batch_records_bucket", "le", "1")
	if n := value(t, m, "smqd_wal_batch_records_count"); n < 1 {
		t.Errorf("batch histogram count %v", n)
	}
	if sum := value(t, m, "smqd_wal_batch_records_sum"); sum < 7 {
		t.Errorf("batch histogram sum %v, want >= 7 records", sum)
	}
}

// In-memory mode: the storage families are there, the durable ones at 0,
// and the empty WAL histograms still well-formed (a +Inf bucket of 0).
func TestStorageMetricsInMemory(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	c.mustCreate("q")
	c.mustSend("q", "x", "")
	m := scrape(t, c)
	if v := value(t, m, "smqd_storage_durable"); v != 0 {
		t.Errorf("smqd_storage_durable %v", v)
	}
	for _, name := range []string{"smqd_wal_fsyncs_total", "smqd_checkpoints_total", "smqd_index_bytes", "smqd_checkpoint_lag_bytes"} {
		if v := value(t, m, name); v != 0 {
			t.Errorf("%s = %v in memory", name, v)
		}
	}
	if v := value(t, m, "smqd_wal_fsync_duration_seconds_bucket", "le", "+Inf"); v != 0 {
		t.Errorf("+Inf bucket %v", v)
	}
	if v := value(t, m, "smqd_log_segments"); v < 1 {
		t.Errorf("smqd_log_segments %v", v)
	}
}

// startSeparateMetrics starts a server with SeparateMetrics and serves its
// metrics listener.
func startSeparateMetrics(t *testing.T, cfg envConfig) (*testEnv, net.Listener) {
	t.Helper()
	cfg.serverOpts = func(o *Options) { o.SeparateMetrics = true }
	env := startEnv(t, cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go env.srv.ServeMetrics(ln)
	return env, ln
}

// With SeparateMetrics, /metrics is served only on the ServeMetrics
// listener; /healthz on both; nothing else on the metrics listener.
func TestSeparateMetrics(t *testing.T) {
	env, ln := startSeparateMetrics(t, envConfig{})
	c := env.client()
	c.mustCreate("q")
	wantError(t, c.get("/metrics"), 400, "InvalidRequestURL")
	if r := c.send("GET", "/healthz", "", map[string]string{}); r.status != 200 {
		t.Fatalf("healthz on the API listener: %s", r)
	}
	ops := &client{env: &testEnv{t: t, addr: ln.Addr().String(), now: env.now}}
	r := ops.send("GET", "/metrics", "", map[string]string{})
	if r.status != 200 || !strings.Contains(string(r.body), `smqd_http_responses_total{class="2xx",op="CreateQueue"} 1`) {
		t.Fatalf("metrics listener /metrics: %s", r)
	}
	parseProm(t, string(r.body))
	if r := ops.send("GET", "/healthz", "", map[string]string{}); r.status != 200 || string(r.body) != "ok" {
		t.Fatalf("metrics listener /healthz: %s", r)
	}
	wantError(t, ops.do(req{method: "PUT", target: "/queues/other"}), 400, "InvalidRequestURL")
	if r := c.get("/queues/other"); r.status != 404 {
		t.Fatalf("the metrics listener created a queue: %s", r)
	}
}

// The exposition, parsed whole by the library's parser, carries every
// family smqd wrote by hand before the move to client_golang (same name,
// same type: testdata/metric_families.txt, taken from a scrape of the old
// writer) and the standard process and Go runtime families.
func TestMetricsFamiliesKept(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	c.mustCreate("q")
	c.mustSend("q", "x", "")
	r := c.send("GET", "/metrics", "", map[string]string{})
	if r.status != 200 {
		t.Fatalf("metrics: %s", r)
	}
	if ct := r.header.Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	parseProm(t, string(r.body)) // the whole text, strictly
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(string(r.body)))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/metric_families.txt")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(want)), "\n") {
		name, typ, _ := strings.Cut(line, " ")
		mf, ok := mfs[name]
		if !ok {
			t.Errorf("family %s is gone", name)
			continue
		}
		if got := strings.ToLower(mf.GetType().String()); got != typ {
			t.Errorf("family %s is a %s, was a %s", name, got, typ)
		}
		n++
	}
	if n < 46 {
		t.Errorf("only %d of the old families checked", n)
	}
	for _, name := range []string{"process_resident_memory_bytes", "process_cpu_seconds_total", "process_open_fds", "go_goroutines"} {
		if runtime.GOOS != "linux" && strings.HasPrefix(name, "process_") {
			continue // the library's process collector reads /proc
		}
		mf, ok := mfs[name]
		if !ok || len(mf.GetMetric()) != 1 {
			t.Errorf("no %s", name)
			continue
		}
		if v := mf.GetMetric()[0]; v.GetGauge().GetValue() <= 0 && v.GetCounter().GetValue() <= 0 && name != "process_cpu_seconds_total" {
			t.Errorf("%s = %v", name, v)
		}
	}
	// Per-operation series: a histogram for every operation from the start,
	// a response class once it has been answered.
	m := parseProm(t, string(r.body))
	if v := value(t, m, "smqd_http_responses_total", "op", "SendMessage", "class", "2xx"); v != 1 {
		t.Errorf("SendMessage 2xx = %v", v)
	}
	value(t, m, "smqd_http_request_duration_seconds_count", "op", "PeekMessage")
	if _, ok := m[seriesKey("smqd_http_responses_total", map[string]string{"op": "PeekMessage", "class": "2xx"})]; ok {
		t.Error("a response class series before its first response")
	}
	value(t, m, "smqd_http_errors_total", "code", "QueueNotExist")
}

// backlogEnv makes queues q0..q{n-1} where qi holds i messages.
func backlogEnv(t *testing.T, perQueue string, n int) (*testEnv, *client) {
	env := startEnv(t, envConfig{serverOpts: func(o *Options) { o.MetricsPerQueue = perQueue }})
	for i := range n {
		name := "q" + strconv.Itoa(i)
		if _, err := env.broker.CreateQueue(name, engine.DefaultQueueConfig()); err != nil {
			t.Fatal(err)
		}
		q, _ := env.broker.Queue(name)
		for range i {
			if _, err := q.Send([]engine.SendEntry{{Body: []byte("x")}}, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	return env, env.client()
}

// --metrics-per-queue: all, top:N by backlog, off; the totals are exact in
// every mode, and stay monotonic when a queue is deleted.
func TestMetricsPerQueue(t *testing.T) {
	const n = 6 // 0+1+...+5 = 15 messages
	for _, tc := range []struct {
		mode string
		want []string // queues with series
	}{
		{"all", []string{"q0", "q1", "q2", "q3", "q4", "q5"}},
		{"top:2", []string{"q4", "q5"}},
		{"top:100", []string{"q0", "q1", "q2", "q3", "q4", "q5"}},
		{"off", nil},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			_, c := backlogEnv(t, tc.mode, n)
			m := scrape(t, c)
			var got []string
			for _, s := range m {
				if s.name == "smqd_queue_sent_total" {
					got = append(got, s.labels["queue"])
				}
			}
			sort.Strings(got)
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("per-queue series for %v, want %v", got, tc.want)
			}
			if v := value(t, m, "smqd_metrics_queues_omitted"); v != float64(n-len(tc.want)) {
				t.Errorf("omitted %v", v)
			}
			if v := value(t, m, "smqd_messages", "state", "active"); v != 15 {
				t.Errorf("active total %v, want 15", v)
			}
			if v := value(t, m, "smqd_messages_sent_total"); v != 15 {
				t.Errorf("sent total %v, want 15", v)
			}
			if v := value(t, m, "smqd_queues"); v != n {
				t.Errorf("queues %v", v)
			}
		})
	}
	t.Run("deleted queue", func(t *testing.T) {
		_, c := backlogEnv(t, "off", n)
		scrape(t, c)
		wantStatus(t, c.del("/queues/q5", ""), 204)
		m := scrape(t, c)
		if v := value(t, m, "smqd_messages_sent_total"); v != 15 {
			t.Errorf("sent total %v after deleting q5, want 15 (monotonic)", v)
		}
		if v := value(t, m, "smqd_messages", "state", "active"); v != 10 {
			t.Errorf("active total %v after deleting q5, want 10", v)
		}
		// Deleted and created again between two scrapes.
		wantStatus(t, c.del("/queues/q4", ""), 204)
		c.mustCreate("q4")
		c.mustSend("q4", "y", "")
		if v := value(t, scrape(t, c), "smqd_messages_sent_total"); v != 16 {
			t.Errorf("sent total %v after re-creating q4, want 16", v)
		}
	})
}

// With 10,000 queues the exposition stays small under the default top:100
// (it was 3.8 MB with every queue's series).
func TestMetricsManyQueues(t *testing.T) {
	n := 10000
	if testing.Short() {
		n = 2000
	}
	env := startEnv(t, envConfig{})
	for i := range n {
		if _, err := env.broker.CreateQueue(fmt.Sprintf("q%05d", i), engine.DefaultQueueConfig()); err != nil {
			t.Fatal(err)
		}
	}
	c := env.client()
	r := c.send("GET", "/metrics", "", map[string]string{})
	if r.status != 200 {
		t.Fatalf("metrics: %s", r)
	}
	m := parseProm(t, string(r.body))
	if v := value(t, m, "smqd_metrics_queues_omitted"); v != float64(n-100) {
		t.Errorf("omitted %v", v)
	}
	if len(r.body) > 200<<10 {
		t.Errorf("%d queues: %d bytes of metrics", n, len(r.body))
	}
	t.Logf("%d queues, top:100: %d bytes", n, len(r.body))
}

// Every metric the Grafana dashboard (docs/grafana-dashboard.json) queries
// is in the exposition, so the dashboard cannot silently rot.
func TestGrafanaDashboardMetrics(t *testing.T) {
	raw, err := os.ReadFile("../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard is not JSON: %v", err)
	}
	env := startEnv(t, envConfig{})
	c := env.client()
	c.mustCreate("q")
	body := string(c.send("GET", "/metrics", "", map[string]string{}).body)
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`\b(smqd|process|go)_[a-z_]+`)
	n := 0
	for _, panel := range dash.Panels {
		for _, target := range panel.Targets {
			// In a cluster each node exports the queues it leads, and a
			// queue's series moves with its lead: a per-queue panel adds
			// the nodes' series up by queue, or it shows one node's share.
			if strings.Contains(target.Expr, "smqd_queue_") && !strings.Contains(target.Expr, "by (queue)") {
				t.Errorf("panel %q: per-queue series not aggregated by queue: %s", panel.Title, target.Expr)
			}
			for _, m := range name.FindAllString(target.Expr, -1) {
				n++
				base := m
				for _, suf := range []string{"_bucket", "_sum", "_count"} {
					if f, ok := strings.CutSuffix(m, suf); ok && mfs[f] != nil {
						base = f
					}
				}
				if mfs[base] == nil && (runtime.GOOS == "linux" || !strings.HasPrefix(m, "process_")) {
					t.Errorf("panel %q uses %s, which /metrics does not have", panel.Title, m)
				}
			}
		}
	}
	if n < 30 {
		t.Errorf("only %d metric references found in the dashboard", n)
	}
}

// The oldest waiting message's age, per queue and the largest of all.
func TestMetricsOldestMessageAge(t *testing.T) {
	env := startEnv(t, envConfig{fakeClock: true})
	c := env.client()
	defer c.close()
	c.mustCreate("slow")
	c.mustCreate("fast")
	c.mustSend("slow", "x", "")
	env.clock.Advance(40 * time.Second)
	c.mustSend("fast", "y", "")
	env.clock.Advance(2 * time.Second)
	m := scrape(t, c)
	if v := value(t, m, "smqd_queue_oldest_message_age_seconds", "queue", "slow"); v != 42 {
		t.Errorf("slow: %v, want 42", v)
	}
	if v := value(t, m, "smqd_queue_oldest_message_age_seconds", "queue", "fast"); v != 2 {
		t.Errorf("fast: %v, want 2", v)
	}
	if v := value(t, m, "smqd_oldest_message_age_seconds"); v != 42 {
		t.Errorf("all queues: %v, want 42", v)
	}
	c.mustReceive("slow")
	if v := value(t, scrape(t, c), "smqd_oldest_message_age_seconds"); v != 2 {
		t.Errorf("after slow's message was received: %v, want 2", v)
	}
}

// With SeparateMetrics, a cluster node's /cluster is served on both
// listeners: unsigned on the metrics one (as /metrics), and only to
// signed requests on the API one (smqctl cluster status, the console).
// (It was refused on the API listener and unknown on the metrics one, so
// it was served nowhere.)
func TestClusterStatusWithSeparateMetrics(t *testing.T) {
	c := startCluster(t, 1, 1, func(c *clusterEnv) {
		c.srvOpts = func(o *Options) { o.SeparateMetrics = true }
	})
	c.ready()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go c.envs[0].srv.ServeMetrics(ln)
	api := c.envs[0].client()
	ops := &client{env: &testEnv{t: t, addr: ln.Addr().String(), now: time.Now}}
	status := func(where string, r *response) {
		t.Helper()
		var st cluster.Status
		if r.status != 200 || r.header.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: %s", where, r)
		}
		if err := json.Unmarshal(r.body, &st); err != nil || st.NodeID != 1 || len(st.Shards) != 1 {
			t.Fatalf("%s: %v %+v", where, err, st)
		}
	}
	status("signed, on the API listener", api.get("/cluster"))
	status("unsigned, on the metrics listener", ops.do(req{method: "GET", target: "/cluster", noSign: true}))
	wantError(t, api.do(req{method: "GET", target: "/cluster", noSign: true}), 400, "MissingAuthorizationHeader")
	wantError(t, api.get("/metrics"), 400, "InvalidRequestURL")

	// A single node has no /cluster on either.
	env := startEnv(t, envConfig{serverOpts: func(o *Options) { o.SeparateMetrics = true }})
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go env.srv.ServeMetrics(ln2)
	ops2 := &client{env: &testEnv{t: t, addr: ln2.Addr().String(), now: env.now}}
	wantError(t, ops2.do(req{method: "GET", target: "/cluster", noSign: true}), 400, "InvalidRequestURL")
	wantError(t, env.client().get("/cluster"), 400, "InvalidRequestURL")
}

// While a shutdown drains the API's requests in flight, the metrics
// listener stays up: /healthz answers 503 there (probes see the node
// going), and /metrics is still scraped. Both listeners used to close at
// once, so no probe ever saw the documented 503.
func TestMetricsListenerOutlivesTheDrain(t *testing.T) {
	env, ln := startSeparateMetrics(t, envConfig{skipShutdown: true})
	c := env.client()
	c.mustCreate("q")
	// A send whose body is still on its way holds the drain.
	finish := sendUnderWay(t, env, c, "q")
	waitFor(t, "the send under way", 10*time.Second, func() bool {
		ops := &client{env: &testEnv{t: t, addr: ln.Addr().String(), now: env.now}}
		defer ops.close()
		return value(t, scrape(t, ops), "smqd_http_connections") >= 2 // c's and the send's
	})
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		stopped <- env.srv.Shutdown(ctx)
	}()
	ops := &client{env: &testEnv{t: t, addr: ln.Addr().String(), now: env.now}}
	waitFor(t, "/healthz 503 on the metrics listener while the send drains", 10*time.Second, func() bool {
		r, err := ops.rawErr(ops.format("GET", "/healthz", "", map[string]string{}))
		ops.close()
		return err == nil && r.status == 503
	})
	if r := ops.send("GET", "/metrics", "", map[string]string{}); r.status != 200 {
		t.Fatalf("/metrics while the send drains: %s", r)
	}
	ops.close()
	finish()
	if err := <-stopped; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if _, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		t.Fatal("the metrics listener is still open after the shutdown")
	}
}

// sendUnderWay starts a send to queue on a connection of its own and
// writes all of it but its body's last bytes: a request in flight, which
// holds a shutdown's drain. finish writes the rest.
func sendUnderWay(t *testing.T, env *testEnv, c *client, queue string) (finish func()) {
	t.Helper()
	raw := c.build(req{method: "POST", target: "/queues/" + queue + "/messages", body: sendBody("late", "")})
	conn, err := net.Dial("tcp", env.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	cut := len(raw) - 10
	if _, err := conn.Write([]byte(raw[:cut])); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if _, err := conn.Write([]byte(raw[cut:])); err != nil {
			t.Fatal(err)
		}
	}
}
