package server

// Operations endpoints: GET /healthz and GET /metrics, NOT signed (they
// reveal queue names and counts, never message contents). By default both
// are served on the API listener too; with Options.SeparateMetrics, /metrics
// is served only by ServeMetrics, on an address of the operator's choosing
// (the daemon's --metrics-listen), and the API listener answers it with
// 400 InvalidRequestURL. /healthz stays on both: load balancers probe the
// API address, and it reveals nothing.
//
// /metrics is the Prometheus text format (version 0.0.4), written by hand:
//
//	smqd_http_request_duration_seconds{op}   histogram, every request by operation
//	smqd_http_responses_total{op,class}      counter, by status class (2xx, 4xx, 5xx)
//	smqd_http_errors_total{code}             counter, error answers by MNS code
//	smqd_http_connections, _max              gauges, connections held / the cap
//	smqd_http_accept_waits_total             counter, accepts held back at the cap
//	smqd_queues                              gauge
//	smqd_queue_messages{queue,state}         gauge, state = active | inactive | delayed
//	smqd_queue_{sent,received,deleted,expired}_total{queue}   counters
//	smqd_queue_long_polls_waiting{queue}     gauge
//	smqd_long_polls_waiting                  gauge, all queues
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
//	smqd_wal_{records,payload_bytes,bytes,compressed_records,writes,write_calls,
//	  fsyncs,segment_rolls,append_stalls,ring_reads,file_reads}_total   counters
//	smqd_wal_fsync_duration_seconds          histogram of fdatasync latency
//	smqd_wal_batch_records                   histogram of records per group-commit write
//
// Request metrics are fixed arrays of atomics: observing a request takes a
// few atomic adds and allocates nothing. Broker and storage metrics come
// from engine.Broker.Stats at scrape time (one snapshot per scrape; the
// index size is a walk of the index directory).

import (
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/smqd/smqd/engine"
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

const numBuckets = len(latencyBounds) + 1 // the last is +Inf

// latencyLEs are latencyBounds in seconds, as le label values.
var latencyLEs = func() []string {
	secs := make([]float64, len(latencyBounds))
	for i, d := range latencyBounds {
		secs[i] = d.Seconds()
	}
	return formatBounds(secs)
}()

// histogram is a fixed-bucket latency histogram of atomics (not cumulative;
// the writer sums).
type histogram struct {
	buckets [numBuckets]atomic.Uint64
	sumNs   atomic.Int64
}

func (h *histogram) observe(d time.Duration) {
	i := 0
	for i < len(latencyBounds) && d > latencyBounds[i] {
		i++
	}
	h.buckets[i].Add(1)
	h.sumNs.Add(int64(d))
}

// statusClasses are the response classes counted per operation.
var statusClasses = [...]string{"1xx", "2xx", "3xx", "4xx", "5xx"}

// metrics holds the process-wide request metrics of one Server.
type metrics struct {
	latency [numOps]histogram
	classes [numOps][len(statusClasses)]atomic.Uint64
	errors  [numCodes]atomic.Uint64
}

func (m *metrics) observe(o op, status int, d time.Duration) {
	m.latency[o].observe(d)
	c := status/100 - 1
	if c < 0 || c >= len(statusClasses) {
		c = len(statusClasses) - 1
	}
	m.classes[o][c].Add(1)
}

func (m *metrics) countError(c errCode) { m.errors[c].Add(1) }

// promWriter appends Prometheus text-format lines.
type promWriter struct{ b []byte }

func (w *promWriter) family(name, help, typ string) {
	w.b = append(w.b, "# HELP "...)
	w.b = append(w.b, name...)
	w.b = append(w.b, ' ')
	w.b = append(w.b, help...)
	w.b = append(w.b, "\n# TYPE "...)
	w.b = append(w.b, name...)
	w.b = append(w.b, ' ')
	w.b = append(w.b, typ...)
	w.b = append(w.b, '\n')
}

// sample writes name{labels} value; labels alternate name, value.
func (w *promWriter) sample(name string, value float64, labels ...string) {
	w.b = append(w.b, name...)
	if len(labels) > 0 {
		w.b = append(w.b, '{')
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.b = append(w.b, labels[i]...)
			w.b = append(w.b, '=', '"')
			w.b = appendLabelValue(w.b, labels[i+1])
			w.b = append(w.b, '"')
		}
		w.b = append(w.b, '}')
	}
	w.b = append(w.b, ' ')
	w.b = strconv.AppendFloat(w.b, value, 'g', -1, 64)
	w.b = append(w.b, '\n')
}

