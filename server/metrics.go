package server

// Operations endpoints: GET /healthz and GET /metrics, NOT signed (they
// reveal queue names and counts, never message contents). By default both
// are served on the API listener too; with Options.SeparateMetrics, /metrics
// is served only by ServeMetrics, on an address of the operator's choosing
// (the daemon's --metrics-listen), and the API listener answers it with
// 400 InvalidRequestURL. /healthz stays on both: load balancers probe the
// API address, and it reveals nothing.
//
// /metrics is the Prometheus text format (version 0.0.4), gathered and
// encoded by github.com/prometheus/client_golang from a registry of the
// Server's own (never the library's global one):
//
//	smqd_http_request_duration_seconds{op}   histogram, every client request by operation
//	smqd_http_responses_total{op,class}      counter, by status class (2xx, 4xx, 5xx)
//	                                         (a request forwarded to another node counts on the node its client reached)
//	smqd_http_errors_total{code}             counter, error answers by MNS code
//	smqd_http_connections, _max              gauges, connections held / the cap
//	smqd_http_accept_waits_total             counter, accepts held back at the cap
//	smqd_queues                              gauge
//	smqd_queue_messages{queue,state}         gauge, state = active | inactive | delayed
//	smqd_queue_{sent,received,deleted,expired,unreadable}_total{queue}   counters
//	smqd_queue_dead_lettered_total{queue}    counter, messages moved to the dead-letter queue
//	smqd_queue_long_polls_waiting{queue}     gauge
//	smqd_long_polls_waiting                  gauge, all queues
//	smqd_messages{state}                     gauge, all queues (exact whatever MetricsPerQueue)
//	smqd_messages_{sent,received,deleted,expired}_total   counters, all queues
//	smqd_metrics_queues_omitted              gauge, queues without per-queue series
//
// Storage (engine.StorageStats; the WAL and index ones stay 0 with
// --in-memory, where smqd_storage_durable is 0):
//
//	smqd_storage_durable                     gauge, 1 when backed by the WAL and the index
//	smqd_log_segments                        gauge, log segments held
//	smqd_log_bytes, smqd_log_live_bytes      gauges, bytes the segments span / of live bodies
//	smqd_log_end_position                    gauge, the log's end position
//	smqd_checkpoint_position                 gauge, the log position the index reflects
//	smqd_checkpoint_lag_bytes                gauge, log end - checkpoint position
//	smqd_checkpoints_total                   counter
//	smqd_index_bytes                         gauge, bytes of the index directory
//	smqd_storage_replay_waits_total          counter, operations held back for the checkpointer
//	smqd_storage_unreadable_bodies_total     counter, bodies that failed their checksum
//	smqd_disk_full, smqd_disk_free_bytes, smqd_disk_reserve_bytes   gauges; _full_events_total
//	smqd_wal_{records,payload_bytes,bytes,compressed_records,writes,write_calls,
//	  fsyncs,segment_rolls,append_stalls,ring_reads,file_reads,spare_failures,
//	  roll_stalls,sticky_failures}_total     counters
//	smqd_wal_fsync_duration_seconds          histogram of fdatasync latency
//	smqd_wal_batch_records                   histogram of records per group-commit write
//
// and the library's standard process_* (resident memory, CPU seconds, open
// file descriptors, ...) and go_* (goroutines, GC, memory) families.
//
// Request metrics are the library's own instruments, resolved once per
// operation (and per status class on its first response), so observing a
// request is a few atomic operations and allocates nothing: measured
// against the hand-written atomics they replaced, the difference is within
// the noise of the HTTP cycle benchmark (docs/operations.md, "Metrics").
// Broker and storage metrics are a collector (metrics_broker.go) that takes
// one engine.Broker.Stats snapshot per scrape.

import (
	"bytes"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"
	"github.com/valyala/fasthttp"
)

// latencyBounds are the upper bounds of the latency buckets.
var latencyBounds = [...]time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
	30 * time.Second,
}

// statusClasses are the response classes counted per operation.
var statusClasses = [...]string{"1xx", "2xx", "3xx", "4xx", "5xx"}

// metrics holds the request metrics of one Server and the registry that
// serves every family.
type metrics struct {
	reg      *prometheus.Registry
	latency  [numOps]prometheus.Observer
	classVec *prometheus.CounterVec
	// classes[o][c] is resolved from classVec on the first response of
	// that operation and class, so that a series appears with its first
	// response (as before) and later responses skip the label lookup.
	classes  [numOps][len(statusClasses)]atomic.Pointer[counterRef]
	errors   [numCodes]prometheus.Counter
	requests atomic.Uint64 // all responses, for Requests

	bufMu sync.Mutex
	buf   bytes.Buffer // guarded by bufMu: the encoded exposition of the last scrape

	shared sharedExposition // the API listener's scrapes (serveSharedMetrics)
}

