package server

// Operations endpoints: GET /healthz and GET /metrics, served on the same
// listener as the API and NOT signed (they reveal queue names and counts,
// never message contents; bind the listener to a private address, or put a
// proxy in front, if queue names are sensitive).
//
// /metrics is the Prometheus text format (version 0.0.4), written by hand:
//
//	smqd_http_request_duration_seconds{op}   histogram, every request by operation
//	smqd_http_responses_total{op,class}      counter, by status class (2xx, 4xx, 5xx)
//	smqd_http_errors_total{code}             counter, error answers by MNS code
//	smqd_queues                              gauge
//	smqd_queue_messages{queue,state}         gauge, state = active | inactive | delayed
//	smqd_queue_{sent,received,deleted,expired}_total{queue}   counters
//	smqd_queue_long_polls_waiting{queue}     gauge
//	smqd_long_polls_waiting                  gauge, all queues
//
// Request metrics are fixed arrays of atomics: observing a request takes a
// few atomic adds and allocates nothing. Broker metrics come from
// engine.Broker.Stats at scrape time. Storage metrics (WAL fsync latency,
// group-commit batch sizes) are to be added to writeBrokerMetrics with the
// same promWriter calls once the engine reports them.

import (
	"strconv"
	"sync/atomic"
	"time"

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

// histogram writes one histogram series: per-bucket (non-cumulative)
// counts with their upper bounds in seconds, the last being +Inf.
func (w *promWriter) histogram(name string, bounds []float64, counts []uint64, sum float64, labelName, labelValue string) {
	var cum uint64
	for i, c := range counts {
		cum += c
		le := "+Inf"
		if i < len(bounds) {
			le = strconv.FormatFloat(bounds[i], 'g', -1, 64)
		}
		w.sample(name+"_bucket", float64(cum), labelName, labelValue, "le", le)
	}
	w.sample(name+"_sum", sum, labelName, labelValue)
	w.sample(name+"_count", float64(cum), labelName, labelValue)
}

func (s *Server) writeRequestMetrics(w *promWriter) {
	bounds := make([]float64, len(latencyBounds))
	for i, d := range latencyBounds {
		bounds[i] = d.Seconds()
	}
	w.family("smqd_http_request_duration_seconds", "Time from reading a request to handing its response to the connection, by operation.", "histogram")
	var counts [numBuckets]uint64
	for o := op(0); o < numOps; o++ {
		h := &s.metrics.latency[o]
		for i := range counts {
			counts[i] = h.buckets[i].Load()
		}
		w.histogram("smqd_http_request_duration_seconds", bounds, counts[:], time.Duration(h.sumNs.Load()).Seconds(), "op", o.String())
	}
	w.family("smqd_http_responses_total", "Responses by operation and status class.", "counter")
	for o := op(0); o < numOps; o++ {
		for c, class := range statusClasses {
			if v := s.metrics.classes[o][c].Load(); v > 0 {
				w.sample("smqd_http_responses_total", float64(v), "op", o.String(), "class", class)
			}
		}
	}
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
}

func (s *Server) serveMetrics(ctx *fasthttp.RequestCtx, st *reqState) {
	w := promWriter{b: respBody(ctx)}
	s.writeRequestMetrics(&w)
	s.writeBrokerMetrics(&w)
	ctx.Response.SetStatusCode(fasthttp.StatusOK)
	ctx.Response.Header.SetContentType("text/plain; version=0.0.4; charset=utf-8")
	ctx.Response.SwapBody(w.b)
}

func (s *Server) healthz(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.SetContentType("text/plain; charset=utf-8")
	if s.closing.Load() {
		ctx.Response.SetStatusCode(fasthttp.StatusServiceUnavailable)
		ctx.Response.SetBodyString("shutting down")
		return
	}
	ctx.Response.SetStatusCode(fasthttp.StatusOK)
	ctx.Response.SetBodyString("ok")
}