func appendLabelValue(b []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\':
			b = append(b, `\\`...)
		case '"':
			b = append(b, `\"`...)
		case '\n':
			b = append(b, `\n`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// histogram writes one histogram series from per-bucket (non-cumulative)
// counts and their upper bounds, formatted (les); a count without a bound
// is the +Inf bucket, which is added (empty) when missing. _count is the
// +Inf bucket's cumulative count, so that the two agree even if
// observations raced the snapshot.
func (w *promWriter) histogram(name string, les []string, counts []uint64, sum float64, labels ...string) {
	var cum uint64
	var lab [8]string
	l := append(lab[:0], labels...)
	l = append(l, "le", "")
	bucket, inf := name+"_bucket", false
	for i, c := range counts {
		cum += c
		le := "+Inf"
		if i < len(les) {
			le = les[i]
		}
		inf = inf || le == "+Inf"
		l[len(l)-1] = le
		w.sample(bucket, float64(cum), l...)
	}
	if !inf {
		l[len(l)-1] = "+Inf"
		w.sample(bucket, float64(cum), l...)
	}
	w.sample(name+"_sum", sum, labels...)
	w.sample(name+"_count", float64(cum), labels...)
}

// formatBounds formats histogram bounds as le label values.
func formatBounds(bounds []float64) []string {
	les := make([]string, len(bounds))
	for i, b := range bounds {
		if math.IsInf(b, 1) {
			les[i] = "+Inf"
		} else {
			les[i] = strconv.FormatFloat(b, 'g', -1, 64)
		}
	}
	return les
}

func (s *Server) writeRequestMetrics(w *promWriter) {
	w.family("smqd_http_request_duration_seconds", "Time from reading a request to handing its response to the connection, by operation.", "histogram")
	var counts [numBuckets]uint64
	for o := op(0); o < numOps; o++ {
		h := &s.metrics.latency[o]
		for i := range counts {
			counts[i] = h.buckets[i].Load()
		}
		w.histogram("smqd_http_request_duration_seconds", latencyLEs, counts[:], time.Duration(h.sumNs.Load()).Seconds(), "op", o.String())
	}
	w.family("smqd_http_responses_total", "Responses by operation and status class.", "counter")
	for o := op(0); o < numOps; o++ {
		for c, class := range statusClasses {
			if v := s.metrics.classes[o][c].Load(); v > 0 {
				w.sample("smqd_http_responses_total", float64(v), "op", o.String(), "class", class)
			}
		}
	}
	w.family("smqd_http_connections", "Client connections held open on the API listeners.", "gauge")
	w.sample("smqd_http_connections", float64(s.conns.open()))
	w.family("smqd_http_connections_max", "The connection cap (--max-conns).", "gauge")
	w.sample("smqd_http_connections_max", float64(cap(s.conns.slots)))
	w.family("smqd_http_accept_waits_total", "Times the API listeners stopped accepting because the connection cap was reached.", "counter")
	w.sample("smqd_http_accept_waits_total", float64(s.conns.waits.Load()))
	w.family("smqd_http_errors_total", "Error responses by MNS error code.", "counter")
	for c := errCode(0); c < numCodes; c++ {
		w.sample("smqd_http_errors_total", float64(s.metrics.errors[c].Load()), "code", c.String())
	}
}

func (s *Server) writeBrokerMetrics(w *promWriter) {
	st := s.b.Stats()
	w.family("smqd_queues", "Number of queues.", "gauge")
	w.sample("smqd_queues", float64(len(st.Queues)))
	w.family("smqd_long_polls_waiting", "Receives waiting for a message, all queues.", "gauge")
	w.sample("smqd_long_polls_waiting", float64(st.LongPolls))
	w.family("smqd_queue_messages", "Messages by queue and state.", "gauge")
	for i := range st.Queues {
		q := &st.Queues[i]
		w.sample("smqd_queue_messages", float64(q.Active), "queue", q.Name, "state", "active")
		w.sample("smqd_queue_messages", float64(q.Inactive), "queue", q.Name, "state", "inactive")
		w.sample("smqd_queue_messages", float64(q.Delayed), "queue", q.Name, "state", "delayed")
	}
	counters := []struct {
		name, help string
		get        func(i int) int64
	}{
		{"smqd_queue_sent_total", "Messages sent since start.", func(i int) int64 { return st.Queues[i].Sent }},
		{"smqd_queue_received_total", "Messages received since start (each receive of a message counts).", func(i int) int64 { return st.Queues[i].Received }},
		{"smqd_queue_deleted_total", "Messages deleted since start.", func(i int) int64 { return st.Queues[i].Deleted }},
		{"smqd_queue_expired_total", "Messages dropped by retention since start.", func(i int) int64 { return st.Queues[i].Expired }},
		{"smqd_queue_unreadable_total", "Messages dropped since start because their bodies were damaged on disk.", func(i int) int64 { return st.Queues[i].Unreadable }},
	}
	for _, c := range counters {
		w.family(c.name, c.help, "counter")
		for i := range st.Queues {
			w.sample(c.name, float64(c.get(i)), "queue", st.Queues[i].Name)
		}
	}
	w.family("smqd_queue_long_polls_waiting", "Receives waiting for a message, by queue.", "gauge")
	for i := range st.Queues {
		w.sample("smqd_queue_long_polls_waiting", float64(st.Queues[i].Waiting), "queue", st.Queues[i].Name)
	}
	writeStorageMetrics(w, &st.Storage)
}

// writeStorageMetrics writes the log, checkpoint, index and WAL metrics.
func writeStorageMetrics(w *promWriter, st *engine.StorageStats) {
	gauge := func(name, help string, v float64) {
		w.family(name, help, "gauge")
		w.sample(name, v)
	}
	counter := func(name, help string, v uint64) {
		w.family(name, help, "counter")
		w.sample(name, float64(v))
	}
	durable := 0.0
	if st.Durable {
		durable = 1
	}
	gauge("smqd_storage_durable", "1 if messages are kept in the write-ahead log and the index, 0 with --in-memory.", durable)
	gauge("smqd_log_segments", "Log segments held.", float64(st.Segments))
	gauge("smqd_log_bytes", "Bytes the log's segments span.", float64(st.LogBytes))
	gauge("smqd_log_live_bytes", "Bytes of log records that hold live message bodies.", float64(st.LiveBytes))
	gauge("smqd_log_end_position", "The log's end position (bytes appended since the log began).", float64(st.LogEnd))
	gauge("smqd_checkpoint_position", "Log position the index reflects (the last checkpoint).", float64(st.CheckpointAt))
	lag := 0.0
	if st.Durable && st.LogEnd > st.CheckpointAt {
		lag = float64(st.LogEnd - st.CheckpointAt)
	}
	gauge("smqd_checkpoint_lag_bytes", "Log bytes not yet folded into the index: replayed at the next start.", lag)
	w.family("smqd_checkpoints_total", "Checkpoints written since start.", "counter")
	w.sample("smqd_checkpoints_total", float64(st.Checkpoints))
	gauge("smqd_index_bytes", "Bytes of the index directory on disk.", float64(st.IndexBytes))
	w.family("smqd_storage_replay_waits_total", "Operations (sends, receives, deletes, visibility changes) that waited for the checkpointer because too much log lay beyond the last checkpoint.", "counter")
	w.sample("smqd_storage_replay_waits_total", float64(st.ReplayWaits))
	w.family("smqd_storage_unreadable_bodies_total", "Messages dropped because their bodies were damaged on disk (each is logged once with its id).", "counter")
	w.sample("smqd_storage_unreadable_bodies_total", float64(st.Unreadable))
	full := 0.0
	if st.DiskFull {
		full = 1
	}
	gauge("smqd_disk_full", "1 while free space is below the reserve: new messages and queues are refused, receives and deletes work.", full)
	w.family("smqd_disk_full_events_total", "Times the broker entered the disk-full state since start.", "counter")
	w.sample("smqd_disk_full_events_total", float64(st.DiskFullEvents))
	gauge("smqd_disk_free_bytes", "Free bytes of the data directory's file system at the last sample.", float64(st.FreeBytes))
	gauge("smqd_disk_reserve_bytes", "Free space below which new messages are refused (0: the guard is off).", float64(st.FreeSpaceReserve))

	s := &st.WAL
	counter("smqd_wal_records_total", "Records appended to the WAL.", s.Records)
	counter("smqd_wal_payload_bytes_total", "Payload bytes appended to the WAL, before compression.", s.PayloadBytes)
	counter("smqd_wal_bytes_total", "Framed bytes appended to the WAL (what reaches the files).", s.Bytes)
	counter("smqd_wal_compressed_records_total", "WAL records stored compressed.", s.CompressedRecords)
	counter("smqd_wal_writes_total", "Group-commit write batches.", s.Writes)
	counter("smqd_wal_write_calls_total", "Write calls on WAL segment files.", s.WriteCalls)
	counter("smqd_wal_fsyncs_total", "fdatasync calls on WAL segment files.", s.Fsyncs)
	counter("smqd_wal_segment_rolls_total", "WAL segment rolls.", s.Rolls)
	counter("smqd_wal_append_stalls_total", "Appends that waited for room in the WAL's ring buffer.", s.AppendStalls)
	counter("smqd_wal_ring_reads_total", "Body reads served from the WAL's in-memory ring.", s.RingReads)
	counter("smqd_wal_file_reads_total", "Body reads served from WAL segment files.", s.FileReads)
	counter("smqd_wal_spare_failures_total", "Failed attempts to prepare a new WAL segment file (retried with backoff).", s.SpareFailures)
	counter("smqd_wal_roll_stalls_total", "Segment rolls that had to wait for a segment file.", s.RollStalls)
	counter("smqd_wal_sticky_failures_total", "WAL write or fsync failures (the log stops taking changes until smqd is restarted).", s.StickyFailures)
	w.family("smqd_wal_fsync_duration_seconds", "Latency of each fdatasync of a WAL segment.", "histogram")
	w.histogram("smqd_wal_fsync_duration_seconds", formatBounds(s.FsyncSeconds.Bounds), s.FsyncSeconds.Counts, s.FsyncSeconds.Sum)
	w.family("smqd_wal_batch_records", "Records per group-commit write batch.", "histogram")
	w.histogram("smqd_wal_batch_records", formatBounds(s.BatchRecords.Bounds), s.BatchRecords.Counts, s.BatchRecords.Sum)
}

func (s *Server) serveMetrics(ctx *fasthttp.RequestCtx, st *reqState) {
	w := promWriter{b: respBody(ctx)}
	s.writeRequestMetrics(&w)
	s.writeBrokerMetrics(&w)
	ctx.Response.SetStatusCode(fasthttp.StatusOK)
	ctx.Response.Header.SetContentType("text/plain; version=0.0.4; charset=utf-8")
	ctx.Response.SwapBody(w.b)
}

// maxOpsConns caps the connections of the ServeMetrics listeners.
const maxOpsConns = 64

// handleOps serves the ServeMetrics listener: /metrics and /healthz; every
// other request is 400 InvalidRequestURL.
func (s *Server) handleOps(ctx *fasthttp.RequestCtx) {
	st := s.states.Get().(*reqState)
	defer func() { st.release(); s.states.Put(st) }()
	path, _, _ := splitTarget(stripAbsoluteForm(ctx.Request.Header.RequestURI()))
	switch r := route(ctx.Request.Header.Method(), path); r.op {
	case opMetrics:
		s.serveMetrics(ctx, st)
	case opHealthz:
		s.healthz(ctx)
	default:
		st.reqID = s.appendRequestID(st.reqID[:0], time.Now())
		setCommonHeaders(ctx, st.reqID)
		s.writeError(ctx, st, codeInvalidRequestURL, "only GET /metrics and GET /healthz are served on this address")
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
	if err := s.b.Health(); err != nil {
		ctx.Response.SetStatusCode(fasthttp.StatusServiceUnavailable)
		ctx.Response.SetBodyString("unhealthy: " + err.Error())
		return
	}
	ctx.Response.SetStatusCode(fasthttp.StatusOK)
	if s.b.Stats().Storage.DiskFull {
		ctx.Response.SetBodyString("ok (disk full: new messages are refused until space is freed)")
		return
	}
	ctx.Response.SetBodyString("ok")
}

// Requests returns the number of requests answered since start (all
// operations, all outcomes); the daemon uses it to notice idle periods.
func (s *Server) Requests() uint64 {
	var n uint64
	for o := range s.metrics.classes {
		for c := range s.metrics.classes[o] {
			n += s.metrics.classes[o][c].Load()
		}
	}
	return n
}