// sharedExposition is what the API listener's /metrics, which anyone who
// reaches the port may ask for unsigned, serves between gathers: a gather
// costs O(queues) (12 ms and 8 MB of garbage with 10,000 queues), so an
// unauthenticated client asking in a loop took a CPU and the GC from
// every signed request (security2 audit, 2026-12-07: a sequential
// client's requests in 3 s fell from 107,816 to 7,596 under 4 such
// connections). A gather over at least sharedMetricsMinQueues queues
// is served again, without gathering, for sharedMetricsSpacing times
// what it cost (by Options.Now), so scrapes use at most about a tenth of
// a CPU however often they come; a gather over fewer queues is cheap and
// never reused, so what a scrape shows there is as fresh as before.
// Scrapes of the API listener run one at a time: those that wait get the
// one before them when it may be reused.
type sharedExposition struct {
	mu     sync.Mutex
	body   []byte       // guarded by mu: the last gather's exposition, if it may be reused
	next   time.Time    // guarded by mu: Options.Now until which body is served
	queues atomic.Int64 // the queues the last gather walked, exposed or not (brokerCollector)
}

const (
	sharedMetricsMinQueues = 1000
	sharedMetricsSpacing   = 9
	// sharedMetricsMaxReuse bounds the reuse: a gather's duration is wall
	// time, and one that waited (a cluster node's Status waits up to a
	// second for a shard loop that does not answer) is no costlier for
	// it; without the bound its text was served again for 9 s. 2 s keeps
	// the 9 times of a gather of 10,000 queues with --metrics-per-queue
	// all (160 ms).
	sharedMetricsMaxReuse = 2 * time.Second
)

// counterRef boxes a resolved counter for an atomic.Pointer.
type counterRef struct{ c prometheus.Counter }

// init registers the request metrics, the process and Go runtime
// collectors and the broker collector in a new registry.
func (m *metrics) init(s *Server) {
	m.reg = prometheus.NewRegistry()
	secs := make([]float64, len(latencyBounds))
	for i, d := range latencyBounds {
		secs[i] = d.Seconds()
	}
	lat := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "smqd_http_request_duration_seconds",
		Help:    "Time from reading a request to handing its response to the connection, by operation.",
		Buckets: secs,
	}, []string{"op"})
	for o := op(0); o < numOps; o++ {
		m.latency[o] = lat.WithLabelValues(o.String())
	}
	m.classVec = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "smqd_http_responses_total",
		Help: "Responses by operation and status class.",
	}, []string{"op", "class"})
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "smqd_http_errors_total",
		Help: "Error responses by MNS error code.",
	}, []string{"code"})
	for c := errCode(0); c < numCodes; c++ {
		m.errors[c] = errs.WithLabelValues(c.String())
	}
	reopens := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "smqd_storage_reopens_total",
		Help: "Times the broker was closed and opened again in place after its storage failed (a failed write or fsync of the log).",
	}, func() float64 { return float64(s.reopens.Load()) })
	backups := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "smqd_backups_total",
		Help: "Backups (GET /backup) sent whole, with their end frame.",
	}, func() float64 { return float64(s.backups.ok.Load()) })
	backupsFailed := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "smqd_backups_failed_total",
		Help: "Backups (GET /backup) that ended without their end frame: the client got an archive a restore refuses.",
	}, func() float64 { return float64(s.backups.failed.Load()) })
	lastBackup := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "smqd_backup_last_success_timestamp_seconds",
		Help: "When the last whole backup ended (Unix seconds); 0 if none since the start. Alert on its age.",
	}, func() float64 { return float64(s.backups.lastOK.Load()) / 1e9 })
	runningBackup := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "smqd_backup_running_seconds",
		Help: "How long the backup in progress has run; 0 if none. It holds the one backup slot: alert on a long one (a client reading slowly).",
	}, func() float64 {
		if t := s.backups.since.Load(); t != 0 {
			return time.Duration(monoNow() - t).Seconds()
		}
		return 0
	})
	m.reg.MustRegister(lat, m.classVec, errs, reopens, backups, backupsFailed, lastBackup, runningBackup,
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector(),
		newBrokerCollector(s),
	)
	if s.c != nil {
		rerouted := prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "smqd_cluster_rerouted_requests_total",
			Help: "Client requests this node ran again where their shard is led now: the leader they reached was handing its lead over, or no longer led the shard, and nothing of them had run; or reads forwarded to a leader whose lead moved before it answered.",
		}, func() float64 { return float64(s.rerouted.Load()) })
		m.reg.MustRegister(newClusterCollector(s.c), rerouted)
	}
	m.reg.MustRegister(s.opts.Collectors...)
}

func (m *metrics) observe(o op, status int, d time.Duration) {
	m.latency[o].Observe(d.Seconds())
	m.respond(o, status)
}

// respond counts a response by operation and status class, without its
// latency (a request fasthttp could not read has no start: observe).
func (m *metrics) respond(o op, status int) {
	c := status/100 - 1
	if c < 0 || c >= len(statusClasses) {
		c = len(statusClasses) - 1
	}
	ref := m.classes[o][c].Load()
	if ref == nil {
		ref = &counterRef{m.classVec.WithLabelValues(o.String(), statusClasses[c])}
		m.classes[o][c].Store(ref) // a racing first response stores the same counter
	}
	ref.c.Inc()
	m.requests.Add(1)
}

