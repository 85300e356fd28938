package server

import (
	"math"
	"net"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smqd/smqd/engine"
)

// promSample is one parsed sample line.
type promSample struct {
	name   string
	labels map[string]string
	value  float64
}

// parseProm parses Prometheus text format 0.0.4 strictly enough to catch
// encoder mistakes: every sample belongs to a family declared with HELP and
// TYPE before it (histograms through _bucket, _sum and _count), no family is
// declared twice, no series repeats, histogram buckets are cumulative with
// a +Inf bucket equal to _count. It returns the samples by series key
// (name plus sorted labels).
func parseProm(t *testing.T, text string) map[string]promSample {
	t.Helper()
	types := map[string]string{}
	helped := map[string]bool{}
	out := map[string]promSample{}
	if !strings.HasSuffix(text, "\n") {
		t.Fatal("metrics text does not end with a newline")
	}
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
			name, help, _ := strings.Cut(rest, " ")
			if helped[name] || help == "" {
				t.Fatalf("HELP of %s repeated or empty", name)
			}
			helped[name] = true
			continue
		}
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(rest, " ")
			if _, dup := types[name]; dup || !helped[name] {
				t.Fatalf("TYPE of %s repeated or without HELP", name)
			}
			switch typ {
			case "counter", "gauge", "histogram":
			default:
				t.Fatalf("type %q of %s", typ, name)
			}
			types[name] = typ
			continue
		}
		s := parseSampleLine(t, line)
		family := s.name
		if _, ok := types[family]; !ok {
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				if f, ok := strings.CutSuffix(s.name, suf); ok && types[f] == "histogram" {
					family = f
				}
			}
		}
		typ, ok := types[family]
		if !ok {
			t.Fatalf("sample %q before (or without) its TYPE line", line)
		}
		if typ == "counter" && !strings.HasSuffix(family, "_total") {
			t.Errorf("counter %s does not end in _total", family)
		}
		if typ == "counter" && s.value < 0 {
			t.Errorf("negative counter %q", line)
		}
		key := seriesKey(s.name, s.labels)
		if _, dup := out[key]; dup {
			t.Fatalf("series %s repeated", key)
		}
		out[key] = s
	}
	// Histograms: cumulative buckets, +Inf = _count.
	for family, typ := range types {
		if typ != "histogram" {
			continue
		}
		groups := map[string][]promSample{}
		for _, s := range out {
			if s.name != family+"_bucket" {
				continue
			}
			rest := map[string]string{}
			for k, v := range s.labels {
				if k != "le" {
					rest[k] = v
				}
			}
			k := seriesKey(family, rest)
			groups[k] = append(groups[k], s)
		}
		if len(groups) == 0 {
			t.Errorf("histogram %s has no buckets", family)
		}
		for k, bs := range groups {
			sort.Slice(bs, func(i, j int) bool { return leOf(t, bs[i]) < leOf(t, bs[j]) })
			for i := 1; i < len(bs); i++ {
				if bs[i].value < bs[i-1].value {
					t.Errorf("%s: buckets not cumulative: %v", k, bs)
				}
			}
			last := bs[len(bs)-1]
			if !math.IsInf(leOf(t, last), 1) {
				t.Errorf("%s has no +Inf bucket", k)
			}
			labels := map[string]string{}
			for lk, lv := range last.labels {
				if lk != "le" {
					labels[lk] = lv
				}
			}
			cnt, ok := out[seriesKey(family+"_count", labels)]
			if !ok || cnt.value != last.value {
				t.Errorf("%s: _count %v, +Inf bucket %v", k, cnt.value, last.value)
			}
			if _, ok := out[seriesKey(family+"_sum", labels)]; !ok {
				t.Errorf("%s has no _sum", k)
			}
		}
	}
	return out
}

func leOf(t *testing.T, s promSample) float64 {
	v, err := strconv.ParseFloat(s.labels["le"], 64)
	if err != nil {
		t.Fatalf("le %q of %s", s.labels["le"], s.name)
	}
	return v
}

func parseSampleLine(t *testing.T, line string) promSample {
	t.Helper()
	s := promSample{labels: map[string]string{}}
	head, val, ok := cutLast(line, " ")
	if !ok {
		t.Fatalf("bad line %q", line)
	}
	v, err := strconv.ParseFloat(val, 64)
	if err != nil {
		t.Fatalf("bad value in %q", line)
	}
	s.value = v
	name, labels, hasLabels := strings.Cut(head, "{")
	s.name = name
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == ':') {
			t.Fatalf("bad metric name in %q", line)
		}
	}
	if hasLabels {
		labels, ok = strings.CutSuffix(labels, "}")
		if !ok {
			t.Fatalf("bad labels in %q", line)
		}
		for labels != "" {
			k, rest, ok := strings.Cut(labels, `="`)
			if !ok {
				t.Fatalf("bad labels in %q", line)
			}
			var b strings.Builder
			i := 0
			for ; i < len(rest) && rest[i] != '"'; i++ {
				if rest[i] == '\\' && i+1 < len(rest) {
					i++
					switch rest[i] {
					case 'n':
						b.WriteByte('\n')
					default:
						b.WriteByte(rest[i])
					}
					continue
				}
				b.WriteByte(rest[i])
			}
			if i == len(rest) {
				t.Fatalf("unterminated label value in %q", line)
			}
			s.labels[k] = b.String()
			labels = strings.TrimPrefix(rest[i+1:], ",")
		}
	}
	return s
}

func cutLast(s, sep string) (string, string, bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
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

// A scrape allocates a bounded amount: it does not grow with the number of
// requests served, only with queues and buckets.
func TestMetricsScrapeAllocations(t *testing.T) {
	env := startEnv(t, envConfig{engineOpts: func(o *engine.Options) { o.Dir = t.TempDir() }})
	c := env.client()
	c.mustCreate("q")
	c.mustSend("q", "x", "")
	w := promWriter{}
	allocs := testing.AllocsPerRun(20, func() {
		w.b = w.b[:0]
		env.srv.writeRequestMetrics(&w)
		env.srv.writeBrokerMetrics(&w)
	})
	// Stats snapshots (queue list, histogram copies), label and bound
	// formatting: about a hundred small allocations (130 when written), not thousands.
	if allocs > 300 {
		t.Errorf("%v allocations per scrape", allocs)
	}
	t.Logf("%v allocations per scrape, %d bytes of text", allocs, len(w.b))
}

// latencyLEs spell latencyBounds.
func TestLatencyLEs(t *testing.T) {
	for i, d := range latencyBounds {
		if want := strconv.FormatFloat(d.Seconds(), 'g', -1, 64); latencyLEs[i] != want {
			t.Errorf("latencyLEs[%d] = %s, want %s", i, latencyLEs[i], want)
		}
	}
}

// With SeparateMetrics, /metrics is served only on the ServeMetrics
// listener; /healthz on both; nothing else on the metrics listener.
func TestSeparateMetrics(t *testing.T) {
	env := startEnv(t, envConfig{serverOpts: func(o *Options) { o.SeparateMetrics = true }})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go env.srv.ServeMetrics(ln)
	c := env.client()
	c.mustCreate("q")
	wantError(t, c.get("/metrics"), 400, "InvalidRequestURL")
	if r := c.send("GET", "/healthz", "", map[string]string{}); r.status != 200 {
		t.Fatalf("healthz on the API listener: %s", r)
	}
	ops := &client{env: &testEnv{t: t, addr: ln.Addr().String(), now: env.now}}
	r := ops.send("GET", "/metrics", "", map[string]string{})
	if r.status != 200 || !strings.Contains(string(r.body), `smqd_http_responses_total{op="CreateQueue",class="2xx"} 1`) {
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