func (m *metrics) countError(c errCode) { m.errors[c].Inc() }

// serveMetrics gathers every family and writes the text exposition.
func (s *Server) serveMetrics(ctx *fasthttp.RequestCtx, st *reqState) {
	mfs, err := s.metrics.reg.Gather()
	if err != nil {
		// A collector reported a problem (never expected): serve what was
		// gathered, and say so in the log.
		s.log.Error("metrics gather", "err", err)
	}
	m := &s.metrics
	m.bufMu.Lock()
	defer m.bufMu.Unlock()
	m.buf.Reset()
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&m.buf, mf); err != nil {
			s.log.Error("metrics encode", "family", mf.GetName(), "err", err)
		}
	}
	ctx.Response.SetStatusCode(fasthttp.StatusOK)
	ctx.Response.Header.SetContentType("text/plain; version=0.0.4; charset=utf-8")
	ctx.Response.SetBody(m.buf.Bytes())
	if m.buf.Cap() > 16<<20 {
		m.buf = bytes.Buffer{} // do not keep a huge exposition's buffer
	}
}

// serveSharedMetrics serves /metrics on the API listener
// (sharedExposition).
func (s *Server) serveSharedMetrics(ctx *fasthttp.RequestCtx, st *reqState) {
	x := &s.metrics.shared
	x.mu.Lock()
	defer x.mu.Unlock()
	now := s.opts.Now()
	if x.body != nil && now.Before(x.next) {
		ctx.Response.SetStatusCode(fasthttp.StatusOK)
		ctx.Response.Header.SetContentType("text/plain; version=0.0.4; charset=utf-8")
		ctx.Response.SetBody(x.body)
		return
	}
	start := time.Now()
	s.serveMetrics(ctx, st)
	if x.queues.Load() >= sharedMetricsMinQueues {
		x.body = append(x.body[:0], ctx.Response.Body()...)
		x.next = now.Add(min(sharedMetricsSpacing*time.Since(start), sharedMetricsMaxReuse))
	} else {
		x.body = nil
	}
}

// maxOpsConns caps the connections of the ServeMetrics listeners.
const maxOpsConns = 64

// handleOps serves the ServeMetrics listener: /metrics, /healthz and a
// cluster node's /cluster; every other request is 400 InvalidRequestURL.
func (s *Server) handleOps(ctx *fasthttp.RequestCtx) {
	st := s.states.Get().(*reqState)
	defer func() { st.release(); s.states.Put(st) }()
	path, _, _ := splitTarget(stripAbsoluteForm(ctx.Request.Header.RequestURI()))
	switch r := route(ctx.Request.Header.Method(), path); r.op {
	case opMetrics:
		s.serveMetrics(ctx, st)
	case opHealthz:
		s.healthz(ctx)
	case opCluster:
		st.reqID = s.appendRequestID(st.reqID[:0], time.Now())
		setCommonHeaders(ctx, st.reqID)
		s.serveClusterStatus(ctx, st)
	default:
		st.reqID = s.appendRequestID(st.reqID[:0], time.Now())
		setCommonHeaders(ctx, st.reqID)
		s.writeError(ctx, st, codeInvalidRequestURL, "only GET /metrics, GET /healthz and GET /cluster are served on this address")
	}
}

// healthz answers 200 "ok" while the broker can take changes, 503 with the
// reason while it cannot (shutting down, a failed log that needs a restart,
// a log that cannot make its next segment file). A full disk answers 200
// with a note: the broker still serves receives and deletes, and a load
// balancer must keep sending consumers to it.
func (s *Server) healthz(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.SetContentType("text/plain; charset=utf-8")
	if s.closing.Load() {
		ctx.Response.SetStatusCode(fasthttp.StatusServiceUnavailable)
		ctx.Response.SetBodyString("shutting down")
		return
	}
	if s.draining.Load() {
		ctx.Response.SetStatusCode(fasthttp.StatusServiceUnavailable)
		ctx.Response.SetBodyString("draining: shutting down soon (requests are still served)")
		return
	}
	if err := s.health(); err != nil {
		ctx.Response.SetStatusCode(fasthttp.StatusServiceUnavailable)
		ctx.Response.SetBodyString("unhealthy: " + err.Error())
		return
	}
	ctx.Response.SetStatusCode(fasthttp.StatusOK)
	if s.diskFull() {
		if s.c != nil {
			// A member hands its leads to members with room and forwards
			// sends to them: it refuses none itself.
			ctx.Response.SetBodyString("ok (disk full: this node hands the shards it leads to members with room and forwards requests to them until space is freed)")
			return
		}
		ctx.Response.SetBodyString("ok (disk full: new messages are refused until space is freed)")
		return
	}
	ctx.Response.SetBodyString("ok")
}

// Requests returns the number of requests answered since start (all
// operations, all outcomes); the daemon uses it to notice idle periods.
func (s *Server) Requests() uint64 { return s.metrics.requests.Load() }
